//! Tests of a compact stored type's layout (kobo_storage::codec): postcard
//! writes fields by position and enum variants by index, so a type's bytes
//! are pinned; a change to them needs a new format version, not a new
//! pinned value.

use std::fmt::Debug;

use serde::de::DeserializeOwned;

/// `value` is written compact (format 3), reads back equal, is at most half
/// its JSON, its JSON (a row written before the compact format) still
/// reads, its compact bytes are `pinned` (hex), and `written_by_format_2`
/// (hex: the bytes format 2 wrote for it, timestamps as text) still reads
/// as `value`.
pub(crate) fn assert_stored_compact<T>(value: &T, pinned: &str, written_by_format_2: &str)
where
    T: kobo_storage::Compact + DeserializeOwned + PartialEq + Debug,
{
    let bytes = kobo_storage::encode_compact(value);
    assert_eq!(bytes[0], kobo_storage::codec::FORMAT_V3);
    assert_eq!(&kobo_storage::decode::<T>(&bytes).unwrap(), value);
    let json = kobo_storage::encode(value);
    assert!(bytes.len() * 2 < json.len(), "{} bytes", bytes.len());
    assert_eq!(&kobo_storage::decode::<T>(&json).unwrap(), value);
    assert_eq!(
        hex::encode(&bytes),
        pinned,
        "the compact layout of {} changed",
        std::any::type_name::<T>()
    );
    assert_reads_as(written_by_format_2, value);
}

/// The stored bytes `hex` read as `value`.
pub(crate) fn assert_reads_as<T>(hex: &str, value: &T)
where
    T: DeserializeOwned + PartialEq + Debug,
{
    let bytes = hex::decode(hex).expect("hex");
    assert_eq!(&kobo_storage::decode::<T>(&bytes).unwrap(), value);
}
