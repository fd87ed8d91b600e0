//! Brands: the names a merchant sells under (a default one per mode,
//! created with the merchant), and their public view.

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Brand {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub name: String,
    pub default: bool,
    pub created_at: DateTime<Utc>,
}

/// The `object` value of a brand.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BrandObject {
    #[serde(rename = "brand")]
    Brand,
}

/// The public Brand object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Brand)]
pub struct BrandView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: BrandObject,
    pub livemode: bool,
    pub name: String,
    /// Whether this is the merchant's default brand.
    pub default: bool,
    pub created_at: DateTime<Utc>,
}

impl Brand {
    pub fn view(&self) -> BrandView {
        BrandView {
            id: self.id,
            object: BrandObject::Brand,
            livemode: self.mode.livemode(),
            name: self.name.clone(),
            default: self.default,
            created_at: self.created_at,
        }
    }

    /// The public Brand object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a brand view serializes")
    }
}
