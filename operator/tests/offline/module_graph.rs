//! The layout shows the architecture, and this keeps it so: no import cycles between the
//! modules of any crate of the workspace (between top-level modules, and between the sibling
//! files of one module), and the pure decision layer (`reconcile/`) reaches nothing of the
//! I/O layer (`controller/`) nor an API client. Read from the sources: a crate's modules are
//! those its roots (`src/lib.rs`, `src/main.rs`, each `[[bin]]`) declare with `mod`, and a
//! module's dependencies are the `crate::…` and `super::…` paths its code names, outside its
//! tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path below the crate root (`["model", "values"]`).
type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The members of the workspace, from its `Cargo.toml` (`members = [...]`).
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let list = manifest.split("members").nth(1).expect("a members list");
    let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
    list.split(',').map(|m| m.trim().trim_matches('"').to_string()).filter(|m| !m.is_empty()).collect()
}

/// The root files of a crate's library and binaries: `src/lib.rs`, `src/main.rs`,
/// `src/bin/*.rs` and every `path = "src/…"` its manifest names.
fn roots(crate_dir: &Path) -> Vec<PathBuf> {
    let mut roots: BTreeSet<PathBuf> =
        ["src/lib.rs", "src/main.rs"].iter().map(|f| crate_dir.join(f)).filter(|f| f.is_file()).collect();
    if let Ok(bins) = std::fs::read_dir(crate_dir.join("src/bin")) {
        roots.extend(bins.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "rs")));
    }
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    for line in manifest.lines().filter_map(|l| l.trim().strip_prefix("path")) {
        let file = line.trim_start_matches([' ', '=']).trim().trim_matches('"');
        if file.starts_with("src/") {
            roots.insert(crate_dir.join(file));
        }
    }
    roots.into_iter().collect()
}

/// The modules of the crate whose root file is `root`, each with its file: those declared
/// with `mod name;` (outside tests), from the root down.
fn modules(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut todo = vec![(Module::new(), root.to_path_buf())];
    while let Some((module, file)) = todo.pop() {
        let code = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let code = without_comments(code.split("#[cfg(test)]").next().unwrap_or_default());
        let stem = file.file_stem().unwrap().to_string_lossy();
        let dir = match (module.is_empty(), stem.as_ref()) {
            (true, _) | (false, "mod") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for child in declared_modules(&code) {
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let child_file = if flat.is_file() { flat } else { nested };
            assert!(child_file.is_file(), "{}: `mod {child};` has no file", file.display());
            todo.push((module.iter().cloned().chain([child]).collect(), child_file));
        }
        found.insert(module, file);
    }
    found
}

/// The names of the file modules `code` declares (`mod name;`, `pub(crate) mod name;`).
fn declared_modules(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("mod ") {
        let preceded = code[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        let rest = &code[i + 4..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if !preceded && !name.is_empty() && after.starts_with(';') {
            out.push(name);
        }
    }
    out
}

/// The modules of one crate root, each with the modules it names.
fn graph(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(root);
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

/// Every import cycle in the crates of the workspace, one line each.
fn cycles_in(crate_dir: &str) -> Vec<String> {
    roots(&workspace().join(crate_dir))
        .iter()
        .flat_map(|root| {
            let graph = graph(root);
            let target = root.strip_prefix(workspace()).unwrap_or(root).display().to_string();
            levels(&graph)
                .into_iter()
                .flat_map(|(level, edges)| {
                    cycles(&edges).into_iter().map(move |c| {
                        let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                        format!("{level}: {}", names.join(" ↔ "))
                    })
                })
                .map(move |cycle| format!("{target}, {cycle}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let found: Vec<String> = members().iter().flat_map(|m| cycles_in(m)).collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn every_crate_of_the_workspace_is_read() {
    let members = members();
    for crate_dir in ["api", "operator", "httpapi", "bundle-tool", "cluster", "images", "pod"] {
        assert!(members.contains(&crate_dir.to_string()), "{crate_dir} is not in {members:?}");
    }
}

#[test]
fn every_source_file_is_a_module_of_some_crate_root() {
    // A file no root declares would escape the check (and the compiler).
    let mut stray = Vec::new();
    for crate_dir in members() {
        let dir = workspace().join(&crate_dir);
        let reached: BTreeSet<PathBuf> = roots(&dir).iter().flat_map(|r| modules(r).into_values()).collect();
        let mut files = Vec::new();
        collect(&dir.join("src"), &mut files);
        stray.extend(files.into_iter().filter(|f| !reached.contains(f)).map(|f| f.display().to_string()));
    }
    assert!(stray.is_empty(), "files no crate root declares:\n{}", stray.join("\n"));
}

#[test]
fn the_pure_decision_layer_reaches_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src.join("lib.rs"));
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

#[test]
fn a_crates_modules_are_the_files_its_roots_declare() {
    assert_eq!(
        declared_modules("pub mod a;\npub(crate) mod b;\n#[cfg(x)] mod c;\nmod tests {\n}\nfn rmod d;"),
        ["a", "b", "c"]
    );
    let operator = workspace().join("operator/src");
    let library = modules(&operator.join("lib.rs"));
    assert_eq!(library[&vec!["chart".to_string(), "render".to_string()]], operator.join("chart/render.rs"));
    assert!(!library.contains_key(&vec!["run".to_string()]), "run.rs is the binary's");
    let binary = modules(&operator.join("main.rs"));
    assert_eq!(binary[&vec!["run".to_string()]], operator.join("run.rs"));
}
