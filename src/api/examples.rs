//! What the served OpenAPI documents add to the generated ones: `servers`
//! (the base URL) and, on every operation, a curl example that works
//! against the sandbox. Used by both documents (`/v1` and the operator
//! API); imports neither.

use serde_json::{json, Value};

/// Request bodies that work against the sandbox with a test key, by
/// operation id (the rest show their schema only).
fn body_example(operation: &str) -> Option<Value> {
    Some(match operation {
        "create_payment_intent" => {
            json!({"amount": 500000, "currency": "NGN", "reference": "order-1001"})
        }
        "create_brand" => json!({"name": "Mama Put Kitchen"}),
        "create_bank_account" => {
            json!({"bank_code": "058", "account_number": "0123456789"})
        }
        // The operator API.
        "create_merchant" => json!({"name": "Mama Put Kitchen"}),
        "update_merchant" => json!({"settings": {"live_approved": true}}),
        "roll_keys" => json!({"mode": "test"}),
        "publish_fx_rate" => json!({"rate": 160000}),
        "advance_clock" => json!({"seconds": 86400}),
        _ => return None,
    })
}

/// Adds `servers` (the base URL) and, to every operation, a curl example.
/// `admin`: the operator API (admin token, no Idempotency-Key).
pub fn finish_document(doc: &str, base: &str, admin: bool) -> String {
    let mut doc: Value = serde_json::from_str(doc).expect("an OpenAPI document is JSON");
    doc["servers"] = json!([{"url": base, "description": "this kobo server"}]);
    let Some(paths) = doc["paths"].as_object_mut() else {
        return doc.to_string();
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !matches!(method.as_str(), "get" | "post" | "put" | "patch" | "delete") {
                continue;
            }
            annotate(path, method, op, base, admin);
        }
    }
    doc.to_string()
}

fn annotate(path: &str, method: &str, op: &mut Value, base: &str, admin: bool) {
    let id = op["operationId"].as_str().unwrap_or("").to_string();
    let public = op["security"].as_array().is_some_and(|s| {
        s.iter()
            .all(|r| r.as_object().is_some_and(|o| o.is_empty()))
    });
    let idem_key = format!("docs-{}-1", id.replace('_', "-"));
    let mut needs_idem = false;
    // `get_mut`, never `op[..]` on the mutable value: that inserts nulls.
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for p in params {
            if p["in"] == "header" && p["name"] == "Idempotency-Key" {
                p["example"] = json!(idem_key);
                needs_idem = true;
            }
        }
    }
    let body = body_example(&id);
    if let Some(b) = &body {
        if let Some(media) = op
            .get_mut("requestBody")
            .and_then(|b| b.get_mut("content"))
            .and_then(|c| c.get_mut("application/json"))
            .and_then(Value::as_object_mut)
        {
            media.insert("example".into(), b.clone());
        }
    }
    // `{id}` becomes `$ID`: a shell variable the reader sets.
    let mut url = String::from(base);
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        url.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .unwrap_or(rest.len() - 1);
        url.push('$');
        url.push_str(&rest[open + 1..close].to_uppercase());
        rest = &rest[close + 1..];
    }
    url.push_str(rest);
    let mut curl = if method == "get" {
        format!("curl \"{url}\"")
    } else {
        format!("curl -X {} \"{url}\"", method.to_uppercase())
    };
    if !public {
        let var = if admin { "ADMIN_TOKEN" } else { "KEY" };
        curl.push_str(&format!(" \\\n  -H \"Authorization: Bearer ${var}\""));
    }
    if needs_idem {
        curl.push_str(&format!(" \\\n  -H 'Idempotency-Key: {idem_key}'"));
    }
    if let Some(b) = &body {
        curl.push_str(&format!(
            " \\\n  -H 'Content-Type: application/json' \\\n  -d '{b}'"
        ));
    }
    let who = if public {
        ""
    } else if admin {
        " (the admin token in `$ADMIN_TOKEN`)"
    } else {
        " (a test secret key in `$KEY`)"
    };
    let mut description = op["description"].as_str().unwrap_or("").to_string();
    if !description.is_empty() {
        description.push_str("\n\n");
    }
    description.push_str(&format!("**Example**{who}:\n\n```sh\n{curl}\n```"));
    op["description"] = json!(description);
    op["x-codeSamples"] = json!([{"lang": "Shell", "label": "curl", "source": curl}]);
}
