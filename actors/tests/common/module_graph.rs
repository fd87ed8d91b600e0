//! A crate's module graph, read from its source: the one reader of the
//! layering tests of the actors crate (`actors/tests/layers.rs`) and of the
//! kobo binary (`tests/layers.rs`), which include this file with `#[path]`.
//!
//! Each non-test file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`,
//! the crate root `main.rs`/`lib.rs` is ``). A module's edges are the
//! modules its code names: `crate::` (and `$crate::`) paths, `self::` and
//! `super::` paths (from the inline module they stand in), and paths that
//! start with a name the file brings into scope (a child module, `mod x;`,
//! or a `use` of a crate path: `use crate::api;` then `api::x::y`), `use`
//! groups included; each path goes to the longest of its prefixes that is a
//! module with a file, or on through that module's `pub use` when the next
//! segment is a name it re-exports (`crate::Kobo` is `runtime`). Comments, string and char literals, `#[cfg(test)]`
//! modules and test files (`tests.rs`, `*_tests.rs`, the only files a
//! `#[path]` may name) are not read: a test may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Module path (`a::b`, `` for the crate root) to the modules it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module graph of the crate whose source is `src` (every `.rs` file
/// below it, except those under the folders `skip`, e.g. `bin`: other
/// crates).
pub fn read(src: &Path, skip: &[&str]) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if skip.iter().any(|s| parts[0] == *s) || is_test_file(&parts) {
            continue;
        }
        modules.insert(module_of(&parts), file);
    }
    let mut code = BTreeMap::new();
    let mut reexported = BTreeMap::new();
    for (module, file) in &modules {
        let text = fs::read_to_string(file).expect("a source file");
        for target in path_targets(&text) {
            assert!(
                is_test_file(std::slice::from_ref(&target)),
                "{}: #[path = \"{target}\"] names a file this reader cannot place",
                file.display()
            );
        }
        let c = without_test_modules(&code_only(&text));
        reexported.insert(module.clone(), file_scope(&c, &segments(module)).1);
        code.insert(module.clone(), c);
    }
    let mut graph = Graph::new();
    for (module, c) in &code {
        let edges = graph.entry(module.clone()).or_default();
        for path in named_paths(c, &segments(module)) {
            let to = resolve(&path, &reexported);
            if to != *module {
                edges.insert(to);
            }
        }
    }
    graph
}

/// The graph with each module replaced by `group(module)` (edges inside a
/// group dropped).
pub fn collapse(graph: &Graph, group: impl Fn(&str) -> String) -> Graph {
    let mut out = Graph::new();
    for (from, targets) in graph {
        let g = group(from);
        let edges = out.entry(g.clone()).or_default();
        for to in targets {
            let t = group(to);
            if t != g {
                edges.insert(t);
            }
        }
    }
    out
}

/// The top-level module a module belongs to (`api` for `api::body`, `` for
/// the crate root): its folder, or its file directly under src.
pub fn top_level(module: &str) -> String {
    module.split("::").next().unwrap_or_default().to_string()
}

/// The strongly connected components of `graph` with more than one module
/// (each an import circle), found with Tarjan's algorithm.
pub fn circles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, n: &'g str) {
            let i = self.index.len();
            self.index.insert(n, i);
            self.low.insert(n, i);
            self.stack.push(n);
            self.on_stack.insert(n);
            for m in self.graph.get(n).into_iter().flatten() {
                let m = m.as_str();
                if !self.index.contains_key(m) {
                    self.visit(m);
                    let low = self.low[n].min(self.low[m]);
                    self.low.insert(n, low);
                } else if self.on_stack.contains(m) {
                    let low = self.low[n].min(self.index[m]);
                    self.low.insert(n, low);
                }
            }
            if self.low[n] == self.index[n] {
                let mut component = BTreeSet::new();
                loop {
                    let m = self.stack.pop().expect("n is on the stack");
                    self.on_stack.remove(m);
                    component.insert(m.to_string());
                    if m == n {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in graph.keys() {
        if !t.index.contains_key(n.as_str()) {
            t.visit(n);
        }
    }
    t.out
}

/// The edges of `graph` between the modules of `circle`, as `a -> b` lines.
pub fn edges_within(graph: &Graph, circle: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for from in circle {
        for to in graph.get(from).into_iter().flatten() {
            if circle.contains(to) {
                out.push(format!("{} -> {}", shown(from), shown(to)));
            }
        }
    }
    out
}

/// A module's name in a message (the crate root has none).
pub fn shown(module: &str) -> &str {
    if module.is_empty() {
        "(crate root)"
    } else {
        module
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("the source folder is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(parts: &[String]) -> bool {
    parts
        .last()
        .is_some_and(|f| f == "tests.rs" || f.ends_with("_tests.rs"))
}

/// `a/b.rs`, `a/b/mod.rs` -> `a::b`; `main.rs`, `lib.rs` -> ``.
fn module_of(parts: &[String]) -> String {
    let mut segs: Vec<&str> = parts.iter().map(|p| p.trim_end_matches(".rs")).collect();
    if segs.last() == Some(&"mod") {
        segs.pop();
    }
    if segs == ["main"] || segs == ["lib"] {
        segs.clear();
    }
    segs.join("::")
}

fn segments(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    }
}

/// The module `path` names: the longest of its prefixes that is a module
/// (a key of `reexported`), or where that module's re-export of the next
/// segment leads.
fn resolve(path: &[String], reexported: &BTreeMap<String, Scope>) -> String {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let (n, module) = (0..=path.len())
            .rev()
            .map(|n| (n, path[..n].join("::")))
            .find(|(_, m)| reexported.contains_key(m))
            .unwrap_or_default();
        let reexports = reexported.get(&module);
        match path.get(n).and_then(|next| reexports?.get(next)) {
            Some(target) if n < path.len() => {
                path = target.iter().chain(&path[n + 1..]).cloned().collect();
            }
            _ => return module,
        }
    }
    panic!("re-exports in a circle: {}", path.join("::"))
}

/// The files `#[path = "..."]` attributes name.
fn path_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[path = \"") {
        rest = &rest[at + "#[path = \"".len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        out.push(rest[..end].to_string());
    }
    out
}

/// The source with comments, string and char literals blanked (so braces
/// and paths in them are not read).
pub fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            i += b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .unwrap_or(b.len() - i);
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i = block_comment_end(b, i);
            out.push(' ');
        } else if let Some(end) = raw_string_end(b, i) {
            i = end;
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if let Some(end) = char_literal_end(b, i) {
            i = end;
            out.push_str("' '");
        } else {
            let ch = src[i..].chars().next().expect("a char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Past the (nested) block comment starting at `i`.
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
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
    i
}

/// Past the raw string (`r"..."`, `r#"..."#`) starting at `i`, if one does.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'r' || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    let mut j = i + 1 + hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == b'"' && b[j + 1..].iter().take(hashes).all(|&c| c == b'#') {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// Past the char literal (`'x'`, `'\n'`, `'{'`) starting at `i`, if one
/// does (not a lifetime: `'a`).
fn char_literal_end(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'\'' {
        return None;
    }
    let close = if b.get(i + 1) == Some(&b'\\') {
        b[i + 2..]
            .iter()
            .position(|&c| c == b'\'')
            .map(|p| i + 2 + p)
    } else {
        (b.get(i + 2) == Some(&b'\'')).then_some(i + 2)
    };
    close.map(|c| c + 1)
}

/// The code without its `#[cfg(test)]` modules.
pub fn without_test_modules(code: &str) -> String {
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

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The crate-absolute paths `code` (a file of the module `module`, with
/// comments, strings and test modules gone) names: see the module comment.
pub fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let (scope, _) = file_scope(code, module);
    let mut out = Vec::new();
    // The inline modules around the cursor: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < code.len() {
        let c = code[i..].chars().next().expect("a char");
        match c {
            '{' => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((name, depth));
                }
                i += 1;
                continue;
            }
            '}' => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            ';' => pending_mod = None,
            _ => {}
        }
        let starts = (is_ident(c) || c == '$')
            && !code[..i]
                .chars()
                .next_back()
                .is_some_and(|p| is_ident(p) || p == ':' || p == '$');
        if !starts {
            i += c.len_utf8();
            continue;
        }
        let word_end = i
            + 1
            + code[i + 1..]
                .find(|c: char| !is_ident(c))
                .unwrap_or(code.len() - i - 1);
        let word = &code[i..word_end];
        if word == "mod" {
            let name = ident_at(code[word_end..].trim_start());
            pending_mod = (!name.is_empty()).then(|| name.to_string());
        }
        if code[word_end..].starts_with("::") {
            let inner: Vec<&str> = inline.iter().map(|(n, _)| n.as_str()).collect();
            if let Some(base) = path_base(word, module, &inner, &scope) {
                let mut named = Vec::new();
                use_tree(&code[word_end + 2..], base, &mut named);
                out.extend(named.into_iter().map(|(path, _)| path));
            }
        }
        i = word_end;
    }
    out
}

/// Names in a file's scope that stand for crate paths: name -> the
/// crate-absolute path.
type Scope = BTreeMap<String, Vec<String>>;

/// Where a path starting with `word` begins, crate-absolute, in the file
/// of `module` inside the inline modules `inline`: `None` for a path that
/// does not start in this crate (another crate, a local type).
fn path_base(word: &str, module: &[String], inline: &[&str], scope: &Scope) -> Option<Vec<String>> {
    let mut here: Vec<String> = module.to_vec();
    here.extend(inline.iter().map(|n| n.to_string()));
    match word {
        "crate" | "$crate" => Some(Vec::new()),
        "self" => Some(here),
        "super" => {
            here.pop();
            Some(here)
        }
        w if inline.is_empty() => scope.get(w).cloned(),
        _ => None,
    }
}

/// A file's scope (its child modules, `mod x;`, and what its `use`
/// statements bring in) and the part of it the file re-exports (`pub use
/// a::b::C;`, `pub use a::{b, c as d}`).
fn file_scope(code: &str, module: &[String]) -> (Scope, Scope) {
    let mut scope: Scope = declared_children(code)
        .into_iter()
        .map(|c| {
            let mut path = module.to_vec();
            path.push(c.clone());
            (c, path)
        })
        .collect();
    let children = scope.clone();
    let mut reexported = Scope::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("use ") {
        let at = from + p;
        from = at + 4;
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let before = code[..at].trim_end();
        let public = before.ends_with("pub")
            || before
                .rfind("pub(")
                .is_some_and(|k| before[k..].find(')') == Some(before.len() - k - 1));
        let rest = code[from..].trim_start();
        let word = if rest.starts_with("$crate") {
            "$crate"
        } else {
            ident_at(rest)
        };
        let Some(tree) = rest[word.len()..].strip_prefix("::") else {
            continue;
        };
        let Some(base) = path_base(word, module, &[], &children) else {
            continue;
        };
        let mut named = Vec::new();
        use_tree(tree, base, &mut named);
        for (path, name) in named.into_iter().filter(|(_, n)| n != "*") {
            if public {
                reexported.insert(name.clone(), path.clone());
            }
            scope.insert(name, path);
        }
    }
    (scope, reexported)
}

/// The child modules a file declares (`mod x;`, out of line).
fn declared_children(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut from = 0;
    while let Some(p) = code[from..].find("mod ") {
        let at = from + p;
        from = at + 4;
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = code[from..].trim_start();
        let name = ident_at(rest);
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') {
            out.insert(name.to_string());
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// Reads the rest of a path after `prefix::` (`a::b`, `{a, b::{c, d}}`,
/// `c as d`, `*`), pushing each full path with the name it brings into
/// scope (`*` for a glob); `super` and `self` inside are resolved.
fn use_tree(s: &str, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let s = s.trim_start();
    if let Some(group) = s.strip_prefix('{') {
        let mut depth = 0usize;
        let mut start = 0;
        for (k, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    use_tree(&group[start..k], prefix.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree(&group[start..k], prefix.clone(), out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        return;
    }
    if s.starts_with('*') {
        out.push((prefix, "*".to_string()));
        return;
    }
    let id = ident_at(s);
    let mut path = prefix;
    match id {
        "" | "self" => {}
        "super" => {
            path.pop();
        }
        _ => path.push(id.to_string()),
    }
    let rest = &s[id.len()..];
    match rest.strip_prefix("::") {
        Some(more) if !id.is_empty() && !more.trim_start().starts_with('<') => {
            use_tree(more, path, out)
        }
        _ => {
            let alias = rest
                .trim_start()
                .strip_prefix("as ")
                .map(|a| ident_at(a.trim_start()));
            let name = alias.unwrap_or_else(|| path.last().map_or("", String::as_str));
            let name = name.to_string();
            out.push((path, name));
        }
    }
}
