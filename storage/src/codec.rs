//! The one codec for stored values: a version byte, then the body.
//!
//! - Version 1: JSON. Every value written before the compact format, and
//!   still what [`encode`] writes: inspectable, tolerant of added fields
//!   (serde defaults).
//! - Version 2: postcard, a compact positional binary format, for the hot
//!   values marked [`Compact`] ([`encode_compact`]): the payment intent,
//!   the saved idempotent response (written on every create), the event,
//!   the ledger line, and the charge attempt, timer and scheduled release
//!   a capture writes. JSON texts inside them are [`packed`] against a preset
//!   dictionary the caller gives (formerly [`deflated_json`]).
//!
//! - Version 3: postcard as version 2, with the timestamps marked
//!   [`timestamp`] stored as seconds and nanoseconds rather than RFC 3339
//!   text (6 to 10 bytes where the text took 21 to 31, and no
//!   formatting).
//!   What [`encode_compact`] writes.
//!
//! [`decode`] reads all three, so a store written before version 3 still
//! works, and a value is rewritten in the newest format when it is next
//! saved.
//! Values are checked right after reading: a wrong version or undecodable
//! body is an error, never a silently defaulted object.
//!
//! postcard writes fields by position, without names, and cannot read a
//! value back through `deserialize_any`. So a [`Compact`] type must not use
//! `#[serde(flatten)]`, `skip_serializing_if`/`skip_serializing`,
//! untagged or internally tagged enums, or hold a `serde_json::Value` or
//! `RawValue` directly; a field of such a type goes through [`json_field`]
//! (kept as a JSON string inside the binary value) or [`deflated_json`].
//! And its layout is frozen: adding, removing or reordering a field, or an
//! enum variant, changes how old rows read. Each compact type pins its
//! layout with a golden test; a change needs a new format version (or the
//! type written as JSON again, which version-2 rows cannot follow).

use serde::{de::DeserializeOwned, Serialize};

/// JSON.
pub const FORMAT_V1: u8 = 1;
/// postcard, timestamps as RFC 3339 text.
pub const FORMAT_V2: u8 = 2;
/// postcard, the timestamps marked [`timestamp`] as seconds and
/// nanoseconds.
pub const FORMAT_V3: u8 = 3;

pub mod timestamp;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("stored value is empty")]
    Empty,
    #[error("stored value has unknown format version {0}")]
    UnknownVersion(u8),
    #[error("stored value does not decode: {0}")]
    Json(#[from] serde_json::Error),
    #[error("stored value does not decode: {0}")]
    Postcard(#[from] postcard::Error),
    /// A value in a table's own byte layout (not JSON or postcard).
    #[error("stored value does not decode: {0}")]
    Layout(String),
}

/// A stored type whose serde shape postcard can write and read back (see
/// the module's rules); written with [`encode_compact`].
pub trait Compact: Serialize {}

/// JSON (version 1).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(FORMAT_V1);
    serde_json::to_writer(&mut out, value).expect("in-memory JSON encoding cannot fail");
    out
}

/// postcard (version 3).
pub fn encode_compact<T: Compact>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(FORMAT_V3);
    postcard::to_extend(value, out)
        .expect("in-memory postcard encoding of a Compact type cannot fail")
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        None => Err(CodecError::Empty),
        Some((&FORMAT_V1, body)) => Ok(serde_json::from_slice(body)?),
        Some((&FORMAT_V2, body)) => Ok(timestamp::reading_text(|| postcard::from_bytes(body))?),
        Some((&FORMAT_V3, body)) => Ok(postcard::from_bytes(body)?),
        Some((&v, _)) => Err(CodecError::UnknownVersion(v)),
    }
}

/// A field kept as its JSON text inside a binary value, for types postcard
/// cannot carry (`serde_json::Value`, `skip_serializing_if`, ...). In JSON
/// (human-readable formats) the field is written as it always was.
///
/// `#[serde(with = "kobo_storage::codec::json_field")]`
pub mod json_field {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            value.serialize(s)
        } else {
            s.serialize_str(&serde_json::to_string(value).map_err(S::Error::custom)?)
        }
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        if d.is_human_readable() {
            T::deserialize(d)
        } else {
            let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
            serde_json::from_str(&text).map_err(D::Error::custom)
        }
    }
}

/// A raw JSON text (a saved response body) kept deflated inside a binary
/// value; in JSON it is written as the raw JSON it is. Reading gives back
/// the exact bytes written. What saved responses used before [`packed`]
/// (which reads these bytes too); kept for the tests that write such rows.
///
/// `#[serde(with = "kobo_storage::codec::deflated_json")]`
pub mod deflated_json {
    use std::cell::RefCell;
    use std::io::Read;

    use flate2::{Compress, Compression, FlushCompress, Status};

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::value::RawValue;

    pub fn serialize<S: Serializer>(value: &RawValue, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            value.serialize(s)
        } else {
            s.serialize_bytes(&deflate(value.get().as_bytes()))
        }
    }

    thread_local! {
        /// A compressor per thread, reset between values: a new one
        /// allocates and clears some 300 KiB of tables, which cost more
        /// than the compression itself (page faults; docs/performance.md).
        static COMPRESSOR: RefCell<Compress> =
            RefCell::new(Compress::new(Compression::fast(), false));
    }

    fn deflate(text: &[u8]) -> Vec<u8> {
        COMPRESSOR.with(|c| {
            let mut c = c.borrow_mut();
            c.reset();
            let mut out = Vec::with_capacity(text.len() + 64);
            loop {
                let done = c.total_in() as usize;
                let status = c
                    .compress_vec(&text[done..], &mut out, FlushCompress::Finish)
                    .expect("deflating into memory cannot fail");
                if status == Status::StreamEnd {
                    return out;
                }
                out.reserve(out.capacity().max(64));
            }
        })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<RawValue>, D::Error> {
        if d.is_human_readable() {
            <Box<RawValue>>::deserialize(d)
        } else {
            let bytes = <std::borrow::Cow<'de, [u8]>>::deserialize(d)?;
            let mut text = String::with_capacity(bytes.len() * 3);
            flate2::read::DeflateDecoder::new(&bytes[..])
                .read_to_string(&mut text)
                .map_err(D::Error::custom)?;
            RawValue::from_string(text).map_err(D::Error::custom)
        }
    }
}

/// JSON texts kept compressed against a preset dictionary: LZ4 (one block)
/// whose window starts with the dictionary, so the field names and common
/// values of the objects a caller stores (given as a [`Dictionary`]) cost a
/// few bytes each even in a small text. The stored bytes are a tag byte
/// naming the dictionary, the text's length (u32, little endian), then the
/// block. Reading also takes a raw deflate stream, as
/// [`deflated_json`] wrote before: a deflate stream never starts with
/// block type 3 (reserved), i.e. with bits `x11x` in the low three bits of
/// its first byte, and every tag does ([`Dictionary::tag`]).
pub mod packed {
    use std::cell::RefCell;
    use std::io::Read;
    use std::sync::Mutex;

    /// How a dictionary's texts are compressed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Method {
        /// An LZ4 block, its length first (dictionary 1).
        Lz4,
        /// A zstd frame (level 1, no checksum and no dictionary id, the
        /// content size in its header). The dictionary is a trained zstd
        /// dictionary (its entropy tables code a short text without
        /// building tables of its own), or raw content.
        Zstd,
    }

    /// A preset dictionary. Its bytes and method are part of the stored
    /// format: a dictionary, once written with, must never change (a new
    /// one takes a new `number`).
    ///
    /// Declare one as a `static`, never a `const`: the memo of the last
    /// text packed and the prepared contexts know a dictionary by where its
    /// bytes are, and a `const`'s bytes may be copied to each place it is
    /// used (so a change's event and its answer, packed in different
    /// places, were compressed twice).
    pub struct Dictionary {
        /// 0 to 31; stored as the tag `number << 3 | 0b110`.
        pub number: u8,
        pub method: Method,
        pub bytes: &'static [u8],
    }

    impl Dictionary {
        pub fn tag(&self) -> u8 {
            self.number << 3 | 0b110
        }
    }

    /// Longest text read back (a stored length above it is corruption).
    const MAX_TEXT: usize = 64 << 20;

    /// The zstd level texts are packed at.
    const ZSTD_LEVEL: i32 = 1;

    /// The last text a thread packed, and its bytes (see [`pack`]).
    #[derive(Default)]
    struct LastPacked {
        /// The dictionary: its tag and method, and where its bytes are
        /// (two sets of dictionaries may share a number, see `context`;
        /// two dictionaries may share bytes).
        dict: Option<(u8, Method, BytesId)>,
        text: Vec<u8>,
        packed: Vec<u8>,
    }

    thread_local! {
        static LAST_PACKED: RefCell<LastPacked> = RefCell::new(LastPacked::default());
        /// Texts this thread compressed ([`compressed_texts`]).
        static COMPRESSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// How many texts this thread has compressed (not answered from
    /// [`pack`]'s memory of the last one): for tests that a change's
    /// answer and its event are compressed once.
    pub fn compressed_texts() -> u64 {
        COMPRESSED.get()
    }

    /// The longest text [`pack`] remembers (a thread keeps the buffers).
    const MEMO_MAX: usize = 16 << 10;

    /// `text` compressed against `dict`. A text packed twice in a row on one
    /// thread (a change's answer and its event carry the same object) is
    /// compressed once: packing is deterministic, so the bytes are the same.
    pub fn pack(text: &[u8], dict: &Dictionary) -> Vec<u8> {
        if text.len() > MEMO_MAX {
            return compress(text, dict);
        }
        let which = Some((dict.tag(), dict.method, bytes_id(dict)));
        LAST_PACKED.with_borrow_mut(|last| {
            if last.dict == which && last.text == text {
                return last.packed.clone();
            }
            let out = compress(text, dict);
            last.dict = which;
            last.text.clear();
            last.text.extend_from_slice(text);
            last.packed.clear();
            last.packed.extend_from_slice(&out);
            out
        })
    }

    fn compress(text: &[u8], dict: &Dictionary) -> Vec<u8> {
        COMPRESSED.set(COMPRESSED.get() + 1);
        let mut out = vec![dict.tag()];
        match dict.method {
            Method::Lz4 => {
                out.extend_from_slice(&lz4_flex::block::compress_prepend_size_with_dict(
                    text, dict.bytes,
                ));
            }
            Method::Zstd => zstd_pack(text, dict, &mut out),
        }
        out
    }

    /// The text [`pack`] was given (or a legacy deflate stream inflated),
    /// with the dictionaries the caller knows.
    pub fn unpack(bytes: &[u8], dicts: &[&Dictionary]) -> Result<Vec<u8>, String> {
        let Some((&tag, rest)) = bytes.split_first() else {
            return Err("empty packed text".into());
        };
        if tag & 0b110 != 0b110 {
            let mut text = Vec::with_capacity(bytes.len() * 3);
            flate2::read::DeflateDecoder::new(bytes)
                .read_to_end(&mut text)
                .map_err(|e| e.to_string())?;
            return Ok(text);
        }
        let dict = dicts
            .iter()
            .find(|d| d.tag() == tag)
            .ok_or_else(|| format!("packed text with unknown dictionary tag {tag:#04x}"))?;
        match dict.method {
            Method::Lz4 => lz4_unpack(rest, dict),
            Method::Zstd => zstd_unpack(rest, dict),
        }
    }

    fn lz4_unpack(rest: &[u8], dict: &Dictionary) -> Result<Vec<u8>, String> {
        let (len, _) = lz4_flex::block::uncompressed_size(rest).map_err(|e| e.to_string())?;
        if len > MAX_TEXT {
            return Err(format!("packed text claims {len} bytes"));
        }
        let text = lz4_flex::block::decompress_size_prepended_with_dict(rest, dict.bytes)
            .map_err(|e| e.to_string())?;
        if text.len() != len {
            return Err("packed text shorter than its length".into());
        }
        Ok(text)
    }

    /// A zstd dictionary, prepared once per process for each direction.
    struct Prepared {
        compress: zstd::dict::EncoderDictionary<'static>,
        decompress: zstd::dict::DecoderDictionary<'static>,
    }

    /// Which dictionary bytes a prepared dictionary or context is for:
    /// where they are (a dictionary's bytes are `'static`).
    type BytesId = (usize, usize);

    fn bytes_id(dict: &Dictionary) -> BytesId {
        (dict.bytes.as_ptr() as usize, dict.bytes.len())
    }

    /// Prepared on a thread's first use of the dictionary, and kept.
    fn prepared(dict: &Dictionary) -> &'static Prepared {
        static PREPARED: Mutex<Vec<(BytesId, &'static Prepared)>> = Mutex::new(Vec::new());
        let mut all = PREPARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = all.iter().find(|(id, _)| *id == bytes_id(dict)) {
            return p;
        }
        let p: &'static Prepared = Box::leak(Box::new(Prepared {
            compress: zstd::dict::EncoderDictionary::copy(dict.bytes, ZSTD_LEVEL),
            decompress: zstd::dict::DecoderDictionary::copy(dict.bytes),
        }));
        all.push((bytes_id(dict), p));
        p
    }

    thread_local! {
        /// Each thread's zstd contexts (their work space is reused from
        /// text to text), by dictionary.
        static COMPRESSORS: RefCell<Vec<(BytesId, zstd::bulk::Compressor<'static>)>> =
            const { RefCell::new(Vec::new()) };
        static DECOMPRESSORS: RefCell<Vec<(BytesId, zstd::bulk::Decompressor<'static>)>> =
            const { RefCell::new(Vec::new()) };
    }

    /// This thread's context for `dict` in `all`, made by `make` on first use.
    fn context<'a, C>(
        all: &'a mut Vec<(BytesId, C)>,
        dict: &Dictionary,
        make: impl FnOnce(&'static Prepared) -> std::io::Result<C>,
    ) -> Result<&'a mut C, String> {
        let i = match all.iter().position(|(id, _)| *id == bytes_id(dict)) {
            Some(i) => i,
            None => {
                all.push((
                    bytes_id(dict),
                    make(prepared(dict)).map_err(|e| e.to_string())?,
                ));
                all.len() - 1
            }
        };
        Ok(&mut all[i].1)
    }

    fn zstd_pack(text: &[u8], dict: &Dictionary, out: &mut Vec<u8>) {
        COMPRESSORS.with_borrow_mut(|all| {
            let compressor = context(all, dict, |p| {
                let mut c = zstd::bulk::Compressor::with_prepared_dictionary(&p.compress)?;
                // The tag names the dictionary; a trained one's id would
                // only add 4 bytes.
                c.set_parameter(zstd::zstd_safe::CParameter::DictIdFlag(false))?;
                Ok(c)
            })
            .expect("a zstd context is made in memory");
            let frame = compressor
                .compress(text)
                .expect("zstd compresses any text in memory");
            out.extend_from_slice(&frame);
        })
    }

    fn zstd_unpack(frame: &[u8], dict: &Dictionary) -> Result<Vec<u8>, String> {
        let len = match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(len)) => usize::try_from(len).unwrap_or(usize::MAX),
            Ok(None) => return Err("packed text without its length".into()),
            Err(_) => return Err("packed text is not a zstd frame".into()),
        };
        if len > MAX_TEXT {
            return Err(format!("packed text claims {len} bytes"));
        }
        let text = DECOMPRESSORS.with_borrow_mut(|all| {
            context(all, dict, |p| {
                zstd::bulk::Decompressor::with_prepared_dictionary(&p.decompress)
            })?
            .decompress(frame, len)
            .map_err(|e| e.to_string())
        })?;
        if text.len() != len {
            return Err("packed text shorter than its length".into());
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use serde_json::{Map, Value};

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

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Inner {
        kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    struct Row {
        id: u64,
        #[serde(with = "json_field")]
        metadata: Map<String, Value>,
        #[serde(with = "json_field")]
        next: Option<Inner>,
        #[serde(with = "deflated_json")]
        body: Box<RawValue>,
    }
    impl Compact for Row {}

    fn row() -> Row {
        let mut metadata = Map::new();
        metadata.insert("order".into(), Value::from("A-1"));
        metadata.insert("n".into(), serde_json::json!({"x": [1, 2.5, null]}));
        Row {
            id: 7,
            metadata,
            next: Some(Inner {
                kind: "redirect".into(),
                url: None,
            }),
            body: RawValue::from_string("{\"b\": 1,  \"z\":\"\\u00e9\"}".into()).unwrap(),
        }
    }

    #[test]
    fn compact_values_with_json_fields_round_trip_through_postcard() {
        let bytes = encode_compact(&row());
        assert_eq!(bytes[0], FORMAT_V3);
        let back: Row = decode(&bytes).unwrap();
        assert_eq!(back.id, 7);
        assert_eq!(back.metadata, row().metadata);
        assert_eq!(back.next, row().next);
        // The raw body comes back byte for byte (spacing and escapes too).
        assert_eq!(back.body.get(), row().body.get());
    }

    #[test]
    fn the_same_type_still_reads_from_and_writes_plain_json() {
        let json = encode(&row());
        assert_eq!(json[0], FORMAT_V1);
        let text = std::str::from_utf8(&json[1..]).unwrap();
        assert!(text.contains("\"order\":\"A-1\""), "{text}");
        assert!(
            text.contains("\"body\":{\"b\": 1,  \"z\":\"\\u00e9\"}"),
            "{text}"
        );
        assert!(text.contains("\"next\":{\"kind\":\"redirect\"}"), "{text}");
        let back: Row = decode(&json).unwrap();
        assert_eq!(back.next, row().next);
        assert_eq!(back.body.get(), row().body.get());
    }
    const DICT: packed::Dictionary = packed::Dictionary {
        number: 1,
        method: packed::Method::Lz4,
        bytes: b"{\"amount\":,\"currency\":\"NGN\",\"status\":\"created\"}",
    };
    const ZSTD_DICT: packed::Dictionary = packed::Dictionary {
        number: 2,
        method: packed::Method::Zstd,
        bytes: DICT.bytes,
    };

    #[test]
    fn packed_texts_come_back_exactly_and_small_ones_shrink_with_the_dictionary() {
        let long = format!("[{}]", vec!["{\"a\":\"\\u00e9x\"}"; 5000].join(","));
        let small = "{\"amount\":250000,\"currency\":\"NGN\",\"status\":\"created\"}";
        for text in [small, "", "{}", long.as_str()] {
            let bytes = packed::pack(text.as_bytes(), &DICT);
            assert_eq!(bytes[0], 0b1110);
            assert_eq!(packed::unpack(&bytes, &[&DICT]).unwrap(), text.as_bytes());
        }
        // The field names and values come from the dictionary (a text this
        // short keeps its last 12 bytes literal, LZ4's rule).
        let n = packed::pack(small.as_bytes(), &DICT).len();
        assert!(n * 4 < small.len() * 3, "{n} bytes");
        assert!(packed::pack(long.as_bytes(), &DICT).len() * 10 < long.len());
    }

    #[test]
    fn zstd_packed_texts_come_back_exactly_and_corruption_is_an_error() {
        let long = format!("[{}]", vec!["{\"a\":\"\\u00e9x\"}"; 5000].join(","));
        let small = "{\"amount\":250000,\"currency\":\"NGN\",\"status\":\"created\",\"id\":\"0Vc4qeZg2mOzEdSo7JI9zh1Z01ed9i\"}";
        let both: &[&packed::Dictionary] = &[&DICT, &ZSTD_DICT];
        for text in [small, "", "{}", long.as_str()] {
            let bytes = packed::pack(text.as_bytes(), &ZSTD_DICT);
            assert_eq!(bytes[0], ZSTD_DICT.tag());
            assert_eq!(packed::unpack(&bytes, both).unwrap(), text.as_bytes());
            // A second thread packs with its own context, to the same bytes.
            let again = std::thread::scope(|s| {
                s.spawn(|| packed::pack(text.as_bytes(), &ZSTD_DICT))
                    .join()
                    .unwrap()
            });
            assert_eq!(again, bytes);
        }
        let (z, l) = (
            packed::pack(small.as_bytes(), &ZSTD_DICT),
            packed::pack(small.as_bytes(), &DICT),
        );
        // The field names come from the dictionary.
        assert!(z.len() * 4 < small.len() * 3, "{} bytes", z.len());
        // Each with its own dictionary and method, though they share bytes
        // and the text was just packed with the other.
        assert_eq!((z[0], l[0]), (ZSTD_DICT.tag(), DICT.tag()));
        // Texts packed with either dictionary read back side by side.
        assert_eq!(packed::unpack(&l, both).unwrap(), small.as_bytes());
        // A damaged or cut frame is an error, never a panic or a wrong text.
        for cut in [2, z.len() / 2, z.len() - 1] {
            assert!(packed::unpack(&z[..cut], both).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn each_zstd_dictionary_packs_with_its_own_bytes() {
        // Prepared dictionaries and contexts are kept per dictionary's
        // bytes, so a second set of dictionaries (as these tests' beside
        // kobo's) never packs with another's bytes under a shared number.
        const OTHER_BYTES: packed::Dictionary = packed::Dictionary {
            number: 2,
            method: packed::Method::Zstd,
            bytes: b"{\"object\":\"refund\",\"reason\":\"requested_by_customer\"}",
        };
        let text = b"{\"amount\":250000,\"currency\":\"NGN\",\"status\":\"created\"}";
        let (a, b) = (
            packed::pack(text, &ZSTD_DICT),
            packed::pack(text, &OTHER_BYTES),
        );
        assert_ne!(a, b);
        assert_eq!(packed::unpack(&a, &[&ZSTD_DICT]).unwrap(), text);
        assert_eq!(packed::unpack(&b, &[&OTHER_BYTES]).unwrap(), text);
    }

    #[test]
    fn a_text_packed_again_in_a_row_is_compressed_once() {
        const OTHER_BYTES: packed::Dictionary = packed::Dictionary {
            number: 2,
            method: packed::Method::Zstd,
            bytes: b"{\"object\":\"refund\",\"reason\":\"requested_by_customer\"}",
        };
        let (a, b) = (
            &b"{\"status\":\"successful\"}"[..],
            &b"{\"status\":\"failed\"}"[..],
        );
        let compressed = packed::compressed_texts;
        let start = compressed();
        let first = packed::pack(a, &ZSTD_DICT);
        assert_eq!(packed::pack(a, &ZSTD_DICT), first);
        assert_eq!(
            compressed() - start,
            1,
            "the same text again: its bytes kept"
        );
        // Another dictionary (even of the same number) or another text is
        // compressed; the first text after another is compressed again.
        let other = packed::pack(a, &OTHER_BYTES);
        assert_ne!(other, first);
        assert_eq!(packed::unpack(&other, &[&OTHER_BYTES]).unwrap(), a);
        let second = packed::pack(b, &ZSTD_DICT);
        assert_eq!(packed::unpack(&second, &[&ZSTD_DICT]).unwrap(), b);
        assert_eq!(packed::pack(a, &ZSTD_DICT), first);
        assert_eq!(compressed() - start, 4);
    }

    #[test]
    fn unpack_reads_the_deflate_streams_written_before_and_refuses_unknown_tags() {
        #[derive(Serialize)]
        struct Saved {
            #[serde(with = "deflated_json")]
            body: Box<RawValue>,
        }
        impl Compact for Saved {}
        for text in [
            "{\"a\": 1}",
            "{}",
            &format!("[{}]", vec!["7"; 3000].join(",")),
        ] {
            let saved = Saved {
                body: RawValue::from_string(text.to_string()).unwrap(),
            };
            let encoded = encode_compact(&saved);
            // postcard: the version byte, the byte string's varint length.
            let deflated: Vec<u8> = postcard::from_bytes(&encoded[1..]).unwrap();
            assert_ne!(deflated[0] & 0b110, 0b110);
            assert_eq!(
                packed::unpack(&deflated, &[&DICT]).unwrap(),
                text.as_bytes()
            );
        }
        let other = packed::Dictionary {
            number: 3,
            method: packed::Method::Lz4,
            bytes: b"x",
        };
        let bytes = packed::pack(b"{}", &other);
        assert!(packed::unpack(&bytes, &[&DICT])
            .unwrap_err()
            .contains("unknown dictionary"));
        assert!(packed::unpack(&[], &[&DICT]).is_err());
        assert!(packed::unpack(&[DICT.tag(), 0xff, 0xff, 0xff, 0x7f], &[&DICT]).is_err());
    }

    #[test]
    fn long_and_repeated_bodies_deflate_and_come_back_exactly() {
        #[derive(Serialize, Deserialize)]
        struct Saved {
            #[serde(with = "deflated_json")]
            body: Box<RawValue>,
        }
        impl Compact for Saved {}
        let long = format!("[{}]", vec!["{\"a\":\"\\u00e9x\"}"; 5000].join(","));
        for text in [long.as_str(), "{}", "[1]", long.as_str()] {
            let saved = Saved {
                body: RawValue::from_string(text.to_string()).unwrap(),
            };
            let bytes = encode_compact(&saved);
            assert!(text.len() < 100 || bytes.len() * 10 < text.len());
            let back: Saved = decode(&bytes).unwrap();
            assert_eq!(back.body.get(), text);
        }
    }
}
