"""Schemathesis hooks for scripts/fuzz.sh (loaded through SCHEMATHESIS_HOOKS).

Every POST gets a fresh Idempotency-Key: the service answers a key reused
with another body with 422 `idempotency_key_reused`, which is right but
would make every later case of an operation test the replay path instead
of the handler.
"""

import uuid

import schemathesis


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.method.upper() == "POST":
        if case.headers is None:
            case.headers = {}
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
