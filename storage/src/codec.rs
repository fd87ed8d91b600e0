//! The one codec for stored values: a version byte, then JSON.
//!
//! JSON keeps the file inspectable and tolerant of added fields (serde
//! defaults); the version byte lets a later format be introduced while old
//! rows still read. Values are checked right after reading: a wrong version or
//! undecodable body is an error, never a silently defaulted object.

use serde::{de::DeserializeOwned, Serialize};

/// The format written today.
pub const FORMAT_V1: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("stored value is empty")]
    Empty,
    #[error("stored value has unknown format version {0}")]
    UnknownVersion(u8),
    #[error("stored value does not decode: {0}")]
    Json(#[from] serde_json::Error),
}

pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(FORMAT_V1);
    serde_json::to_writer(&mut out, value).expect("in-memory JSON encoding cannot fail");
    out
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        None => Err(CodecError::Empty),
        Some((&FORMAT_V1, body)) => Ok(serde_json::from_slice(body)?),
        Some((&v, _)) => Err(CodecError::UnknownVersion(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_carry_the_version_byte() {
        let bytes = encode(&vec![1u32, 2, 3]);
        assert_eq!(bytes[0], FORMAT_V1);
        let back: Vec<u32> = decode(&bytes).unwrap();
        assert_eq!(back, vec![1, 2, 3]);
    }

    #[test]
    fn rows_written_by_version_one_still_read() {
        // A row exactly as version 1 wrote it.
        let stored = b"\x01{\"a\":5}";
        #[derive(serde::Deserialize)]
        struct Row {
            a: u32,
        }
        let row: Row = decode(stored).unwrap();
        assert_eq!(row.a, 5);
    }

    #[test]
    fn an_unknown_version_is_an_error() {
        assert!(matches!(
            decode::<u32>(b"\x09{}"),
            Err(CodecError::UnknownVersion(9))
        ));
        assert!(matches!(decode::<u32>(b""), Err(CodecError::Empty)));
    }
}
