//! Tests of a compact stored type's layout (kobo_storage::codec): postcard
//! writes fields by position and enum variants by index, so a type's bytes
//! are pinned; a change to them needs a new format version, not a new
//! pinned value.

use std::fmt::Debug;

use serde::de::DeserializeOwned;

/// `value` is written compact, reads back equal, is at most half its JSON,
/// its JSON (a row written before the compact format) still reads, and its
/// compact bytes are `pinned` (hex).
pub(crate) fn assert_stored_compact<T>(value: &T, pinned: &str)
where
    T: kobo_storage::Compact + DeserializeOwned + PartialEq + Debug,
{
    let bytes = kobo_storage::encode_compact(value);
    assert_eq!(bytes[0], kobo_storage::codec::FORMAT_V2);
    assert_eq!(&kobo_storage::decode::<T>(&bytes).unwrap(), value);
    let json = kobo_storage::encode(value);
    assert!(bytes.len() * 2 < json.len(), "{} bytes", bytes.len());
    assert_eq!(&kobo_storage::decode::<T>(&json).unwrap(), value);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        pinned,
        "the compact layout of {} changed",
        std::any::type_name::<T>()
    );
}
