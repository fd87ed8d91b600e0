//! Generic paging: the list envelope and newest-first pages through a
//! `merchant|mode|seq -> id` index. Knows no resource.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::Table;

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};

/// A page of a newest-first list.
pub struct Page {
    pub data: Vec<Value>,
    pub has_more: bool,
}

/// The `object` value of a list.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ListObject {
    #[serde(rename = "list")]
    List,
}

/// The list envelope: one page of a list.
// `T` is the listed resource.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = List)]
pub struct ListView<T> {
    #[schema(inline)]
    pub object: ListObject,
    /// Items of the listed resource.
    pub data: Vec<T>,
    /// False on the last page.
    pub has_more: bool,
}

impl Page {
    pub fn view(&self) -> ListView<&Value> {
        ListView {
            object: ListObject::List,
            data: self.data.iter().collect(),
            has_more: self.has_more,
        }
    }

    /// The list envelope, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a list view serializes")
    }
}

/// A newest-first page of a merchant's objects through a `merchant|mode|seq
/// -> id` index (or any index keyed `prefix|seq`, given by `within`).
/// `scope_of` answers an object's merchant, mode and seq; `starting_after`
/// must be the merchant's own in this mode (else 400). Used by every list
/// of the API.
#[allow(clippy::too_many_arguments)]
pub fn page_by_index<T: DeserializeOwned>(
    kobo: &Env,
    objects: Table,
    index: Table,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
    scope_of: impl Fn(&T) -> (Uuid, Mode, u64),
    render: impl Fn(&T) -> Value,
) -> DomainResult<Page> {
    let prefix = scope_key(merchant, mode).build();
    page_within(
        kobo,
        objects,
        index,
        &prefix,
        merchant,
        mode,
        limit,
        starting_after,
        scope_of,
        render,
    )
}

/// [`page_by_index`] over an index keyed `within|seq`.
#[allow(clippy::too_many_arguments)]
pub fn page_within<T: DeserializeOwned>(
    kobo: &Env,
    objects: Table,
    index: Table,
    within: &[u8],
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
    scope_of: impl Fn(&T) -> (Uuid, Mode, u64),
    render: impl Fn(&T) -> Value,
) -> DomainResult<Page> {
    let read = kobo.store.read()?;
    let prefix = within.to_vec();
    let before = match starting_after {
        Some(id) => match read.get_decoded::<T>(objects, id.as_bytes())? {
            Some(o) if scope_of(&o).0 == merchant && scope_of(&o).1 == mode => {
                let mut k = prefix.clone();
                k.extend_from_slice(&scope_of(&o).2.to_be_bytes());
                Some(k)
            }
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("starting_after names no object of this list: {id}"),
                ))
            }
        },
        None => None,
    };
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(index, &prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v).map_err(|_| {
            kobo_storage::StoreError::Redb("an index row does not hold an id".into())
        })?;
        if let Some(o) = read.get_decoded::<T>(objects, id.as_bytes())? {
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(render(&o));
        }
        Ok(true)
    })?;
    Ok(Page { data, has_more })
}

/// A typed newest-first page: the objects of `index` rows keyed
/// `prefix|seq` (the cursor's `seq` excluded and newer skipped), decoded,
/// those `keep` accepts, at most `limit`, and whether more follow. The
/// caller resolves the cursor (its own object, else 400).
pub fn scan_typed<T: DeserializeOwned>(
    kobo: &Env,
    (objects, index): (Table, Table),
    prefix: &[u8],
    before_seq: Option<u64>,
    limit: usize,
    keep: impl Fn(&T) -> bool,
) -> DomainResult<(Vec<T>, bool)> {
    let read = kobo.store.read()?;
    let before = before_seq.map(|seq| {
        let mut k = prefix.to_vec();
        k.extend_from_slice(&seq.to_be_bytes());
        k
    });
    let mut data = Vec::new();
    let mut has_more = false;
    read.scan_prefix_rev(index, prefix, before.as_deref(), |_, v| {
        let id = Uuid::from_slice(v).map_err(|_| {
            kobo_storage::StoreError::Redb("an index row does not hold an id".into())
        })?;
        if let Some(o) = read.get_decoded::<T>(objects, id.as_bytes())? {
            if !keep(&o) {
                return Ok(true);
            }
            if data.len() == limit {
                has_more = true;
                return Ok(false);
            }
            data.push(o);
        }
        Ok(true)
    })?;
    Ok((data, has_more))
}

impl<T> ListView<T> {
    /// One page of a typed list.
    pub fn page(data: Vec<T>, has_more: bool) -> Self {
        ListView {
            object: ListObject::List,
            data,
            has_more,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn list_json_is_unchanged() {
        for (data, has_more) in [
            (vec![], false),
            (vec![json!({"id": 1}), json!({"id": 2})], true),
        ] {
            let page = Page { data, has_more };
            let old = json!({"object": "list", "data": page.data, "has_more": page.has_more});
            assert_eq!(page.to_api(), old);
        }
    }
}
