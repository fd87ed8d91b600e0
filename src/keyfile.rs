//! Server keys kept as files in the data directory, beside the store and
//! not in it (`card-fingerprint-key`, `checkout-credential-key`,
//! `sandbox-form-key`): a copy of
//! the store alone (a backup) holds none of them.

use std::path::Path;

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
