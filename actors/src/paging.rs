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
    let before = match starting_after {
        Some(id) => match kobo
            .store
            .read()?
            .get_decoded::<T>(objects, id.as_bytes())?
        {
            Some(o) if scope_of(&o).0 == merchant && scope_of(&o).1 == mode => Some(scope_of(&o).2),
            _ => {
                return Err(DomainError::invalid(
                    "starting_after",
                    format!("starting_after names no object of this list: {id}"),
                ))
            }
        },
        None => None,
    };
    let walk = Walk {
        objects,
        index,
        prefix: within,
        before_seq: before,
        limit,
    };
    walk.page(kobo, |_: &T| true, render)
}

/// One newest-first walk of an index whose rows are `prefix|seq -> id`:
/// every list is read through [`Walk::scan`].
pub struct Walk<'a> {
    /// The table of the listed objects, keyed by id.
    pub objects: Table,
    pub index: Table,
    pub prefix: &'a [u8],
    /// The cursor's `seq`: it and newer rows are skipped. The caller
    /// resolves the cursor (its own object, else 400).
    pub before_seq: Option<u64>,
    pub limit: usize,
}

impl Walk<'_> {
    /// The objects of the walk's rows, decoded, those `keep` accepts, at
    /// most `limit`, and whether more follow.
    pub fn scan<T: DeserializeOwned>(
        &self,
        kobo: &Env,
        keep: impl Fn(&T) -> bool,
    ) -> DomainResult<(Vec<T>, bool)> {
        let read = kobo.store.read()?;
        let before = self.before_seq.map(|seq| {
            let mut k = self.prefix.to_vec();
            k.extend_from_slice(&seq.to_be_bytes());
            k
        });
        let mut data = Vec::new();
        let mut has_more = false;
        read.scan_prefix_rev(self.index, self.prefix, before.as_deref(), |_, v| {
            let id = Uuid::from_slice(v).map_err(|_| {
                kobo_storage::StoreError::Redb("an index row does not hold an id".into())
            })?;
            if let Some(o) = read.get_decoded::<T>(self.objects, id.as_bytes())? {
                if !keep(&o) {
                    return Ok(true);
                }
                if data.len() == self.limit {
                    has_more = true;
                    return Ok(false);
                }
                data.push(o);
            }
            Ok(true)
        })?;
        Ok((data, has_more))
    }

    /// [`Walk::scan`] as a [`Page`], each object rendered by `render`.
    pub fn page<T: DeserializeOwned>(
        &self,
        kobo: &Env,
        keep: impl Fn(&T) -> bool,
        render: impl Fn(&T) -> Value,
    ) -> DomainResult<Page> {
        let (objects, has_more) = self.scan(kobo, keep)?;
        Ok(Page {
            data: objects.iter().map(render).collect(),
            has_more,
        })
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
