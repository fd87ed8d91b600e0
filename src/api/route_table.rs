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

    /// Registers every declared route: one scope per group, the groups
    /// nested by their prefixes' segments ([`prefix_tree`]).
    pub fn register(self, cfg: &mut web::ServiceConfig) {
        for node in prefix_tree(group(self.resources)) {
            cfg.service(node.into_scope());
        }
    }
}

/// A scope of the route table: a static path (one or more segments,
/// relative to its parent) holding either a group's routes or the scopes
/// below it, never both (no group's prefix is a whole-segment prefix of
/// another's).
pub(crate) struct PrefixNode {
    pub(crate) path: String,
    /// The group's routes, with their whole paths, and its prefix.
    group: Option<(String, Vec<Resource>)>,
    pub(crate) children: Vec<PrefixNode>,
}

impl PrefixNode {
    fn into_scope(self) -> actix_web::Scope {
        let mut scope = web::scope(&self.path);
        if let Some((prefix, members)) = self.group {
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
        }
        for child in self.children {
            scope = scope.service(child.into_scope());
        }
        scope
    }

    /// The routes' count under this scope.
    #[cfg(test)]
    pub(crate) fn routes(&self) -> usize {
        self.group.as_ref().map_or(0, |(_, m)| m.len())
            + self.children.iter().map(PrefixNode::routes).sum::<usize>()
    }

    /// The most scopes side by side anywhere under this one.
    #[cfg(test)]
    pub(crate) fn widest(&self) -> usize {
        self.children
            .iter()
            .map(PrefixNode::widest)
            .chain([self.children.len()])
            .max()
            .unwrap_or(0)
    }
}

/// The groups as a tree of scopes, one level per path segment, a chain of
/// scopes with one child each joined into one (`/v1/test_helpers`). actix
/// tries an app's or a scope's services one after the other, each a call
/// that sets up and drops a 16-slot capture array even for a plain string
/// prefix: with ~45 groups side by side, reaching one of the last
/// (`/healthz`) took 14% of the server's CPU for that request
/// (docs/performance.md, "Route groups as a tree"). As a tree, a request
/// walks the scopes of its own path's segments only. Siblings never
/// overlap, so their order changes no answer; it stays the declaration
/// order.
pub(crate) fn prefix_tree(groups: Vec<(String, Vec<Resource>)>) -> Vec<PrefixNode> {
    let mut roots = Vec::new();
    for (prefix, members) in groups {
        let segments: Vec<String> = prefix.split('/').skip(1).map(|s| format!("/{s}")).collect();
        insert(&mut roots, &segments, (prefix, members));
    }
    roots.into_iter().map(join_chains).collect()
}

/// Adds `group` to the tree at `level` under the scopes of `segments`.
/// Every group has a prefix (`routes.rs` tests it): an empty one would be
/// a scope matching every path, hiding the scopes after it.
fn insert(level: &mut Vec<PrefixNode>, segments: &[String], group: (String, Vec<Resource>)) {
    let path = segments.first().cloned().unwrap_or_default();
    let at = match level.iter().position(|n| n.path == path) {
        Some(at) => at,
        None => {
            level.push(PrefixNode {
                path,
                group: None,
                children: Vec::new(),
            });
            level.len() - 1
        }
    };
    match segments {
        [] | [_] => level[at].group = Some(group),
        [_, rest @ ..] => insert(&mut level[at].children, rest, group),
    }
}

/// `node` with each chain of group-less scopes with one child joined.
fn join_chains(mut node: PrefixNode) -> PrefixNode {
    while node.group.is_none() && node.children.len() == 1 {
        let child = node.children.pop().expect("one child");
        node.path.push_str(&child.path);
        node.group = child.group;
        node.children = child.children;
    }
    node.children = node.children.into_iter().map(join_chains).collect();
    node
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

    fn tree(nodes: &[PrefixNode]) -> String {
        nodes
            .iter()
            .map(|n| match (&n.group, n.children.is_empty()) {
                (Some((_, m)), true) => format!("{}:{}", n.path, m.len()),
                _ => format!("{}[{}]", n.path, tree(&n.children)),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn groups_nest_by_segment_and_a_chain_of_single_scopes_joins() {
        let rs = [
            "/v1/payment_intents",
            "/v1/payment_intents/{id}",
            "/v1/payouts",
            "/v1/test_helpers/payment_intents/{id}/succeed",
            "/v1/test_helpers/payouts/{id}/fail",
            "/admin/v1/merchants/{id}",
            "/healthz",
        ]
        .map(|p| Resource::new(p, true));
        let nodes = prefix_tree(group(rs.into()));
        assert_eq!(
            tree(&nodes),
            "/v1[/payment_intents:2 /payouts:1 /test_helpers[/payment_intents:1 /payouts:1]] \
             /admin/v1/merchants:1 /healthz:1"
        );
        assert_eq!(nodes.iter().map(PrefixNode::routes).sum::<usize>(), 7);
    }

    #[actix_web::test]
    async fn a_request_reaches_its_route_through_the_nested_scopes_and_names_its_whole_pattern() {
        use actix_web::{test, App, HttpRequest, HttpResponse};
        async fn pattern(req: HttpRequest) -> HttpResponse {
            HttpResponse::Ok().body(req.match_pattern().unwrap_or_default())
        }
        let mut routes = Routes::default();
        for p in [
            "/v1/payment_intents",
            "/v1/payment_intents/{id}",
            "/v1/payouts/{id}",
            "/v1/test_helpers/payment_intents/{id}/succeed",
            "/v1/test_helpers/payouts/{id}/fail",
            "/healthz",
        ] {
            routes.service(Resource::new(p, true).route(web::get().to(pattern)));
        }
        let app = test::init_service(
            App::new()
                .configure(|cfg| routes.register(cfg))
                .default_service(web::to(HttpResponse::NotFound)),
        )
        .await;
        for (path, want) in [
            ("/v1/payment_intents", Some("/v1/payment_intents")),
            ("/v1/payment_intents/pi_1", Some("/v1/payment_intents/{id}")),
            ("/v1/payouts/po_1", Some("/v1/payouts/{id}")),
            (
                "/v1/test_helpers/payouts/po_1/fail",
                Some("/v1/test_helpers/payouts/{id}/fail"),
            ),
            (
                "/v1/test_helpers/payment_intents/pi_1/succeed",
                Some("/v1/test_helpers/payment_intents/{id}/succeed"),
            ),
            ("/healthz", Some("/healthz")),
            // Inside a scope, outside its routes: the app's default.
            ("/v1/test_helpers/refunds/x", None),
            ("/v1/nothing", None),
            ("/v1", None),
            ("/healthzz", None),
        ] {
            let res =
                test::call_service(&app, test::TestRequest::get().uri(path).to_request()).await;
            let status = res.status();
            let body = test::read_body(res).await;
            match want {
                Some(pattern) => assert_eq!(
                    (status.as_u16(), &body[..]),
                    (200, pattern.as_bytes()),
                    "{path}"
                ),
                None => assert_eq!(status.as_u16(), 404, "{path}"),
            }
        }
    }
}
