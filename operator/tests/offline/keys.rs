//! One place for every label, annotation and condition key (`model_orchestra_api::keys`):
//! no other source file of the workspace writes a `models.titanml.co/…` or
//! `app.kubernetes.io/…` key out as a string, outside its tests.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` before its tests (`#[cfg(test)]`, by convention at the end), without
/// comments.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")).map(|(i, l)| (i + 1, l))
}

#[test]
fn keys_are_defined_once_in_the_api_crates_keys_module() {
    let root = workspace();
    let keys = root.join("api/src/keys.rs");
    let mut files = Vec::new();
    for dir in ["api/src", "operator/src", "httpapi/src", "bundle-tool/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut written_out = Vec::new();
    for file in files.iter().filter(|f| **f != keys) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            if line.contains("\"models.titanml.co/") || line.contains("\"app.kubernetes.io/") {
                written_out.push(format!("{}:{n}: {}", file.strip_prefix(&root).unwrap().display(), line.trim()));
            }
        }
    }
    assert!(written_out.is_empty(), "use model_orchestra_api::keys instead:\n{}", written_out.join("\n"));
    // And the module defines each key once under one name (a key may have two names only
    // when it means two things: the CR's and Chart.yaml's api-version).
    let text = std::fs::read_to_string(&keys).unwrap();
    let mut values: Vec<&str> = text.lines().filter_map(|l| l.split("&str = \"").nth(1)).collect();
    values.sort();
    let twice: Vec<&&str> = values.windows(2).filter(|w| w[0] == w[1]).map(|w| &w[0]).collect();
    assert_eq!(twice, [&"models.titanml.co/api-version\";"], "keys defined twice: {twice:?}");
}

#[test]
fn a_key_written_out_elsewhere_is_found() {
    let text = "const X: &str = \"models.titanml.co/x\";\n// \"app.kubernetes.io/name\" in a comment\n#[cfg(test)]\nmod t { const Y: &str = \"app.kubernetes.io/y\"; }";
    let found: Vec<usize> = code_lines(text)
        .filter(|(_, l)| l.contains("\"models.titanml.co/") || l.contains("\"app.kubernetes.io/"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(found, [1], "the code line, not the comment nor the test");
}
