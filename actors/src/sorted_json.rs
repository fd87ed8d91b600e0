//! JSON text of a value with every object's keys in sorted order, written
//! in one pass: the text `serde_json::to_value(v)?.to_string()` gives
//! (serde_json's map is sorted by key), without building the `Value` tree,
//! its `String` keys and map nodes on the way (a tenth of a create's
//! request-side CPU went to that tree: docs/performance.md).
//!
//! Each object is written in the order its fields come, each field's
//! `"key":value` span noted; when the object ends, spans that came out of
//! order are moved into sorted order. A key that comes twice keeps its
//! last value, in the first one's sorted place, as the map does.
//! Scalars are written by serde_json's own serializer, so numbers and
//! string escapes are serde_json's.
//!
//! Debug builds check every text against the `Value` route
//! ([`to_sorted_string`]), so the whole test suite checks the two agree.

use serde::ser::{self, Serialize};
use serde_json::Error;
use std::borrow::Cow;

/// The sorted-key JSON text of `value`.
pub fn to_sorted_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut out = Vec::with_capacity(512);
    value.serialize(&mut SortedSerializer { out: &mut out })?;
    // serde_json's serializer writes only valid UTF-8.
    let text = String::from_utf8(out).expect("serde_json writes UTF-8");
    #[cfg(debug_assertions)]
    {
        let by_value = serde_json::to_value(value).map(|v| v.to_string());
        debug_assert_eq!(
            by_value.as_deref().ok(),
            Some(text.as_str()),
            "sorted JSON differs from the Value route"
        );
    }
    Ok(text)
}

/// [`to_sorted_string`] as a `RawValue`, without parsing the text again to
/// check it (`RawValue::from_string` does: a seventh of a rendering's
/// time). serde_json writes a value serialized as its own raw-value token
/// struct verbatim, and `to_raw_value` takes its own output unchecked.
pub fn to_sorted_raw<T: Serialize + ?Sized>(
    value: &T,
) -> Result<Box<serde_json::value::RawValue>, Error> {
    let text = to_sorted_string(value)?;
    serde_json::value::to_raw_value(&Verbatim(&text))
}

/// JSON text serde_json's serializer writes as it is, unchecked: only for
/// text serde_json itself wrote.
struct Verbatim<'a>(&'a str);

impl Serialize for Verbatim<'_> {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use ser::SerializeStruct;
        let mut raw = serializer.serialize_struct(RAW_VALUE_TOKEN, 1)?;
        raw.serialize_field(RAW_VALUE_TOKEN, self.0)?;
        raw.end()
    }
}

struct SortedSerializer<'a> {
    out: &'a mut Vec<u8>,
}

impl SortedSerializer<'_> {
    fn json(&mut self) -> serde_json::Serializer<&mut Vec<u8>> {
        serde_json::Serializer::new(&mut *self.out)
    }
}

/// Up to [`SHORT_TEXT`] bytes of formatted text, on the stack; writing
/// more fails (and leaves the buffer unusable).
struct ShortText {
    bytes: [u8; SHORT_TEXT],
    len: usize,
}

/// Room for a timestamp (27 bytes as chrono writes one) with some to spare.
const SHORT_TEXT: usize = 64;

impl Default for ShortText {
    fn default() -> Self {
        ShortText {
            bytes: [0; SHORT_TEXT],
            len: 0,
        }
    }
}

impl ShortText {
    fn as_str(&self) -> &str {
        // Only whole `&str`s are copied in, so the bytes are UTF-8.
        std::str::from_utf8(&self.bytes[..self.len]).expect("whole str pieces")
    }
}

impl std::fmt::Write for ShortText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > SHORT_TEXT {
            return Err(std::fmt::Error);
        }
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// One object being written: where it starts in the output and the span
/// of each of its entries so far.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    entries: Vec<Entry>,
    /// The key of an entry whose value comes next (maps).
    pending_key: Option<Cow<'static, str>>,
}

struct Entry {
    key: Cow<'static, str>,
    /// `"key":value` in the output (without the comma before it).
    span: std::ops::Range<usize>,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut Vec<u8>, fields: usize) -> Self {
        out.push(b'{');
        let start = out.len();
        Object {
            out,
            start,
            entries: Vec::with_capacity(fields),
            pending_key: None,
        }
    }

    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Error> {
        if !self.entries.is_empty() {
            self.out.push(b',');
        }
        let begin = self.out.len();
        serde_json::to_writer(&mut *self.out, key.as_ref())?;
        self.out.push(b':');
        value.serialize(&mut SortedSerializer { out: self.out })?;
        self.entries.push(Entry {
            key,
            span: begin..self.out.len(),
        });
        Ok(())
    }

    /// Puts the entries in key order (written with commas between them, so
    /// entries that came in order stay as they are) and closes; gives back
    /// the output.
    fn close(self) -> Result<&'a mut Vec<u8>, Error> {
        let Object {
            out,
            start,
            mut entries,
            ..
        } = self;
        if !entries.windows(2).all(|w| w[0].key < w[1].key) {
            // Stable: of equal keys the last written comes last.
            entries.sort_by(|a, b| a.key.cmp(&b.key));
            let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
            for e in entries {
                match kept.last_mut() {
                    Some(last) if last.key == e.key => *last = e,
                    _ => kept.push(e),
                }
            }
            SCRATCH.with_borrow_mut(|written| {
                written.clear();
                written.extend_from_slice(&out[start..]);
                out.truncate(start);
                for (i, e) in kept.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&written[e.span.start - start..e.span.end - start]);
                }
            });
        }
        out.push(b'}');
        Ok(out)
    }
}

thread_local! {
    /// An object's entries while they are put in order (kept, so closing
    /// an object allocates nothing once it has grown).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An array being written: commas between its elements.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Array<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'[');
        Array { out, first: true }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(&mut SortedSerializer { out: self.out })
    }

    fn close(self) -> Result<&'a mut Vec<u8>, Error> {
        self.out.push(b']');
        Ok(self.out)
    }
}

/// An enum variant holding an array or object: `{"Variant":...}`, the
/// wrapper closed after what it holds.
struct Variant<Inner>(Inner);

fn open_variant(out: &mut Vec<u8>, variant: &str) -> Result<(), Error> {
    out.push(b'{');
    serde_json::to_writer(&mut *out, variant)?;
    out.push(b':');
    Ok(())
}

macro_rules! scalar {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            ser::Serializer::$method(&mut self.json(), v)
        })*
    };
}

impl<'a, 'b> ser::Serializer for &'b mut SortedSerializer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'b>;
    type SerializeTuple = Array<'b>;
    type SerializeTupleStruct = Array<'b>;
    type SerializeTupleVariant = Variant<Array<'b>>;
    type SerializeMap = Object<'b>;
    type SerializeStruct = Object<'b>;
    type SerializeStructVariant = Variant<Object<'b>>;

    scalar!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    /// Formatted into a buffer on the stack and written as one string
    /// (serde's default formats into a `String` first; serde_json's escapes
    /// each piece as it comes, and a timestamp comes a character at a
    /// time). Text longer than the buffer goes serde_json's way.
    fn collect_str<T: std::fmt::Display + ?Sized>(self, value: &T) -> Result<(), Error> {
        use std::fmt::Write;
        let mut buf = ShortText::default();
        match write!(buf, "{value}") {
            Ok(()) => ser::Serializer::serialize_str(&mut self.json(), buf.as_str()),
            Err(_) => ser::Serializer::collect_str(&mut self.json(), value),
        }
    }

    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // The Value route widens an f32 before writing it.
        self.serialize_f64(f64::from(v))
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        // The Value route keeps what fits in 64 bits; the rest fails there.
        serde_json::to_value(v)?;
        ser::Serializer::serialize_i128(&mut self.json(), v)
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        serde_json::to_value(v)?;
        ser::Serializer::serialize_u128(&mut self.json(), v)
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        open_variant(self.out, variant)?;
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'b>, Error> {
        Ok(Array::open(self.out))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Array<'b>, Error> {
        Ok(Array::open(self.out))
    }

    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Array<'b>, Error> {
        Ok(Array::open(self.out))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        open_variant(self.out, variant)?;
        Ok(Variant(Array::open(self.out)))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Object<'b>, Error> {
        Ok(Object::open(self.out, len.unwrap_or(0)))
    }

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Object<'b>, Error> {
        if name == RAW_VALUE_TOKEN {
            // A RawValue: the Value route parses it, keys and all.
            return Err(ser::Error::custom(
                "sorted JSON does not take raw values; render through serde_json::Value",
            ));
        }
        Ok(Object::open(self.out, len))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        open_variant(self.out, variant)?;
        Ok(Variant(Object::open(self.out, len)))
    }
}

/// The struct name serde_json gives a `RawValue`.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// serde's three array traits, each an [`Array`] element by element.
macro_rules! array_impl {
    ($($trait:ident :: $method:ident),*) => {
        $(impl ser::$trait for Array<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close().map(drop)
            }
        })*
    };
}

array_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeTupleVariant for Variant<Array<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.0.element(value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.close()?.push(b'}');
        Ok(())
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.entry(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

impl ser::SerializeStructVariant for Variant<Object<'_>> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.0.entry(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<(), Error> {
        self.0.close()?.push(b'}');
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        // The Value route's key: a string, or a number or bool as text.
        let key = match serde_json::to_value(key)? {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return Err(ser::Error::custom("key must be a string")),
        };
        self.pending_key = Some(Cow::Owned(key));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("a map value came before its key"))?;
        self.entry(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::{to_sorted_raw, to_sorted_string, ShortText, SortedSerializer, SHORT_TEXT};
    use serde::ser;
    use serde::Serialize;
    use serde_json::{json, Map, Value};
    use std::collections::{BTreeMap, HashMap};
    use std::fmt::Write;

    fn by_value<T: Serialize>(v: &T) -> String {
        serde_json::to_value(v).unwrap().to_string()
    }

    #[derive(Serialize)]
    struct Inner {
        zeta: Option<u8>,
        alpha: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Plain,
        Wrapped(Inner),
        Pair(u8, i64),
        Shaped { z: bool, a: f32 },
    }

    #[derive(Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Tagged {
        Card { last4: String, brand: String },
    }

    #[derive(Serialize)]
    struct View {
        id: &'static str,
        object: &'static str,
        amount: i64,
        ratio: f64,
        nan: f64,
        metadata: Map<String, Value>,
        by_number: BTreeMap<u32, bool>,
        unordered: HashMap<String, i32>,
        kinds: Vec<Kind>,
        tagged: Tagged,
        inner: Inner,
        tuple: (u8, &'static str),
        bytes: Vec<u8>,
        text: &'static str,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    #[test]
    fn a_view_is_written_as_the_value_route_writes_it() {
        let view = View {
            id: "pi_1",
            object: "payment_intent",
            amount: -5,
            ratio: 0.1,
            nan: f64::NAN,
            metadata: json!({"b": [1, {"y": 1, "x": null}], "a": "é\"\n\u{1}"})
                .as_object()
                .unwrap()
                .clone(),
            by_number: [(10, true), (2, false)].into(),
            unordered: [("k2".into(), 2), ("k1".into(), 1), ("\"q".into(), 0)].into(),
            kinds: vec![
                Kind::Plain,
                Kind::Wrapped(Inner {
                    zeta: None,
                    alpha: "a",
                    skipped: None,
                }),
                Kind::Pair(1, i64::MIN),
                Kind::Shaped { z: true, a: 0.1 },
            ],
            tagged: Tagged::Card {
                last4: "4242".into(),
                brand: "visa".into(),
            },
            inner: Inner {
                zeta: Some(9),
                alpha: "b",
                skipped: Some(1),
            },
            tuple: (7, "t"),
            bytes: vec![0, 255],
            text: "\u{2028}",
            extra: [("amount".into(), json!(99)), ("zz".into(), json!({}))].into(),
        };
        // The flattened `amount` comes after the field: the last one wins,
        // as in the map.
        let text = to_sorted_string(&view).unwrap();
        assert_eq!(text, by_value(&view));
        assert!(text.starts_with("{\"amount\":99,\"by_number\":{\"10\":true,\"2\":false}"));
    }

    #[test]
    fn empty_and_single_objects_and_arrays() {
        let cases: Vec<Value> = vec![
            json!({}),
            json!([]),
            json!({"only": []}),
            json!([{}, [], null, 1.5, "s"]),
            json!(null),
        ];
        for v in cases {
            assert_eq!(to_sorted_string(&v).unwrap(), v.to_string());
        }
    }

    #[test]
    fn a_raw_value_is_refused_rather_than_written_unsorted() {
        let raw = serde_json::value::RawValue::from_string("{\"b\":1,\"a\":2}".into()).unwrap();
        assert!(to_sorted_string(&raw).is_err());
    }

    /// Displays as text that needs escaping.
    struct Quoted;

    impl std::fmt::Display for Quoted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "say \"hi\"\n\u{1}, {}", 7)
        }
    }

    #[derive(Serialize)]
    struct Displayed {
        #[serde(serialize_with = "serialize_display")]
        text: Quoted,
        at: chrono::DateTime<chrono::Utc>,
    }

    fn serialize_display<S: serde::Serializer>(v: &Quoted, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    #[test]
    fn displayed_values_are_escaped_as_the_value_route_escapes_them() {
        let v = Displayed {
            text: Quoted,
            at: chrono::DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap(),
        };
        let text = to_sorted_string(&v).unwrap();
        assert_eq!(text, by_value(&v));
        assert_eq!(
            text,
            r#"{"at":"2023-11-14T22:13:20.123456Z","text":"say \"hi\"\n\u0001, 7"}"#
        );
    }

    /// Displays its text in pieces, as chrono writes a timestamp.
    struct Pieces(String);

    impl std::fmt::Display for Pieces {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.chars().try_for_each(|c| f.write_char(c))
        }
    }

    #[test]
    fn displayed_text_longer_than_the_stack_buffer_is_written_whole() {
        for n in [SHORT_TEXT - 1, SHORT_TEXT, SHORT_TEXT + 1, 5 * SHORT_TEXT] {
            let text: String = "é\"ab".chars().cycle().take(n).collect();
            let mut out = Vec::new();
            ser::Serializer::collect_str(
                &mut SortedSerializer { out: &mut out },
                &Pieces(text.clone()),
            )
            .unwrap();
            let expected = serde_json::to_string(&text).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{n} chars");
        }
        // A buffer that overflowed refuses the rest.
        let mut buf = ShortText::default();
        assert!(write!(buf, "{}", "x".repeat(SHORT_TEXT + 1)).is_err());
    }

    #[test]
    fn the_raw_value_holds_the_sorted_text_as_written() {
        let v = json!({"b": [1, {"y": "\"", "x": null}], "a": "é"});
        let raw = to_sorted_raw(&v).unwrap();
        assert_eq!(raw.get(), to_sorted_string(&v).unwrap());
        assert_eq!(raw.get(), r#"{"a":"é","b":[1,{"x":null,"y":"\""}]}"#);
        // Embedded in another value, it is written as it is.
        let outer = serde_json::to_string(&json!({"object": raw})).unwrap();
        assert_eq!(outer, r#"{"object":{"a":"é","b":[1,{"x":null,"y":"\""}]}}"#);
    }
}
