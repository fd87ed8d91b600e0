//! Brand reads from store snapshots: one brand, a merchant's brands.

use uuid::Uuid;

use kobo_storage::Table;

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::Mode;
use crate::merchant::Brand;
use crate::paging::{page_by_index, Page};

pub fn brand(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Brand> {
    let read = kobo.store.read()?;
    match read.get_decoded::<Brand>(Table::Brands, id.as_bytes())? {
        Some(b) if b.merchant == merchant && b.mode == mode => Ok(b),
        _ => Err(DomainError::not_found("brand", id)),
    }
}

/// A merchant's brands in one mode, newest first.
pub fn list_brands(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
    limit: usize,
    starting_after: Option<Uuid>,
) -> DomainResult<Page> {
    page_by_index::<Brand>(
        kobo,
        Table::Brands,
        Table::BrandIndex,
        merchant,
        mode,
        limit,
        starting_after,
        |b| (b.merchant, b.mode, b.seq),
        Brand::to_api,
    )
}
