//! Dashboard sessions: a random token (the cookie) stored only as its
//! SHA-256, with an idle and an absolute expiry, a per-session CSRF token,
//! and revocation (sign out; an owner signing a user out everywhere).

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use kobo_storage::{Batch, KeyBuf, Table};

use super::{token_key, user_key, DashboardUser};
use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{random_base62, Mode};

/// A session unused this long ends.
pub const SESSION_IDLE_MINUTES: i64 = 30;
/// A session ends this long after sign-in, used or not.
pub const SESSION_ABSOLUTE_HOURS: i64 = 12;
/// `last_seen` is written at most this often (a page view is a read).
const TOUCH_EVERY_SECONDS: i64 = 60;

/// One signed-in browser.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DashboardSession {
    pub user: Uuid,
    pub merchant: Uuid,
    pub created_at: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// The session's CSRF token (every form carries it).
    pub csrf: String,
    /// The mode the dashboard shows (the test/live switch).
    pub mode: Mode,
    /// The brand the dashboard shows (`None`: the whole business).
    #[serde(default)]
    pub brand: Option<Uuid>,
}

impl DashboardSession {
    /// When the session ends unless used again.
    pub fn expires_at(&self) -> DateTime<Utc> {
        (self.last_seen + Duration::minutes(SESSION_IDLE_MINUTES))
            .min(self.created_at + Duration::hours(SESSION_ABSOLUTE_HOURS))
    }
}

fn user_session_key(user: Uuid, hash: &[u8]) -> Vec<u8> {
    KeyBuf::new().bytes(user.as_bytes()).bytes(hash).build()
}

async fn commit(env: &Env, batch: Batch) -> DomainResult<()> {
    env.writer.commit(batch).await.map_err(DomainError::from)
}

/// Opens a session for `user` (test mode, the whole business): its token,
/// given to the browser once.
pub async fn open_session(
    env: &Env,
    user: &DashboardUser,
) -> DomainResult<(String, DashboardSession)> {
    let now = env.clock.now();
    let token = random_base62(43);
    let session = DashboardSession {
        user: user.id,
        merchant: user.merchant,
        created_at: now,
        last_seen: now,
        csrf: random_base62(32),
        mode: Mode::Test,
        brand: None,
    };
    let hash = token_key(&token);
    let mut batch = Batch::new();
    batch
        .put(Table::DashboardSessions, hash.clone(), &session)
        .put_raw(
            Table::DashboardUserSessions,
            user_session_key(user.id, &hash),
            Vec::new(),
        );
    commit(env, batch).await?;
    Ok((token, session))
}

/// The live session of `token` and its user (`None`: unknown, revoked or
/// expired; an expired one is deleted). Marks it used.
pub async fn resume_session(
    env: &Env,
    token: &str,
) -> DomainResult<Option<(DashboardSession, DashboardUser)>> {
    if token.is_empty() || token.len() > 64 {
        return Ok(None);
    }
    let hash = token_key(token);
    let (session, user) = {
        let read = env.store.read()?;
        let Some(s): Option<DashboardSession> =
            read.get_decoded(Table::DashboardSessions, &hash)?
        else {
            return Ok(None);
        };
        let u: Option<DashboardUser> =
            read.get_decoded(Table::DashboardUsers, &user_key(s.user))?;
        (s, u)
    };
    let now = env.clock.now();
    let Some(user) = user else {
        return Ok(None);
    };
    if session.expires_at() <= now {
        let mut batch = Batch::new();
        batch.delete(Table::DashboardSessions, hash.clone()).delete(
            Table::DashboardUserSessions,
            user_session_key(session.user, &hash),
        );
        commit(env, batch).await?;
        return Ok(None);
    }
    if now - session.last_seen >= Duration::seconds(TOUCH_EVERY_SECONDS) {
        let mut touched = session.clone();
        touched.last_seen = now;
        save(env, token, &touched).await?;
        return Ok(Some((touched, user)));
    }
    Ok(Some((session, user)))
}

/// Writes a session back (its mode or brand switched, or touched).
pub async fn save(env: &Env, token: &str, session: &DashboardSession) -> DomainResult<()> {
    let mut batch = Batch::new();
    batch.put(Table::DashboardSessions, token_key(token), session);
    commit(env, batch).await
}

/// Ends one session (sign out).
pub async fn close_session(env: &Env, token: &str, user: Uuid) -> DomainResult<()> {
    let hash = token_key(token);
    let mut batch = Batch::new();
    batch
        .delete(Table::DashboardSessions, hash.clone())
        .delete(Table::DashboardUserSessions, user_session_key(user, &hash));
    commit(env, batch).await
}

/// Ends every session of `user`; how many there were.
pub async fn revoke_sessions(env: &Env, user: Uuid) -> DomainResult<usize> {
    let mut hashes = Vec::new();
    env.store.read()?.scan_prefix(
        Table::DashboardUserSessions,
        user.as_bytes(),
        None,
        |k, _| {
            hashes.push(k[16..].to_vec());
            Ok(true)
        },
    )?;
    let mut batch = Batch::new();
    for h in &hashes {
        batch
            .delete(Table::DashboardSessions, h.clone())
            .delete(Table::DashboardUserSessions, user_session_key(user, h));
    }
    if !batch.is_empty() {
        commit(env, batch).await?;
    }
    Ok(hashes.len())
}
