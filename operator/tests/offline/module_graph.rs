//! The layout shows the architecture, and this keeps it so: no import cycles between the
//! modules of the library crates (between top-level modules, and between the sibling files
//! of one module), and the pure decision layer (`reconcile/`) reaches nothing of the I/O
//! layer (`controller/`) nor an API client. Read from the sources: a module's dependencies
//! are the `crate::…` and `super::…` paths its code names, outside its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path below the crate root (`["model", "values"]`).
type Module = Vec<String>;

/// The library modules of the crate whose `src` is `src`, each with the modules it names.
fn graph(src: &Path, binary_files: &[&str]) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    collect(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .into_iter()
        .filter(|f| !binary_files.iter().any(|b| f.ends_with(b)))
        .map(|f| (module_of(src, &f), f))
        .collect();
    modules
        .iter()
        .map(|(module, file)| {
            let code = std::fs::read_to_string(file).unwrap();
            // Tests are at the end of a file, after `#[cfg(test)]`: they may reach anything.
            // Comments (doc links) are no dependency.
            let code = without_comments(code.split("#[cfg(test)]").next().unwrap_or_default());
            let deps = paths(&code)
                .into_iter()
                .filter_map(|path| resolve(module, &path))
                .map(|target| longest_module(&modules, &target))
                .filter(|target| target != module)
                .collect();
            (module.clone(), deps)
        })
        .collect()
}

/// The code without `//` comments (to the end of their line).
fn without_comments(code: &str) -> String {
    code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` → `[a, b]`; `src/a/mod.rs` → `[a]`; `src/lib.rs` → `[]`.
fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Every `crate::…` and `super::…` path in `code`, `{…}` groups expanded; each starts with
/// `crate` or `super`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start).map(|i| i + from) {
            from = i + start.len();
            let preceded =
                i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':');
            if preceded {
                continue;
            }
            let head = start.trim_end_matches(':').to_string();
            let mut pos = from;
            for tail in tree(code, &mut pos) {
                out.push(std::iter::once(head.clone()).chain(tail).collect());
            }
        }
    }
    out
}

/// The paths of a use-tree starting at `pos` (after a `::`): `a::b`, or `a::{b, c::d}`.
fn tree(code: &str, pos: &mut usize) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let skip_space = |pos: &mut usize| {
        while *pos < bytes.len() && bytes[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
    };
    skip_space(pos);
    if bytes.get(*pos) == Some(&b'{') {
        *pos += 1;
        let mut all = Vec::new();
        loop {
            skip_space(pos);
            match bytes.get(*pos) {
                Some(b'}') | None => {
                    *pos += 1;
                    return all;
                }
                Some(b',') => *pos += 1,
                _ => {
                    let before = *pos;
                    all.extend(tree(code, pos));
                    if *pos == before {
                        *pos += 1;
                    }
                }
            }
        }
    }
    let start = *pos;
    while *pos < bytes.len() && (bytes[*pos].is_ascii_alphanumeric() || bytes[*pos] == b'_') {
        *pos += 1;
    }
    let ident = code[start..*pos].to_string();
    if ident.is_empty() {
        return vec![vec![]];
    }
    if code[*pos..].starts_with("::") {
        *pos += 2;
        return tree(code, pos).into_iter().map(|tail| std::iter::once(ident.clone()).chain(tail).collect()).collect();
    }
    vec![vec![ident]]
}

/// The absolute path of `path` (starting `crate` or `super`) named in `module`.
fn resolve(module: &Module, path: &[String]) -> Option<Module> {
    let (head, rest) = path.split_first()?;
    let mut base: Module = if head == "crate" { vec![] } else { module.clone() };
    let mut rest = rest.to_vec();
    if head == "super" {
        base.pop()?;
        while rest.first().map(String::as_str) == Some("super") {
            rest.remove(0);
            base.pop()?;
        }
    }
    Some(base.into_iter().chain(rest.into_iter().filter(|s| s != "self")).collect())
}

/// The module a path is in: its longest prefix that is a module.
fn longest_module(modules: &BTreeMap<Module, PathBuf>, path: &Module) -> Module {
    (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains_key(p)).unwrap_or_default()
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Search<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<Module>>,
    }
    impl Search<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = w == *v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on_stack: BTreeSet::new(),
        found: vec![],
    };
    for v in edges.keys() {
        if !search.index.contains_key(v) {
            search.visit(v);
        }
    }
    search.found
}

/// The edges between top-level modules, and between the sibling files of each module (the
/// parent's own file, which declares and re-exports them, left out).
fn levels(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<(String, BTreeMap<Module, BTreeSet<Module>>)> {
    let mut out = Vec::new();
    let top = |m: &Module| m.iter().take(1).cloned().collect::<Module>();
    let mut top_level: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, tos) in graph.iter().filter(|(m, _)| !m.is_empty()) {
        let entry = top_level.entry(top(from)).or_default();
        entry.extend(tos.iter().filter(|to| !to.is_empty() && top(to) != top(from)).map(top));
    }
    out.push(("the top-level modules".to_string(), top_level));
    let parents: BTreeSet<Module> = graph.keys().filter(|m| m.len() > 1).map(|m| m[..m.len() - 1].to_vec()).collect();
    for parent in parents {
        let child = |m: &Module| m.len() > parent.len() && m[..parent.len()] == parent[..];
        let sibling = |m: &Module| m[..=parent.len()].to_vec();
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, tos) in graph.iter().filter(|(m, _)| child(m)) {
            let entry = edges.entry(sibling(from)).or_default();
            entry.extend(tos.iter().filter(|to| child(to) && sibling(to) != sibling(from)).map(sibling));
        }
        out.push((format!("the files of `{}`", parent.join("::")), edges));
    }
    out
}

fn no_cycles(crate_dir: &str, binary_files: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(crate_dir).join("src");
    let graph = graph(&src, binary_files);
    let found: Vec<String> = levels(&graph)
        .into_iter()
        .flat_map(|(level, edges)| {
            cycles(&edges).into_iter().map(move |c| {
                let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                format!("{level}: {}", names.join(" ↔ "))
            })
        })
        .collect();
    assert!(found.is_empty(), "import cycles in {crate_dir}:\n{}", found.join("\n"));
}

#[test]
fn the_operators_modules_have_no_import_cycles() {
    no_cycles("operator", &["main.rs", "run.rs"]);
}

#[test]
fn the_api_crates_modules_have_no_import_cycles() {
    no_cycles("api", &[]);
}

#[test]
fn the_pure_decision_layer_reaches_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src, &["main.rs", "run.rs"]);
    let mut bad = Vec::new();
    for (from, tos) in graph.iter().filter(|(m, _)| m.first().map(String::as_str) == Some("reconcile")) {
        for to in tos.iter().filter(|to| to.first().map(String::as_str) == Some("controller")) {
            bad.push(format!("{} → {}", from.join("::"), to.join("::")));
        }
    }
    let mut files = Vec::new();
    collect(&src.join("reconcile"), &mut files);
    for file in files {
        let code = std::fs::read_to_string(&file).unwrap();
        let code = without_comments(code.split("#[cfg(test)]").next().unwrap_or_default());
        for io in ["kube::Client", "kube::Api", "kube::runtime", "tokio::", "reqwest", "hyper::"] {
            if code.contains(io) {
                bad.push(format!("{} uses {io}", file.display()));
            }
        }
    }
    assert!(bad.is_empty(), "reconcile/ must stay pure:\n{}", bad.join("\n"));
}

#[test]
fn a_cycle_between_two_modules_is_found() {
    // The checker itself: it must be able to fail.
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    let edges = BTreeMap::from([
        (m("a"), BTreeSet::from([m("b")])),
        (m("b"), BTreeSet::from([m("a")])),
        (m("c"), BTreeSet::from([m("a")])),
    ]);
    assert_eq!(cycles(&edges), vec![vec![m("a"), m("b")]]);
}

#[test]
fn paths_in_use_trees_are_expanded_and_resolved() {
    let code = "use super::{context, Chart, values::Values};\nuse crate::model::{self, resolve::resolve};\nlet x = crate::versions::served(v);";
    let found: BTreeSet<Vec<String>> = paths(code).into_iter().collect();
    let want = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    for p in [
        "super::context",
        "super::Chart",
        "super::values::Values",
        "crate::model::self",
        "crate::model::resolve::resolve",
        "crate::versions::served",
    ] {
        assert!(found.contains(&want(p)), "{p} not in {found:?}");
    }
    let module: Module = vec!["chart".into(), "render".into()];
    assert_eq!(resolve(&module, &want("super::context")), Some(vec!["chart".to_string(), "context".to_string()]));
}
