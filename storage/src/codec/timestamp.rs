//! Timestamps in the compact format: seconds since the Unix epoch and the
//! nanoseconds within the second (two postcard varints: 6 bytes for a
//! whole second of this century, 10 with nanoseconds; exact for every
//! `DateTime<Utc>`), where chrono
//! writes its RFC 3339 text (20 to 30 bytes, formatted twice by postcard to
//! learn its length). In JSON (human-readable formats) a timestamp is the
//! text it always was, so views, JSON rows and the API never change.
//!
//! Format 2 rows hold the text: [`super::decode`] reads them with
//! [`reading_text`] set, and a field marked here reads the text back.
//!
//! `#[serde(with = "kobo_storage::codec::timestamp")]` on a
//! `DateTime<Utc>`, `#[serde(default, with =
//! "kobo_storage::codec::timestamp::optional")]` on an
//! `Option<DateTime<Utc>>` (`default`: a JSON row without the field reads
//! as `None`, as an unmarked `Option` does).

use std::cell::Cell;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

thread_local! {
    /// Set while a format 2 value decodes on this thread.
    static TEXT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `decode` with this thread's timestamps read as RFC 3339 text (a
/// format 2 row), restoring the setting after, even if `decode` panics.
pub(crate) fn reading_text<T>(decode: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            TEXT.set(self.0);
        }
    }
    let _restore = Restore(TEXT.replace(true));
    decode()
}

fn as_text() -> bool {
    TEXT.get()
}

fn parts(t: &DateTime<Utc>) -> (i64, u32) {
    (t.timestamp(), t.timestamp_subsec_nanos())
}

fn from_parts<E: serde::de::Error>((secs, nanos): (i64, u32)) -> Result<DateTime<Utc>, E> {
    DateTime::from_timestamp(secs, nanos)
        .ok_or_else(|| E::custom(format!("timestamp {secs}.{nanos:09} is out of range")))
}

pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        t.serialize(s)
    } else {
        parts(t).serialize(s)
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    if d.is_human_readable() || as_text() {
        DateTime::<Utc>::deserialize(d)
    } else {
        from_parts(<(i64, u32)>::deserialize(d)?)
    }
}

/// The same for an `Option<DateTime<Utc>>`.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            t.serialize(s)
        } else {
            t.as_ref().map(parts).serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        if d.is_human_readable() || as_text() {
            <Option<DateTime<Utc>>>::deserialize(d)
        } else {
            <Option<(i64, u32)>>::deserialize(d)?
                .map(from_parts)
                .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use crate::codec::{decode, encode, encode_compact, Compact, FORMAT_V2, FORMAT_V3};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Marked {
        #[serde(with = "crate::codec::timestamp")]
        at: DateTime<Utc>,
        #[serde(default, with = "crate::codec::timestamp::optional")]
        until: Option<DateTime<Utc>>,
        #[serde(default, with = "crate::codec::timestamp::optional")]
        never: Option<DateTime<Utc>>,
        n: u8,
    }
    impl Compact for Marked {}

    /// The same fields unmarked: what format 2 wrote.
    #[derive(Serialize)]
    struct Unmarked {
        at: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
        never: Option<DateTime<Utc>>,
        n: u8,
    }

    fn example() -> Marked {
        Marked {
            at: "2026-11-29T10:15:30.123456789Z".parse().unwrap(),
            until: Some("1969-12-31T23:59:59.5Z".parse().unwrap()),
            never: None,
            n: 7,
        }
    }

    #[test]
    fn a_timestamp_is_stored_as_seconds_and_nanoseconds_and_reads_back_exactly() {
        let v = example();
        let bytes = encode_compact(&v);
        assert_eq!(bytes[0], FORMAT_V3);
        assert_eq!(decode::<Marked>(&bytes).unwrap(), v);
        // Seconds (zigzag varint) and nanoseconds (varint) of each time,
        // not their text: 1,795,947,330 s and 123,456,789 ns; Some, -1 s
        // and 500,000,000 ns; None; then 7.
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "0384eddfb00d959aef3a010180cab5ee010007",
            "{} bytes",
            bytes.len()
        );
        assert!(bytes.len() < 20);
    }

    #[test]
    fn a_row_of_format_2_with_text_timestamps_still_reads() {
        let v = example();
        let old = Unmarked {
            at: v.at,
            until: v.until,
            never: v.never,
            n: v.n,
        };
        let mut bytes = vec![FORMAT_V2];
        bytes.extend(postcard::to_allocvec(&old).unwrap());
        assert_eq!(decode::<Marked>(&bytes).unwrap(), v);
        // The setting is this decode's only: a format 3 row reads next.
        assert_eq!(decode::<Marked>(&encode_compact(&v)).unwrap(), v);
    }

    #[test]
    fn in_json_a_timestamp_is_its_rfc_3339_text_and_a_missing_option_is_none() {
        let v = example();
        let json = encode(&v);
        let text = std::str::from_utf8(&json[1..]).unwrap();
        assert_eq!(
            text,
            r#"{"at":"2026-11-29T10:15:30.123456789Z","until":"1969-12-31T23:59:59.500Z","never":null,"n":7}"#
        );
        assert_eq!(decode::<Marked>(&json).unwrap(), v);
        let mut older = vec![crate::codec::FORMAT_V1];
        older.extend_from_slice(br#"{"at":"2026-11-29T10:15:30.123456789Z","n":7}"#);
        let back = decode::<Marked>(&older).unwrap();
        assert_eq!((back.until, back.never), (None, None));
    }

    #[test]
    fn a_stored_time_out_of_chronos_range_is_an_error() {
        let mut bytes = vec![FORMAT_V3];
        bytes.extend(
            postcard::to_allocvec(&(
                (i64::MAX, 0u32),
                None::<(i64, u32)>,
                None::<(i64, u32)>,
                1u8,
            ))
            .unwrap(),
        );
        assert!(decode::<Marked>(&bytes).is_err());
    }
}
