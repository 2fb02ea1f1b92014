//! Converts the vendored chart's `Chart.yaml` and `values.yaml` to JSON at build time, so
//! that the embedded chart loads without a YAML parser at startup (the `render` process's
//! largest fixed cost). The YAML stays the one source; this is its parsed form.

use std::path::Path;

fn main() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/model-orchestra");
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    for (yaml, json) in [("Chart.yaml", "Chart.json"), ("values.yaml", "values.json")] {
        let path = chart.join(yaml);
        println!("cargo::rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let value: serde_json::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: not valid YAML: {e}", path.display()));
        std::fs::write(Path::new(&out).join(json), value.to_string()).expect("OUT_DIR is writable");
    }
}
