//! Every route of the server, registered in one place: the `/v1` API, the
//! operator API, the merchant dashboard, the hosted checkout and sandbox pages (which register
//! their own), and the ops endpoints. Nothing imports this module but the
//! server's start-up.

use actix_web::web;

use crate::{api, checkout, dashboard};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(api::resource(api::openapi::PATH).route(web::get().to(api::openapi::serve)));
    api::payment_intents::configure(cfg);
    api::cards::configure(cfg);
    checkout::configure(cfg);
    checkout::bank::configure(cfg);
    api::balance::configure(cfg);
    api::brands::configure(cfg);
    api::settlement::configure(cfg);
    api::payouts::configure(cfg);
    api::refunds::configure(cfg);
    api::mandates::configure(cfg);
    api::customers::configure(cfg);
    api::virtual_accounts::configure(cfg);
    api::payment_links::configure(cfg);
    checkout::link::configure(cfg);
    checkout::invoice::configure(cfg);
    api::invoices::configure(cfg);
    checkout::mandate::configure(cfg);
    api::fx::configure(cfg);
    api::usdt::configure(cfg);
    api::test_helpers::configure(cfg);
    api::webhooks::configure(cfg);
    api::events::configure(cfg);
    api::stream::configure(cfg);
    api::admin::configure(cfg);
    api::dashboard_users::configure(cfg);
    dashboard::configure(cfg);
    api::docs::configure(cfg);
    api::ops::configure(cfg);
}
