//! Every route of the server, registered in one place: the `/v1` API, the
//! operator API, the hosted checkout and sandbox pages (which register
//! their own), and the ops endpoints. Nothing imports this module but the
//! server's start-up and the modules that declare routes.
//!
//! Routes are declared with their whole public path (`Routes::service`,
//! `Routes::route`) and registered grouped by their static prefix: one
//! actix `web::scope` per group (`/v1/payment_intents`,
//! `/v1/test_helpers/payment_intents`, `/admin/v1/merchants`, ...), the
//! group's routes inside it in declaration order. actix matches routes one
//! after the other, a dynamic pattern through a regex; a scope's prefix is
//! a plain string comparison, so a request runs the regexes of its own
//! group only (docs/performance.md, "Route matching"). Groups never overlap
//! (no group's prefix is a whole-segment prefix of another's), so a path
//! reaches exactly the routes it reached when they were one list.

use actix_web::web;

use crate::{api, checkout};

/// How many leading static segments name a route's group at most.
const GROUP_DEPTH: usize = 3;

/// A route's path and its method handlers, registered by [`Routes`].
pub struct Resource {
    path: String,
    routes: Vec<actix_web::Route>,
    /// Unmatched methods answer 405 with the API's error body
    /// (`api::resource`); otherwise actix's bare 405.
    error_body: bool,
}

impl Resource {
    pub fn new(path: &str, error_body: bool) -> Self {
        Resource {
            path: path.to_owned(),
            routes: Vec::new(),
            error_body,
        }
    }

    pub fn route(mut self, route: actix_web::Route) -> Self {
        self.routes.push(route);
        self
    }
}

/// The routes being declared, in order.
#[derive(Default)]
pub struct Routes {
    resources: Vec<Resource>,
}

impl Routes {
    pub fn service(&mut self, resource: Resource) -> &mut Self {
        self.resources.push(resource);
        self
    }

    /// A route without the API's 405 body (the customer-facing pages).
    pub fn route(&mut self, path: &str, route: actix_web::Route) -> &mut Self {
        self.service(Resource::new(path, false).route(route))
    }

    /// Registers every declared route, one scope per group.
    pub fn register(self, cfg: &mut web::ServiceConfig) {
        for (prefix, members) in group(self.resources) {
            let mut scope = web::scope(&prefix);
            for r in members {
                let mut res = web::resource(&r.path[prefix.len()..]);
                if r.error_body {
                    res = res.default_service(web::to(api::error::method_not_allowed));
                }
                for route in r.routes {
                    res = res.route(route);
                }
                scope = scope.service(res);
            }
            cfg.service(scope);
        }
    }
}

/// The leading static segments of a path (at most [`GROUP_DEPTH`]).
fn static_prefix(path: &str) -> String {
    let mut out = String::new();
    for segment in path.split('/').skip(1).take(GROUP_DEPTH) {
        if segment.contains('{') || segment.is_empty() {
            break;
        }
        out.push('/');
        out.push_str(segment);
    }
    out
}

/// Whether `prefix` is `path` or a whole-segment prefix of it.
fn segment_prefix(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Groups routes by prefix, in order of each group's first route: a route
/// joins the shortest candidate prefix (any route's static prefix) that is
/// a whole-segment prefix of its path, so no two groups overlap.
fn group(resources: Vec<Resource>) -> Vec<(String, Vec<Resource>)> {
    let mut candidates: Vec<String> = resources.iter().map(|r| static_prefix(&r.path)).collect();
    candidates.sort_by_key(|c| (c.len(), c.clone()));
    candidates.dedup();
    let mut groups: Vec<(String, Vec<Resource>)> = Vec::new();
    for r in resources {
        let prefix = candidates
            .iter()
            .find(|c| !c.is_empty() && segment_prefix(c, &r.path))
            .cloned()
            .unwrap_or_default();
        match groups.iter_mut().find(|(p, _)| *p == prefix) {
            Some((_, members)) => members.push(r),
            None => groups.push((prefix, vec![r])),
        }
    }
    groups
}

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
    api::invoices::configure(cfg);
    checkout::mandate::configure(cfg);
    api::fx::configure(cfg);
    api::usdt::configure(cfg);
    api::test_helpers::configure(cfg);
    api::webhooks::configure(cfg);
    api::events::configure(cfg);
    api::stream::configure(cfg);
    api::admin::configure(cfg);
    api::docs::configure(cfg);
    api::ops::configure(cfg);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(groups: &[(String, Vec<Resource>)]) -> Vec<(String, Vec<String>)> {
        groups
            .iter()
            .map(|(p, m)| (p.clone(), m.iter().map(|r| r.path.clone()).collect()))
            .collect()
    }

    #[test]
    fn routes_group_by_static_prefix_and_no_group_overlaps_another() {
        let rs = [
            "/v1/payment_intents",
            "/v1/payment_intents/{id}",
            "/docs/admin/{tail:.*}",
            "/docs",
            "/v1/payouts/quote",
            "/v1/payouts",
            "/v1/test_helpers/payment_intents/{id}/succeed",
            "/healthz",
        ]
        .map(|p| Resource::new(p, true));
        let groups = paths(&group(rs.into()));
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            groups,
            vec![
                (
                    "/v1/payment_intents".into(),
                    s(&["/v1/payment_intents", "/v1/payment_intents/{id}"])
                ),
                ("/docs".into(), s(&["/docs/admin/{tail:.*}", "/docs"])),
                (
                    "/v1/payouts".into(),
                    s(&["/v1/payouts/quote", "/v1/payouts"])
                ),
                (
                    "/v1/test_helpers/payment_intents".into(),
                    s(&["/v1/test_helpers/payment_intents/{id}/succeed"])
                ),
                ("/healthz".into(), s(&["/healthz"])),
            ]
        );
    }

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
}
