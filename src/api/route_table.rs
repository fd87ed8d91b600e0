//! The route table: routes declared with their whole public path
//! (`Routes::service`, `Routes::route`, by each module's `configure`) and
//! registered grouped by their static prefix: one actix `web::scope` per
//! group (`/v1/payment_intents`, `/v1/test_helpers/payment_intents`,
//! `/admin/v1/merchants`, ...), the group's routes inside it in declaration
//! order. actix matches routes one after the other, a dynamic pattern
//! through a regex; a scope's prefix is a plain string comparison, so a
//! request runs the regexes of its own group only (docs/performance.md,
//! "Route matching"). Groups never overlap (no group's prefix is a
//! whole-segment prefix of another's), so a path reaches exactly the
//! routes it reached when they were one list. `crate::routes` declares
//! every route in one place.

use actix_web::web;

/// How many leading static segments name a route's group at most.
const GROUP_DEPTH: usize = 3;

/// A route's path and its method handlers, registered by [`Routes`].
pub struct Resource {
    pub(crate) path: String,
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
    pub(crate) resources: Vec<Resource>,
}

impl Routes {
    pub fn service(&mut self, resource: Resource) -> &mut Self {
        self.resources.push(resource);
        self
    }

    /// A route without the API's 405 body (the customer-facing pages). A
    /// second route on a path already declared this way joins that
    /// resource (a GET and a POST on one page), as with actix's own
    /// `route`: two resources of one path would leave the second
    /// unreachable (the first answers 405 to the other method).
    pub fn route(&mut self, path: &str, route: actix_web::Route) -> &mut Self {
        match self
            .resources
            .iter_mut()
            .find(|r| r.path == path && !r.error_body)
        {
            Some(existing) => existing.routes.push(route),
            None => self.resources.push(Resource::new(path, false).route(route)),
        }
        self
    }

    /// Registers every declared route, one scope per group.
    pub fn register(self, cfg: &mut web::ServiceConfig) {
        for (prefix, members) in group(self.resources) {
            let mut scope = web::scope(&prefix);
            for r in members {
                let mut res = web::resource(&r.path[prefix.len()..]);
                if r.error_body {
                    res = res.default_service(web::to(super::error::method_not_allowed));
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
pub(crate) fn segment_prefix(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Groups routes by prefix, in order of each group's first route: a route
/// joins the shortest candidate prefix (any route's static prefix) that is
/// a whole-segment prefix of its path, so no two groups overlap.
pub(crate) fn group(resources: Vec<Resource>) -> Vec<(String, Vec<Resource>)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_route_on_a_page_path_joins_its_resource() {
        let mut routes = Routes::default();
        routes
            .route("/console/clock", web::get().to(actix_web::HttpResponse::Ok))
            .route(
                "/console/clock",
                web::post().to(actix_web::HttpResponse::Ok),
            )
            .route("/console/fx", web::get().to(actix_web::HttpResponse::Ok));
        let counts: Vec<_> = routes
            .resources
            .iter()
            .map(|r| (r.path.as_str(), r.routes.len()))
            .collect();
        assert_eq!(counts, vec![("/console/clock", 2), ("/console/fx", 1)]);
    }

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
}
