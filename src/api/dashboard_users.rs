//! `POST /admin/v1/merchants/{id}/users`: the operator invites a person to
//! a merchant's dashboard (the first owner, usually) and gets the one-time
//! set-password link to hand over. Owners invite the rest from the
//! dashboard (src/dashboard/team.rs), through the same
//! [`dashboard_user::invite`].

use actix_web::{web, HttpRequest};
use serde::Deserialize;

use kobo_actors::admin;
use kobo_actors::dashboard_user::{self, Role};
use kobo_actors::DomainError;

use super::endpoint::{self, Endpoint};
use super::{body, parse_id, resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(resource("/admin/v1/merchants/{id}/users").route(web::post().to(invite)));
}

/// `{email, role?}` (role: `owner`, the default, `developer` or `viewer`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InviteUser {
    #[serde(deserialize_with = "body::required_text::<_, 254>")]
    email: String,
    #[serde(deserialize_with = "body::text::<_, 16>")]
    role: Option<String>,
}

async fn invite(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    let audit = endpoint::audit(&req);
    Endpoint::operator(201)
        .operate_with(req, state, payload, |state, b: InviteUser| async move {
            let role = match b.role.as_deref() {
                None => Role::Owner,
                Some(r) => Role::parse(r).ok_or_else(|| {
                    DomainError::invalid("role", "role must be owner, developer or viewer")
                })?,
            };
            let merchant = parse_id(&path, "merchant")?;
            admin::load_merchant(&state.kobo, merchant)?
                .ok_or_else(|| DomainError::not_found("merchant", merchant))?;
            let invited =
                dashboard_user::invite(&state.kobo, merchant, &b.email, role, None, &audit).await?;
            Ok(
                serde_json::to_value(invited.view(&state.kobo.config.base_url))
                    .expect("a dashboard user view serializes"),
            )
        })
        .await
}
