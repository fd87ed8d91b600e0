//! JSON kept inside compact stored values (saved responses, event
//! objects), compressed against kobo's preset dictionary
//! (`dictionary-1.json`: a payment intent as the API shows it, created and
//! successful), so a payment intent's 800 bytes of JSON store in about a
//! quarter of that (docs/performance.md). The bytes are
//! `kobo_storage::codec::packed`'s; texts deflated before it still read.
//! In JSON (human-readable) stored values the field stays plain JSON.
//!
//! Dictionaries are part of the stored format: one never changes once
//! written with (a test pins the bytes' hash). Dictionary 1 packs with
//! LZ4 against a payment intent's JSON. Dictionary 2, what is written now,
//! is a zstd dictionary trained on kobo's saved responses and event
//! objects (`dictionary-2.zstd`, made by `scripts/train_dictionary.sh`):
//! besides common text it carries entropy tables for the random parts of
//! a text (ids, secrets, codes), so a created payment intent's 824 bytes
//! pack to 130-170 instead of 250. Texts packed with dictionary 1 still
//! read.

use kobo_storage::codec::packed::{self, Dictionary, Method};

/// Dictionary 1 (LZ4), written until dictionary 2.
pub static DICTIONARY_1: Dictionary = Dictionary {
    number: 1,
    method: Method::Lz4,
    bytes: include_bytes!("dictionary-1.json"),
};

/// Dictionary 2 (zstd, trained): what new texts are packed with.
pub static DICTIONARY: Dictionary = Dictionary {
    number: 2,
    method: Method::Zstd,
    bytes: include_bytes!("dictionary-2.zstd"),
};

/// Every dictionary a stored text may name.
static KNOWN: &[&Dictionary] = &[&DICTIONARY_1, &DICTIONARY];

fn unpack(bytes: &[u8]) -> Result<Vec<u8>, String> {
    packed::unpack(bytes, KNOWN)
}

/// A JSON text packed against [`DICTIONARY`] (for a layout of its own; in
/// a serde value use [`raw`] or [`value`]).
pub fn pack(text: &str) -> Vec<u8> {
    packed::pack(text.as_bytes(), &DICTIONARY)
}

/// The text [`pack`] (or an older dictionary) packed.
pub fn unpack_text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(unpack(bytes)?).map_err(|e| e.to_string())
}

/// A raw JSON text (a saved response body), given back byte for byte.
///
/// `#[serde(with = "crate::stored_json::raw")]`
pub mod raw {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::value::RawValue;

    pub fn serialize<S: Serializer>(value: &RawValue, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            value.serialize(s)
        } else {
            s.serialize_bytes(&super::packed::pack(
                value.get().as_bytes(),
                &super::DICTIONARY,
            ))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<RawValue>, D::Error> {
        if d.is_human_readable() {
            <Box<RawValue>>::deserialize(d)
        } else {
            let bytes = <std::borrow::Cow<'de, [u8]>>::deserialize(d)?;
            let text = String::from_utf8(super::unpack(&bytes).map_err(D::Error::custom)?)
                .map_err(D::Error::custom)?;
            RawValue::from_string(text).map_err(D::Error::custom)
        }
    }
}

/// A JSON value (an event's object).
///
/// `#[serde(with = "crate::stored_json::value")]`
pub mod value {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(value: &Value, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            value.serialize(s)
        } else {
            let text = serde_json::to_vec(value).map_err(serde::ser::Error::custom)?;
            s.serialize_bytes(&super::packed::pack(&text, &super::DICTIONARY))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        if d.is_human_readable() {
            Value::deserialize(d)
        } else {
            let bytes = <std::borrow::Cow<'de, [u8]>>::deserialize(d)?;
            serde_json::from_slice(&super::unpack(&bytes).map_err(D::Error::custom)?)
                .map_err(D::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn the_dictionaries_never_change() {
        // Stored values name them by number: changing their bytes or
        // method would make every text packed with them read back wrong.
        assert_eq!((DICTIONARY_1.number, DICTIONARY_1.method), (1, Method::Lz4));
        assert_eq!((DICTIONARY.number, DICTIONARY.method), (2, Method::Zstd));
        assert_eq!(
            hex::encode(Sha256::digest(DICTIONARY_1.bytes)),
            "01c28c2df1424751a4c79c934464670a707a6b636d05802848e1b6d9a7694273"
        );
        assert_eq!(
            hex::encode(Sha256::digest(DICTIONARY.bytes)),
            "fab21727923ccae014c27ac10e8f9390af77aa44d3f5499138b80b02df2c2020"
        );
    }

    #[test]
    fn a_payment_intent_view_packs_to_a_fourth_and_comes_back_exactly() {
        let text = r#"{"amount":250000,"amount_charged":{"amount":250000,"fee":0,"total":250000,"vat":0},"bank_transfer":null,"brand":"01a21795-8650-748b-a4e6-7c4681542e94","canceled_at":null,"checkout_url":"http://127.0.0.1:37627/c/0Vc4qeZg2mOzEdSo7JI9zh1Z01ed9i","client_secret":"pi_01a2179586e47bddb32abb93bdba6887_secret_dhlu0UgC6BC7wKzGS439F7yi","created_at":"2026-11-26T11:20:05.092320Z","currency":"NGN","customer":null,"customer_email":null,"description":null,"failure_code":null,"fee_bearer":"merchant","fees":{"fee":13750,"net":235219,"vat":1031},"id":"01a21795-86e4-7bdd-b32a-bb93bdba6887","livemode":false,"metadata":{},"next_action":null,"object":"payment_intent","paid_at":null,"payment_link":null,"reference":null,"return_url":null,"sender":null,"status":"created","updated_at":"2026-11-26T11:20:05.092320Z","virtual_account":null}"#;
        let bytes = packed::pack(text.as_bytes(), &DICTIONARY);
        assert_eq!(unpack(&bytes).unwrap(), text.as_bytes());
        assert!(bytes.len() * 4 < text.len(), "{} bytes", bytes.len());
        // Dictionary 1's texts still read, and dictionary 2's are smaller.
        let lz4 = packed::pack(text.as_bytes(), &DICTIONARY_1);
        assert_eq!(unpack(&lz4).unwrap(), text.as_bytes());
        assert!(
            bytes.len() + 60 < lz4.len(),
            "{} against {}",
            bytes.len(),
            lz4.len()
        );
    }

    #[test]
    fn an_event_object_and_the_answer_with_the_same_text_are_compressed_once() {
        // An event's object (packed as its row is encoded) and the saved
        // answer of the same change (packed by `pack`) are one text: the
        // second is the first's bytes, from the memory of the last text
        // packed, so both callers must name the one dictionary.
        #[derive(serde::Serialize)]
        struct Row {
            #[serde(with = "raw")]
            object: Box<serde_json::value::RawValue>,
        }
        impl kobo_storage::Compact for Row {}
        let text = serde_json::value::RawValue::from_string(
            r#"{"amount":250000,"id":"01a21795-86e4-7bdd-b32a-bb93bdba6887","status":"successful"}"#
                .to_string(),
        )
        .unwrap();
        let start = packed::compressed_texts();
        let row = kobo_storage::codec::encode_compact(&Row {
            object: text.clone(),
        });
        let answer = pack(text.get());
        assert_eq!(
            packed::compressed_texts() - start,
            1,
            "the answer's text was compressed again"
        );
        assert!(row.windows(answer.len()).any(|w| w == answer.as_slice()));
    }
}
