//! Server keys kept as files in the data directory, beside the store and
//! not in it (`card-fingerprint-key`, `checkout-credential-key`,
//! `sandbox-form-key`): a copy of
//! the store alone (a backup) holds none of them.
//!
//! On a PostgreSQL store several processes may serve one database over
//! time (a move to another machine) or at once (cluster nodes), each with
//! its own data directory. They must all hold the same keys: a card seen
//! through two keys gets two fingerprints, and a checkout credential or
//! form token signed by one node fails on another. So the database keeps a
//! digest of the keys ([`agree_with_database`]), written by the first
//! process, and a process whose keys differ refuses to start.

use std::path::Path;

use kobo_storage::{Batch, CommitError, Store, Table, Writer};
use sha2::{Digest, Sha256};

/// The meta key of the server keys' digest.
const META_KEY_DIGEST: &[u8] = b"server_key_digest";

/// Loads (creating on first start) the key files `names` and checks them
/// against the digest the database holds, recording it when there is none
/// yet. Refuses, naming the files to copy, when they differ.
pub async fn agree_with_database(
    data: &Path,
    names: &[&str],
    store: &Store,
    writer: &Writer,
) -> anyhow::Result<()> {
    let mut digest = Sha256::new();
    for name in names {
        digest.update(name.as_bytes());
        digest.update(load_or_create(data, name)?);
    }
    let digest = digest.finalize().to_vec();
    let stored = || -> anyhow::Result<Option<Vec<u8>>> {
        Ok(store.read()?.get(Table::Meta, META_KEY_DIGEST)?)
    };
    let held = match stored()? {
        Some(held) => held,
        None => {
            let mut b = Batch::new();
            b.require_absent(Table::Meta, META_KEY_DIGEST.to_vec())
                .put_raw(Table::Meta, META_KEY_DIGEST.to_vec(), digest.clone());
            match writer.commit(b).await {
                Ok(()) => return Ok(()),
                // Another process recorded its keys first.
                Err(CommitError::Conflict { .. }) => stored()?.unwrap_or_default(),
                Err(e) => return Err(e.into()),
            }
        }
    };
    if held != digest {
        anyhow::bail!(
            "the key files in {} differ from those of the kobo that first served this database; \
             copy {} from that server's data directory (every process on one database shares them)",
            data.display(),
            names.join(", ")
        );
    }
    Ok(())
}

/// Creates the data directory (mode 0700) when it is missing. The embedded
/// store creates it when it opens; with a PostgreSQL store the directory
/// holds only these key files.
pub fn private_dir(data: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data)
        .map_err(|e| anyhow::anyhow!("creating the data directory {}: {e}", data.display()))
}

/// Loads the 32-byte key in `data/name` (hex), creating it with mode 0600
/// on first start.
pub fn load_or_create(data: &Path, name: &str) -> anyhow::Result<[u8; 32]> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = data.join(name);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let bytes = hex::decode(text.trim())
            .map_err(|e| anyhow::anyhow!("{}: not hex: {e}", path.display()))?;
        return bytes
            .try_into()
            .map_err(|_| anyhow::anyhow!("{}: not 32 bytes", path.display()));
    }
    let key: [u8; 32] = rand::random();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", path.display()))?;
    f.write_all(hex::encode(key).as_bytes())?;
    f.sync_all()?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_created_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let k = load_or_create(dir.path(), "some-key").unwrap();
        assert_eq!(load_or_create(dir.path(), "some-key").unwrap(), k);
        assert_ne!(load_or_create(dir.path(), "other-key").unwrap(), k);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("some-key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join("bad-key"), "zz").unwrap();
        assert!(load_or_create(dir.path(), "bad-key").is_err());
    }
}
