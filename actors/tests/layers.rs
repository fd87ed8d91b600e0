//! The actors crate's layering, checked from its source.
//!
//! Layers, each importing only those below it (docs/ARCHITECTURE.md):
//! the runtime (the assembled system and the timer supervisor), the
//! resources (one folder or file each: payment intents, the ledger, ...) and
//! the core leaves (env, money, ids, paging, ...); a facade (query.rs)
//! re-exports reads at their old paths for `src/` and no file imports it.
//! This test reads every file under
//! `actors/src`, finds the crate modules its code names (`use crate::x`,
//! `crate::x::` paths, `super::x` from a top-level module), and fails when
//! a core leaf names a resource or the runtime, a resource names the
//! runtime, any file names a facade, or resources name each other in a
//! circle. Test code
//! (`#[cfg(test)] mod ...` and `tests.rs` files) and comments are not read:
//! a test may assemble the whole system.
//!
//! Known exceptions are listed in [`ALLOWED`] with their reason, so they
//! stay visible until they are removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The runtime: assembly, the timer supervisor, and `kobo check` (which
/// reads every resource's rows).
const RUNTIME: &[&str] = &["runtime", "timers", "check"];

/// The core leaves: they know no resource and no runtime.
const CORE: &[&str] = &[
    "audit",
    "auth",
    "calendar",
    "clock",
    "credential",
    "env",
    "error",
    "event",
    "ids",
    "idempotency",
    "money",
    "paging",
    "registry",
    "timer",
];

/// The resources: one folder or file each.
const RESOURCES: &[&str] = &[
    "admin",
    "banks",
    "customer",
    "direct_debit",
    "fx",
    "ledger",
    "mandate",
    "merchant",
    "payment_intent",
    "payout",
    "principal",
    "refund",
    "settlement",
    "usdt",
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

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("actors/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source with comments, string and char literals blanked (so braces
/// and paths in them are not read).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if b[i] == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            b.get(j) == Some(&b'"') && (i == 0 || !(b[i - 1].is_ascii_alphanumeric()))
        } {
            let mut j = i + 1;
            let mut hashes = 0;
            while b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && b[j + 1..].iter().take(hashes).all(|&c| c == b'#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '{'), not a lifetime ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(c) => {
                    out.push_str("' '");
                    i = c + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().expect("a char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The code without its `#[cfg(test)]` modules.
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ");
        let brace = trimmed.find(['{', ';']);
        match (is_mod, brace) {
            (true, Some(p)) if trimmed.as_bytes()[p] == b'{' => {
                let body = &trimmed[p..];
                let mut depth = 0usize;
                let mut end = body.len();
                for (k, c) in body.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &body[end..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of the paths after `crate::` (or of each path in a
/// `crate::{a, b::c}` group).
fn heads(after: &str, out: &mut BTreeSet<String>) {
    let after = after.trim_start();
    if let Some(group) = after.strip_prefix('{') {
        let mut depth = 0usize;
        let mut start = 0;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    push_head(&group[start..k], out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    push_head(&group[start..k], out);
                    start = k + 1;
                }
                _ => {}
            }
        }
    } else {
        push_head(after, out);
    }
}

fn push_head(s: &str, out: &mut BTreeSet<String>) {
    let id = ident_at(s.trim_start());
    if !id.is_empty() && id != "self" {
        out.insert(id.to_string());
    }
}

/// The crate modules `code` names. `top_level` says whether `super::` in
/// this file means the crate root (a file directly under src/ or a
/// folder's mod.rs); elsewhere `super::` stays inside the file's folder.
fn referenced_modules(code: &str, top_level: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut scan = |needle: &str| {
        let mut from = 0;
        while let Some(p) = code[from..].find(needle) {
            let at = from + p;
            let before = code[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                heads(&code[at + needle.len()..], &mut out);
            }
            from = at + needle.len();
        }
    };
    scan("crate::");
    if top_level {
        scan("super::");
    }
    out
}

/// Each module's references to other crate modules, from the source.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = CORE
        .iter()
        .chain(RESOURCES)
        .chain(RUNTIME)
        .chain(FACADES)
        .map(|m| m.to_string())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts == ["lib.rs"] || parts.last().is_some_and(|p| p == "tests.rs") {
            continue;
        }
        let module = parts[0].trim_end_matches(".rs").to_string();
        assert!(
            layer(&module).is_some(),
            "{}: module `{module}` is in no layer; add it to CORE, RESOURCES, RUNTIME or FACADES",
            rel.display()
        );
        let top_level = parts.len() == 1 || parts[1] == "mod.rs";
        let text = fs::read_to_string(&file).expect("a source file");
        let code = without_test_modules(&code_only(&text));
        let edges = graph.entry(module.clone()).or_default();
        for target in referenced_modules(&code, top_level) {
            if target != module && modules.contains(&target) {
                edges.insert(target);
            }
        }
    }
    graph
}

fn allowed(from: &str, to: &str) -> bool {
    ALLOWED.iter().any(|(f, t, _)| *f == from && *t == to)
}

/// A circle among `nodes` in `graph`, if there is one (depth-first search).
fn find_cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    nodes: &BTreeSet<String>,
) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        nodes: &BTreeSet<String>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if !nodes.contains(m) || allowed(n, m) {
                continue;
            }
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == m).expect("on the path");
                    let mut circle = path[start..].to_vec();
                    circle.push(m.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, nodes, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in nodes {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut path = Vec::new();
            if let Some(c) = visit(n, graph, nodes, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
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
    let graph = graph();
    let resources: BTreeSet<String> = RESOURCES.iter().map(|r| r.to_string()).collect();
    if let Some(circle) = find_cycle(&graph, &resources) {
        panic!(
            "resources import each other in a circle: {}",
            circle.join(" -> ")
        );
    }
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

#[test]
fn the_reader_finds_paths_and_skips_comments_strings_and_tests() {
    let code = code_only(
        "use crate::{ledger::{Bucket, post}, money};\n\
         // crate::runtime in a comment\n\
         let s = \"crate::timers\"; let c = '{';\n\
         fn f() { crate::fx::rate(); super::usdt::x(); }\n\
         #[cfg(test)]\nmod tests { use crate::runtime::Kobo; }\n",
    );
    let code = without_test_modules(&code);
    let top: Vec<_> = referenced_modules(&code, true).into_iter().collect();
    assert_eq!(top, ["fx", "ledger", "money", "usdt"]);
    let nested: Vec<_> = referenced_modules(&code, false).into_iter().collect();
    assert_eq!(nested, ["fx", "ledger", "money"]);
}
