"""Samples for training a stored-JSON dictionary (scripts/train_dictionary.sh).

usage: samples.py BASE_URL SECRET_KEY OUT_DIR

Writes the bodies of the POST answers a sandbox merchant gets (payment
intent creates with and without their optional fields, transfers,
refunds; errors too) and the objects of the events they made, one file
each, with the merchant's brand id and name replaced by varied ones so
the dictionary learns the shape of a value, not one merchant's.
"""
import json, os, random, re, sys, urllib.error, urllib.request, uuid
base, key, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
n = 0
def call(method, path, body=None, idem=True):
    global n
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + key)
    req.add_header("content-type", "application/json")
    if method == "POST":
        req.add_header("Idempotency-Key", os.urandom(16).hex())
    try:
        with urllib.request.urlopen(req) as r:
            text = r.read()
    except urllib.error.HTTPError as e:
        text = e.read()
    if method == "POST":
        open(f"{out}/r{n:05d}.json", "wb").write(text); n += 1
    return json.loads(text)
random.seed(7)
ids = []
for i in range(400):
    body = {"amount": random.choice([50000, 250000, 1000000, random.randint(10000, 99999999)]),
            "currency": random.choice(["NGN"] * 5 + ["USD"])}
    if random.random() < 0.3: body["reference"] = f"order-{random.randint(1000, 999999)}"
    if random.random() < 0.3: body["description"] = random.choice(["Order", "Invoice payment", "Subscription", "Goods"])
    if random.random() < 0.3: body["customer_email"] = f"buyer{random.randint(1, 9999)}@example.com"
    if random.random() < 0.2: body["metadata"] = {"order_id": str(random.randint(1, 99999))}
    pi = call("POST", "/v1/payment_intents", body)
    if "id" in pi: ids.append(pi["id"])
for pid in ids[: len(ids) * 2 // 3]:
    call("POST", f"/v1/test_helpers/payment_intents/{pid}/simulate_transfer", {})
for pid in ids[:60]:
    call("POST", "/v1/refunds", {"payment_intent": pid, "amount": 10000})
after = None
m = 0
while True:
    q = "/v1/events?limit=100" + (f"&starting_after={after}" if after else "")
    page = call("GET", q)
    for ev in page.get("data", []):
        obj = ev.get("data", {}).get("object")
        if obj is not None:
            open(f"{out}/e{m:05d}.json", "w").write(json.dumps(obj, separators=(",", ":"), sort_keys=True)); m += 1
    if not page.get("has_more"): break
    after = page["data"][-1]["id"]
print(n, "responses", m, "event objects")

# One merchant made every sample: vary what would otherwise repeat in all.
names = ["ADEBAYO FOODS", "LAGOS TECH HUB", "KANO TEXTILES LTD", "ABUJA MOTORS",
         "IBADAN BOOKS", "ENUGU PHARMACY", "PORT HARCOURT OIL SERVICES"]
brand = None
for f in sorted(os.listdir(out)):
    found = re.search(r'"brand":"([0-9a-f-]{36})"', open(f"{out}/{f}").read())
    if found:
        brand = found.group(1)
        break
for f in sorted(os.listdir(out)):
    text = open(f"{out}/{f}").read()
    if brand:
        text = text.replace(brand, str(uuid.uuid4()))
    text = text.replace("DICTIONARY SAMPLES", random.choice(names))
    open(f"{out}/{f}", "w").write(text)
