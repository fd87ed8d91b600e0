#!/usr/bin/env python3
"""Verify a kobo webhook delivery (Python 3, standard library only).

Usage: KOBO_WEBHOOK_SECRET=whsec_... python3 verify.py HEADERS_FILE BODY_FILE

HEADERS_FILE holds the request's headers, one `Name: value` a line (as
`curl -D` writes them); BODY_FILE the raw body, byte for byte. Exits 0 when
the signature is valid and fresh, 1 when it is not, 2 on a usage error.
In a web app, call `verify()` with the raw body before parsing it.
"""
import hashlib
import hmac
import os
import sys
import time

TOLERANCE_SECONDS = 300


def verify(secret, signature_header, event_id, body, now=None):
    """True when `Service-Signature` signs `<t>.<event id>.<body>` with the secret."""
    parts = [p.split("=", 1) for p in signature_header.split(",") if "=" in p]
    timestamps = [v for k, v in parts if k == "t"]
    signatures = [v for k, v in parts if k == "v1"]
    if len(timestamps) != 1 or not timestamps[0].isdigit() or not signatures:
        return False
    t = int(timestamps[0])
    now = time.time() if now is None else now
    if abs(now - t) > TOLERANCE_SECONDS:
        return False  # too old (or from the future): a replay
    signed = f"{t}.{event_id}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in signatures)


def main():
    secret = os.environ.get("KOBO_WEBHOOK_SECRET", "")
    if len(sys.argv) != 3 or not secret:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    headers = {}
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
    with open(sys.argv[2], "rb") as f:
        body = f.read()
    ok = verify(
        secret,
        headers.get("service-signature", ""),
        headers.get("service-event-id", ""),
        body,
    )
    print("valid" if ok else "invalid signature")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
