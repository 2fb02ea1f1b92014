//! bundle-tool's YAML and JSON writers against opm's on values no template produces:
//! a catalog whose documents hold awkward strings (long ones folded at 80 columns,
//! YAML 1.1 look-alikes, quotes, tabs, non-ASCII, multi-line text with trailing spaces),
//! awkward keys (digit runs, underscores, case) and numbers (within 2^53: opm reads loaded
//! documents through float64), written back by
//! `opm render DIR -o yaml|json` and by bundle-tool (which parses the catalog and writes
//! it again).

use crate::support::oracle::{first_difference, outcome, Home};
use crate::support::Temp;
use serde_json::{json, Value};

/// Strings opm's YAML output cannot carry (it parses its own JSON as YAML 1.1 first):
/// control characters ("control characters are not allowed") and a raw NEL (U+0085, a
/// YAML line break, which Go's JSON does not escape). Only the JSON case has them.
const CONTROL: [&str; 3] = ["ctrl\u{1}", "del\u{7f}", "nel\u{85}"];

fn awkward_strings(control: bool) -> Vec<String> {
    let mut s: Vec<String> = [
        "",
        " ",
        "plain",
        "true",
        "True",
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "~",
        "null",
        "NULL",
        "1",
        "-1",
        "+1",
        "1.0",
        "1.0.0",
        "v1.0.0",
        "0x1F",
        "0o17",
        "0b101",
        "017",
        "1_000",
        "1e3",
        ".5",
        ".inf",
        "-.inf",
        ".nan",
        "2024-01-02",
        "2024-1-2",
        "2024-13-02",
        "2024-01-02T10:20:30Z",
        "2024-01-02 10:20:30",
        "1:20",
        "190:20:30.15",
        "127.0.0.1:5000/acme/bundle:v1.0.0",
        "<<",
        "-",
        "- item",
        "-item",
        "? x",
        "?x",
        ": x",
        "a: b",
        "a:b",
        "a #b",
        "a#b",
        "#a",
        "@a",
        "`a`",
        "'quoted'",
        "\"dq\"",
        "!tag",
        "&anchor",
        "*alias",
        "|pipe",
        ">gt",
        "%pct",
        "[a]",
        "{a}",
        "a, b",
        "---",
        "...",
        "--- x",
        "tab\there",
        "trailing ",
        " leading",
        "line\nbreak",
        "line\nbreak\n",
        "two\n\nbreaks\n\n",
        "\nleading break",
        "space \nbreak",
        "break\n space",
        "trailing spaces  \nx",
        "unicode: é ü 漢字",
        "emoji 😀",
        "nbsp\u{a0}here",
        "bom\u{feff}",
        "ls\u{2028}ps\u{2029}",
        "back\\slash",
        "<html>&amp;</html>",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if control {
        s.extend(CONTROL.iter().map(|c| c.to_string()));
    }
    let words =
        "Deploys LLM inference stacks: a gateway and one Takeoff inference application per entry of a ModelOrchestra's spec.applications, with GPU scheduling";
    s.push(words.into());
    s.push(words.replace(": ", " - "));
    s.push(format!("{words} {words}"));
    s.push(format!("\"{words}\" \t tab"));
    s.push(format!("{words}\n{words}\n"));
    s.push("x".repeat(200));
    s.push(format!("{}  {}", "a".repeat(85), "double  spaced  words ".repeat(6)));
    s.push(format!("{} é {}", "ü".repeat(70), "ß ".repeat(40)));
    s
}

fn awkward_document(control: bool) -> Value {
    let strings = awkward_strings(control);
    let mut values = serde_json::Map::new();
    for (i, v) in strings.iter().enumerate() {
        values.insert(format!("s{i}"), json!(v));
    }
    let mut keys = serde_json::Map::new();
    // Not as keys: "<<" (a merge key to opm's YAML reader), keys starting with a digit,
    // sign or point, and digits followed by letters or leading zeros — yaml.v2's key order is no total
    // order for those ("017" against "127.0.0.1:…", "a1a" < "a9" < "a10" < "a1a"), so
    // opm's own output changes from run to run (docs/src/olm/catalogs.md).
    for k in strings
        .iter()
        .filter(|k| !k.is_empty() && *k != "<<" && !k.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)))
    {
        keys.insert(k.clone(), json!(1));
    }
    for k in
        ["a10", "a9", "a_b", "aB", "Ab", "a.b", "a-b", "a0", "b", "B", "é", "z9z", "z10a", "x".repeat(130).as_str()]
    {
        keys.insert(k.to_string(), json!(k));
    }
    json!({
        "schema": "acme.example/awkward",
        "package": "acme",
        "values": values,
        "keys": keys,
        "list": strings,
        "numbers": [0, -0.0, 1, -1, 1.5, 0.1, 1e-7, 123456.5, 1234567.5, 1e20, 1e21, 9007199254740991_i64, -9007199254740991_i64],
        "nested": [[], {}, [[1, [2]]], [{"a": [], "b": {}}], {"l": [{"m": [1, 2], "n": null}]}, true, false, null],
    })
}

fn catalog_text(format: &str) -> String {
    let control = format == "json";
    let docs = [
        json!({"schema": "olm.package", "name": "acme", "defaultChannel": "stable", "description": awkward_strings(control).join(" | ")}),
        json!({"schema": "olm.channel", "name": "stable", "package": "acme", "entries": [{"name": "acme.v1.0.0"}]}),
        json!({"schema": "olm.bundle", "name": "acme.v1.0.0", "package": "acme", "image": "quay.io/acme/bundle:v1.0.0",
               "properties": [{"type": "olm.package", "value": {"packageName": "acme", "version": "1.0.0"}}, {"type": "acme.example/awkward", "value": awkward_document(control)}]}),
        awkward_document(control),
    ];
    // Numbers spelled as Go spells them: opm keeps a loaded document's JSON text as it is.
    let text: String =
        docs.iter().map(|d| bundle_tool::catalog::goenc::Node::from_value(d).compact(false) + "\n").collect();
    text
}

fn assert_written_as_opm_writes(format: &str) {
    let home = Home::new(&format!("writer-{format}"));
    let work = Temp::new(&format!("writer-{format}"));
    std::fs::create_dir_all(work.0.join("acme")).unwrap();
    std::fs::write(work.0.join("acme/catalog.json"), catalog_text(format)).unwrap();
    let render = || {
        outcome(&home.opm().args(["render", "-o", format]).arg(&work.0).output().unwrap())
            .unwrap_or_else(|e| panic!("opm render: {e}"))
    };
    let opm = render();
    // The oracle must be deterministic for this input (Go randomises map order).
    for _ in 0..3 {
        let again = render();
        assert!(
            again == opm,
            "opm's {format} output changes from run to run for this catalog: {}",
            first_difference(&opm, &again)
        );
    }
    let catalog = bundle_tool::catalog::fbc::load_dir(&work.0).unwrap();
    let ours = if format == "yaml" { catalog.to_yaml() } else { catalog.to_json() };
    assert!(opm == ours, "{format}: {}", first_difference(&opm, &ours));
}

#[test]
fn awkward_strings_keys_and_numbers_are_written_as_opm_writes_yaml() {
    assert_written_as_opm_writes("yaml");
}

#[test]
fn awkward_strings_keys_and_numbers_are_written_as_opm_writes_json() {
    assert_written_as_opm_writes("json");
}
