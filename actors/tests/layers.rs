//! The actors crate's layering, checked from its source.
//!
//! Layers, each importing only those below it (docs/ARCHITECTURE.md):
//! the runtime (the assembled system and the timer supervisor), the
//! resources (one folder or file each: payment intents, the ledger, ...) and
//! the core leaves (env, money, ids, paging, ...); a facade (query.rs)
//! re-exports reads at their old paths for `src/` and no file imports it.
//! This test reads every file under
//! `actors/src` with the reader it shares with the kobo binary's layering
//! test (`common/module_graph.rs`), takes the graph of top-level modules
//! (a folder or a file directly under src), and fails when
//! a core leaf names a resource or the runtime, a resource names the
//! runtime, any file names a facade, or resources name each other in a
//! circle. Test code
//! (`#[cfg(test)] mod ...` and `tests.rs` files) and comments are not read:
//! a test may assemble the whole system.
//!
//! Known exceptions are listed in [`ALLOWED`] with their reason, so they
//! stay visible until they are removed.

use std::path::Path;

#[path = "common/module_graph.rs"]
mod module_graph;

use module_graph::{
    circles, code_only, collapse, edges_within, named_paths, top_level, without_test_modules, Graph,
};

/// The runtime: assembly, the timer supervisor, `kobo check` (which
/// reads every resource's rows) and the resumptions' coordination.
const RUNTIME: &[&str] = &["runtime", "timers", "check", "resume"];

/// The core leaves: they know no resource and no runtime.
const CORE: &[&str] = &[
    "audit",
    "auth",
    "calendar",
    "clock",
    "compact_layout",
    "cluster",
    "credential",
    "decoded",
    "env",
    "error",
    "event",
    "ids",
    "idempotency",
    "money",
    "paging",
    "sorted_json",
    "stored_json",
    "registry",
    "resumption",
    "timer",
];

/// The resources: one folder or file each.
const RESOURCES: &[&str] = &[
    "admin",
    "banks",
    "customer",
    "dashboard_user",
    "direct_debit",
    "fx",
    "invoice",
    "ledger",
    "mandate",
    "merchant",
    "payment_intent",
    "payment_link",
    "payout",
    "plan",
    "principal",
    "refund",
    "settlement",
    "subscription",
    "usdt",
    "virtual_account",
    "webhook",
];

/// Facades: re-exports at old paths for `src/` (query.rs: the reads, each
/// now in its resource, and paging). Above the resources; nothing in this
/// crate may import them.
const FACADES: &[&str] = &["query"];

/// Known exceptions: (from, to, why it is still there).
const ALLOWED: &[(&str, &str, &str)] = &[];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Core,
    Resource,
    Runtime,
    Facade,
}

fn layer(module: &str) -> Option<Layer> {
    if RUNTIME.contains(&module) {
        Some(Layer::Runtime)
    } else if CORE.contains(&module) {
        Some(Layer::Core)
    } else if RESOURCES.contains(&module) {
        Some(Layer::Resource)
    } else if FACADES.contains(&module) {
        Some(Layer::Facade)
    } else {
        None
    }
}

/// The crate's graph by top-level module (the crate root, lib.rs, left
/// out: it declares and re-exports the modules), each module placed in a
/// layer.
fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = collapse(&module_graph::read(&src, &[]), top_level);
    graph.remove("");
    for (module, targets) in &mut graph {
        assert!(
            layer(module).is_some(),
            "module `{module}` is in no layer; add it to CORE, RESOURCES, RUNTIME or FACADES"
        );
        targets.remove("");
    }
    graph
}

fn allowed(from: &str, to: &str) -> bool {
    ALLOWED.iter().any(|(f, t, _)| *f == from && *t == to)
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let graph = graph();
    let mut broken = Vec::new();
    for (from, targets) in &graph {
        let from_layer = layer(from).expect("classified");
        for to in targets {
            let to_layer = layer(to).expect("classified");
            let wrong = match from_layer {
                _ if to_layer == Layer::Facade => true,
                Layer::Core => to_layer != Layer::Core,
                Layer::Resource => to_layer == Layer::Runtime,
                Layer::Runtime | Layer::Facade => false,
            };
            if wrong && !allowed(from, to) {
                broken.push(format!("{from} ({from_layer:?}) -> {to} ({to_layer:?})"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layering:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn resources_form_no_circle() {
    let mut resources = graph();
    resources.retain(|m, _| layer(m) == Some(Layer::Resource));
    for (from, targets) in &mut resources {
        targets.retain(|to| layer(to) == Some(Layer::Resource) && !allowed(from, to));
    }
    let circles = circles(&resources);
    assert!(
        circles.is_empty(),
        "resources import each other in a circle:\n  {}",
        circles
            .iter()
            .map(|c| edges_within(&resources, c).join(", "))
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

#[test]
fn every_allowed_exception_is_still_needed() {
    let graph = graph();
    for (from, to, why) in ALLOWED {
        assert!(
            graph.get(*from).is_some_and(|t| t.contains(*to)),
            "{from} -> {to} is allowed ({why}) but no longer imported: remove it from ALLOWED"
        );
    }
}

/// The reader's paths (`module_graph::named_paths`), as `a::b` strings.
fn named(code: &str, module: &[&str]) -> Vec<String> {
    let module: Vec<String> = module.iter().map(|m| m.to_string()).collect();
    let code = without_test_modules(&code_only(code));
    let mut paths: Vec<String> = named_paths(&code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn the_reader_finds_paths_and_skips_comments_strings_and_tests() {
    let code = "use crate::{ledger::{Bucket, post}, money};\n\
         // crate::runtime in a comment\n\
         let s = \"crate::timers\"; let c = '{';\n\
         fn f() { crate::fx::rate::<u8>(); super::usdt::x(); self::y::z(); }\n\
         #[cfg(test)]\nmod tests { use crate::runtime::Kobo; }\n";
    assert_eq!(
        named(code, &["payout", "service"]),
        [
            "fx::rate",
            "ledger::Bucket",
            "ledger::post",
            "money",
            "payout::service::y::z",
            "payout::usdt::x"
        ]
    );
    assert_eq!(named(code, &["payout"])[5], "usdt::x");
}

#[test]
fn the_reader_follows_scope_inline_modules_and_super_chains() {
    let code = "mod actor;\npub mod service;\nuse actor::Handle;\nuse crate::ledger;\n\
         mod inner { use super::super::money::Fee; fn f() { super::service::g(); } }\n\
         fn h() { service::run(); ledger::post::entry(); other::x(); }\n";
    assert_eq!(
        named(code, &["payout"]),
        [
            "ledger",
            "ledger::post::entry",
            "money::Fee",
            "payout::actor::Handle",
            "payout::service::g",
            "payout::service::run"
        ]
    );
}

/// The actors crate has a module graph to check: the reader sees the
/// resources' known imports (through `pub use` re-exports too).
#[test]
fn the_graph_has_the_known_imports() {
    let graph = graph();
    assert!(graph["payout"].contains("ledger"), "{:?}", graph["payout"]);
    assert!(
        graph["settlement"].contains("fx"),
        "{:?}",
        graph["settlement"]
    );
    assert!(graph["runtime"].len() > 10, "{:?}", graph["runtime"]);
}
