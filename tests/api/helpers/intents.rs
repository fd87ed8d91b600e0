//! Payment intent fixtures the test modules share: intents created, paid
//! or succeeded, their bodies, card calls and charge attempts, and the
//! hosted checkout page's credential.

use serde_json::{json, Value};

use super::{Resp, TestApp};

impl TestApp {
    pub async fn create_intent(&self, key: &str, body: Value) -> Value {
        let r = self.post(key, "/v1/payment_intents", body).await;
        r.assert_status(201);
        r.body
    }

    /// Creates an intent from `body` and makes it successful with the test
    /// helper (captured into `pending`); answers the helper's answer.
    pub async fn succeeded_intent(&self, key: &str, body: Value) -> Value {
        let pi = self.create_intent(key, body).await;
        let id = pi["id"].as_str().unwrap();
        let path = format!("/v1/test_helpers/payment_intents/{id}/succeed");
        let r = self.post(key, &path, json!({})).await;
        r.assert_status(200);
        r.body
    }

    /// Creates a naira intent and pays it by sandbox transfer.
    pub async fn paid_intent(&self, key: &str, amount: i64) -> Value {
        let pi = self
            .create_intent(key, json!({"amount": amount, "currency": "NGN"}))
            .await;
        let id = pi["id"].as_str().unwrap();
        let r = self
            .post(
                key,
                &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
                json!({}),
            )
            .await;
        r.assert_status(200);
        assert_eq!(r.body["status"], "successful");
        r.body
    }

    /// Every payment intent the key sees, newest first (walks the pages).
    pub async fn all_intents(&self, key: &str) -> Vec<Value> {
        self.all_pages(key, "/v1/payment_intents").await
    }

    /// The config block of the hosted checkout page at `checkout_url` (a
    /// create response's; asked of this server's current address, which a
    /// restart changes), as the page's script reads it.
    pub async fn checkout_config(&self, checkout_url: &str) -> Value {
        let path = &checkout_url[checkout_url.find("/c/").expect("a /c/ link")..];
        let res = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("page");
        assert_eq!(res.status().as_u16(), 200, "{checkout_url}");
        let html = res.text().await.unwrap();
        let start = html
            .find(r#"id="checkout-config">"#)
            .expect("the page has its config block");
        let rest = &html[start + r#"id="checkout-config">"#.len()..];
        let json = &rest[..rest.find("</script>").expect("closed")];
        serde_json::from_str(json).expect("the config is JSON")
    }

    /// The credential the hosted checkout page of a create response calls
    /// the API with.
    pub async fn checkout_credential(&self, created: &Value) -> String {
        let config = self
            .checkout_config(created["checkout_url"].as_str().expect("checkout_url"))
            .await;
        config["credential"]
            .as_str()
            .expect("the page carries a checkout credential")
            .to_string()
    }
}

/// A naira payment intent's body.
pub fn ngn(amount: i64) -> Value {
    json!({"amount": amount, "currency": "NGN"})
}

/// An object's `id`.
pub fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Pays the payment intent `id` by card (`bearer`: a secret key, client
/// secret or checkout credential).
pub async fn pay(app: &TestApp, bearer: &str, id: &str, body: Value) -> Resp {
    app.post(bearer, &format!("/v1/payment_intents/{id}/card"), body)
        .await
}

/// The payment intent's charge attempts, oldest first.
pub async fn attempts(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    let r = app
        .get(key, &format!("/v1/payment_intents/{id}/charge_attempts"))
        .await;
    r.assert_status(200);
    r.body["data"].as_array().unwrap().clone()
}

/// Pays a dollar intent of `amount` cents and releases it to `available`
/// at once; answers the USD available balance.
pub async fn fund_dollars(app: &TestApp, key: &str, amount: i64) -> i64 {
    app.succeeded_intent(key, json!({"amount": amount, "currency": "USD"}))
        .await;
    app.post(key, "/v1/test_helpers/balance/release_pending", json!({}))
        .await
        .assert_status(200);
    app.balance(key, "available", "USD").await
}
