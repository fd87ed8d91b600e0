//! Every route of the server, declared in one place: the `/v1` API, the
//! operator API, the merchant dashboard, the operator console, the hosted
//! checkout and sandbox pages (which declare their own), and the ops
//! endpoints, registered through the route table (`api::route_table`: one
//! scope per static prefix). Nothing imports this module but the server's
//! start-up.

use actix_web::web;

use crate::api::route_table::Routes;
use crate::{api, checkout, console, dashboard};

pub fn configure(cfg: &mut web::ServiceConfig) {
    let mut routes = Routes::default();
    declare(&mut routes);
    routes.register(cfg);
}

fn declare(cfg: &mut Routes) {
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
    checkout::subscription::configure(cfg);
    api::invoices::configure(cfg);
    api::plans::configure(cfg);
    api::subscriptions::configure(cfg);
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
    console::configure(cfg);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::route_table::{group, prefix_tree, segment_prefix};

    #[test]
    fn every_declared_route_lands_in_one_group_whose_prefix_no_other_group_shares() {
        let mut routes = Routes::default();
        declare(&mut routes);
        let declared = routes.resources.len();
        let groups = group(routes.resources);
        assert_eq!(groups.iter().map(|(_, m)| m.len()).sum::<usize>(), declared);
        for (a, members) in &groups {
            assert!(!a.is_empty());
            for r in members {
                assert!(segment_prefix(a, &r.path), "{} in {a}", r.path);
            }
            for (b, _) in &groups {
                assert!(a == b || !segment_prefix(a, b), "{a} overlaps {b}");
            }
        }
    }

    #[test]
    fn the_scope_tree_holds_every_route_and_few_scopes_side_by_side() {
        let mut routes = Routes::default();
        declare(&mut routes);
        let declared = routes.resources.len();
        let roots = prefix_tree(group(routes.resources));
        assert_eq!(roots.iter().map(|n| n.routes()).sum::<usize>(), declared);
        let widest = roots.iter().map(|n| n.widest()).max().unwrap();
        assert!(roots.len() <= 16, "{} top-level scopes", roots.len());
        assert!(widest <= 32, "{widest} scopes side by side under one");
    }
}
