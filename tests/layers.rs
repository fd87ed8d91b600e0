//! The kobo binary's layering, checked from its source: no import circle
//! spans more than one top-level module (a folder of src/, such as `api`
//! or `checkout`, or a file directly under it, such as `server.rs`; the
//! crate root, main.rs, is one too). A circle inside one folder is allowed
//! (`api`'s handlers and its shared pieces may name each other).
//!
//! The reader is the actors crate's (`actors/tests/common/module_graph.rs`,
//! see `actors/tests/layers.rs`): each file is a module, its edges the
//! modules its code names; test code and `src/bin` (other crates) are not
//! read. A circle across folders is a strongly connected component of the
//! graph of folders, where folder A names folder B when one of A's files
//! names one of B's.

use std::path::Path;

#[path = "../actors/tests/common/module_graph.rs"]
mod module_graph;

use module_graph::{circles, collapse, edges_within, shown, top_level, Graph};

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    module_graph::read(&src, &["bin"])
}

#[test]
fn no_import_circle_spans_more_than_one_folder() {
    let files = graph();
    let folders = collapse(&files, top_level);
    let circles = circles(&folders);
    let described: Vec<String> = circles
        .iter()
        .map(|circle| {
            let crossing: Vec<String> = files
                .iter()
                .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
                .filter(|(from, to)| {
                    let (f, t) = (top_level(from), top_level(to));
                    f != t && circle.contains(&f) && circle.contains(&t)
                })
                .map(|(from, to)| format!("{} -> {}", shown(from), shown(to)))
                .collect();
            format!(
                "{}\n    through {}",
                edges_within(&folders, circle).join(", "),
                crossing.join(", ")
            )
        })
        .collect();
    assert!(
        described.is_empty(),
        "top-level modules of src/ import each other in a circle:\n  {}",
        described.join("\n  ")
    );
}

/// The reader sees src/: the routes, the server and the handlers' shared
/// pieces are where they are known to be.
#[test]
fn the_graph_has_the_known_imports() {
    let files = graph();
    assert!(
        files["routes"].contains("api::payouts"),
        "{:?}",
        files["routes"]
    );
    assert!(files["api::payouts"].contains("api::endpoint"));
    assert!(files["api::payouts"].contains("api::params"));
    // `use super::{..., ApiResult}`: api/mod.rs, which re-exports it.
    assert!(files["api::payouts"].contains("api::error"));
    assert!(files[""].contains("server"), "{:?}", files[""]);
    assert!(!files.contains_key("bin::loadgen"));
    assert!(!files.contains_key("api::params_tests"));
}
