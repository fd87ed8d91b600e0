//! The merchant dashboard's people: dashboard users (each belongs to one
//! merchant, with a role), their one-time set-password invitations, and
//! their sign-in sessions.
//!
//! Passwords are hashed with argon2id (the `argon2` crate, PHC strings with
//! their own salt and parameters); tokens (invitations, sessions) are 256
//! random bits given to the person once and stored only as their SHA-256.
//! Nothing here knows HTTP: `src/dashboard` turns sessions into cookies.
//!
//! `session.rs` holds sessions (lifetimes, touch, revocation); this file
//! users, roles and invitations.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, KeyBuf, Table};

use crate::audit::{Audit, AuditAction, Record};
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::{new_id, random_base62, sha256_hex};

mod password;
pub mod session;

pub use password::{hash_password, verify_password, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS};
pub use session::*;

/// How long a set-password link works.
pub const INVITATION_TTL_HOURS: i64 = 72;

/// Longest accepted email address.
pub const MAX_EMAIL_CHARS: usize = 254;

/// What a dashboard user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything: keys, payouts, settings, the team.
    Owner,
    /// Payments, refunds, webhooks and the request log; no keys, payouts,
    /// settings or team.
    Developer,
    /// Reads only.
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Developer => "developer",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "developer" => Some(Role::Developer),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }

    /// Rolls keys, sends payouts, changes settings and the team.
    pub fn is_owner(self) -> bool {
        self == Role::Owner
    }

    /// Acts on payments, refunds, disputes and webhooks (not a viewer).
    pub fn may_operate(self) -> bool {
        self != Role::Viewer
    }
}

/// A person who signs in to one merchant's dashboard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DashboardUser {
    pub id: Uuid,
    pub merchant: Uuid,
    /// Lowercased.
    pub email: String,
    pub role: Role,
    /// argon2id PHC string; `None` until the invitation is used.
    pub password_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    /// The user who invited this one (`None`: the operator).
    pub invited_by: Option<Uuid>,
}

/// A one-time set-password link's record (stored under its token's hash).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Invitation {
    pub user: Uuid,
    pub merchant: Uuid,
    pub expires_at: DateTime<Utc>,
}

/// What an invitation gives back once: the token of the link, never stored.
#[derive(Debug, Clone)]
pub struct Invited {
    pub user: DashboardUser,
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

/// The operator API's view of an invited user.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = DashboardUser)]
pub struct DashboardUserView {
    /// Always `dashboard_user`.
    pub object: String,
    pub id: Uuid,
    pub merchant: Uuid,
    pub email: String,
    /// `owner`, `developer` or `viewer`.
    pub role: String,
    pub created_at: DateTime<Utc>,
    /// The one-time link that sets the password (answered once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_password_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_password_expires_at: Option<DateTime<Utc>>,
}

impl DashboardUser {
    pub fn view(&self) -> DashboardUserView {
        DashboardUserView {
            object: "dashboard_user".into(),
            id: self.id,
            merchant: self.merchant,
            email: self.email.clone(),
            role: self.role.as_str().into(),
            created_at: self.created_at,
            set_password_url: None,
            set_password_expires_at: None,
        }
    }
}

/// Where the set-password page is served.
pub fn set_password_url(base_url: &str, token: &str) -> String {
    format!(
        "{}/dashboard/set-password/{token}",
        base_url.trim_end_matches('/')
    )
}

impl Invited {
    pub fn view(&self, base_url: &str) -> DashboardUserView {
        let mut v = self.user.view();
        v.set_password_url = Some(set_password_url(base_url, &self.token));
        v.set_password_expires_at = Some(self.expires_at);
        v
    }
}

/// An email address as stored (trimmed, lowercased), or 400 `email`.
pub fn normalize_email(raw: &str) -> DomainResult<String> {
    let e = raw.trim().to_lowercase();
    let valid = e.chars().count() <= MAX_EMAIL_CHARS
        && !e.chars().any(|c| c.is_whitespace() || c.is_control())
        && e.split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.contains('@'));
    if !valid {
        return Err(DomainError::invalid(
            "email",
            "email must be an email address (at most 254 characters)",
        ));
    }
    Ok(e)
}

pub(crate) fn user_key(id: Uuid) -> Vec<u8> {
    id.as_bytes().to_vec()
}

fn team_key(merchant: Uuid, user: Uuid) -> Vec<u8> {
    KeyBuf::new()
        .bytes(merchant.as_bytes())
        .bytes(user.as_bytes())
        .build()
}

/// A token's store key (SHA-256 of the token).
pub(crate) fn token_key(token: &str) -> Vec<u8> {
    sha256_hex(token).into_bytes()
}

/// Invites `email` to `merchant`'s dashboard with `role`: a user without a
/// password and a one-time set-password token valid
/// [`INVITATION_TTL_HOURS`]. An email already used (by any merchant): 409
/// `email_taken`.
pub async fn invite(
    env: &Env,
    merchant: Uuid,
    email: &str,
    role: Role,
    invited_by: Option<Uuid>,
    audit: &Audit,
) -> DomainResult<Invited> {
    let email = normalize_email(email)?;
    let now = env.clock.now();
    let user = DashboardUser {
        id: new_id(now),
        merchant,
        email: email.clone(),
        role,
        password_hash: None,
        created_at: now,
        invited_by,
    };
    let token = random_base62(43);
    let expires_at = now + Duration::hours(INVITATION_TTL_HOURS);
    let invitation = Invitation {
        user: user.id,
        merchant,
        expires_at,
    };
    let mut batch = Batch::new();
    batch
        .require_absent(Table::DashboardUserEmails, email.clone().into_bytes())
        .put_raw(
            Table::DashboardUserEmails,
            email.into_bytes(),
            user.id.as_bytes().to_vec(),
        )
        .put(Table::DashboardUsers, user_key(user.id), &user)
        .put_raw(
            Table::DashboardTeam,
            team_key(merchant, user.id),
            Vec::new(),
        )
        .put(Table::DashboardInvitations, token_key(&token), &invitation);
    let record = Record::new(AuditAction::DashboardUserInvited, "dashboard_user", user.id)
        .merchant(merchant)
        .after(serde_json::to_value(user.view()).unwrap_or_default())
        .detail(serde_json::json!({"role": role.as_str(), "invited_by": invited_by}));
    audit.add_to(env, &mut batch, record);
    match env.writer.commit(batch).await {
        Ok(()) => Ok(Invited {
            user,
            token,
            expires_at,
        }),
        Err(CommitError::Conflict { .. }) => Err(DomainError::state(
            ErrorCode::EmailTaken,
            "a dashboard user with this email exists already",
        )),
        Err(e) => Err(DomainError::internal(e.to_string())),
    }
}

/// The unexpired invitation of `token` and its user (`None`: unknown, used
/// or expired).
pub fn invitation(env: &Env, token: &str) -> DomainResult<Option<(Invitation, DashboardUser)>> {
    let read = env.store.read()?;
    let Some(inv): Option<Invitation> =
        read.get_decoded(Table::DashboardInvitations, &token_key(token))?
    else {
        return Ok(None);
    };
    if inv.expires_at <= env.clock.now() {
        return Ok(None);
    }
    let user: Option<DashboardUser> =
        read.get_decoded(Table::DashboardUsers, &user_key(inv.user))?;
    Ok(user.map(|u| (inv, u)))
}

/// Sets the password of the invitation's user and uses the invitation up.
/// An unknown, used or expired token: 404; a password out of bounds: 400.
pub async fn set_password(env: &Env, token: &str, password: &str) -> DomainResult<DashboardUser> {
    password::check_bounds(password)?;
    let (_, mut user) =
        invitation(env, token)?.ok_or_else(|| DomainError::not_found("invitation", "link"))?;
    user.password_hash = Some(hash_password(password).await?);
    let mut batch = Batch::new();
    // Two uses of one link at the same moment may both pass the check
    // above; both come from the link's holder, and the later password wins.
    batch
        .put(Table::DashboardUsers, user_key(user.id), &user)
        .delete(Table::DashboardInvitations, token_key(token));
    env.writer.commit(batch).await.map_err(DomainError::from)?;
    Ok(user)
}

pub fn load_user(env: &Env, id: Uuid) -> DomainResult<Option<DashboardUser>> {
    Ok(env
        .store
        .read()?
        .get_decoded(Table::DashboardUsers, &user_key(id))?)
}

/// The user with this email, if any.
pub fn user_by_email(env: &Env, email: &str) -> DomainResult<Option<DashboardUser>> {
    let Ok(email) = normalize_email(email) else {
        return Ok(None);
    };
    let read = env.store.read()?;
    let Some(raw) = read.get(Table::DashboardUserEmails, email.as_bytes())? else {
        return Ok(None);
    };
    let Ok(id) = Uuid::from_slice(&raw) else {
        return Ok(None);
    };
    Ok(read.get_decoded(Table::DashboardUsers, &user_key(id))?)
}

/// A merchant's team, oldest first.
pub fn team(env: &Env, merchant: Uuid) -> DomainResult<Vec<DashboardUser>> {
    let read = env.store.read()?;
    let mut ids = Vec::new();
    read.scan_prefix(Table::DashboardTeam, merchant.as_bytes(), None, |k, _| {
        if let Ok(id) = Uuid::from_slice(&k[16..]) {
            ids.push(id);
        }
        Ok(true)
    })?;
    let mut users = Vec::new();
    for id in ids {
        if let Some(u) = read.get_decoded::<DashboardUser>(Table::DashboardUsers, &user_key(id))? {
            users.push(u);
        }
    }
    users.sort_by_key(|u| u.created_at);
    Ok(users)
}

/// Checks an email and password: the user when both are right (and the
/// password was set). An unknown email still costs one verification, so
/// the time taken does not say whether the email exists.
pub async fn check_password(
    env: &Env,
    email: &str,
    password: &str,
) -> DomainResult<Option<DashboardUser>> {
    let user = user_by_email(env, email)?;
    let hash = user.as_ref().and_then(|u| u.password_hash.clone());
    let ok = verify_password(password, hash.as_deref()).await?;
    Ok(user.filter(|_| ok))
}
