//! Converts each vendored chart's `Chart.yaml` and `values.yaml` to JSON at build time, so
//! that an embedded chart loads without a YAML parser at startup (the `render` process's
//! largest fixed cost). The YAML stays the one source; this is its parsed form.

use std::path::Path;

/// The charts embedded in the operator (directories under `charts/`).
const CHARTS: [&str; 2] = ["model-orchestra", "model-orchestra-1.0"];

fn main() {
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    // Read when the script runs, not baked in when it is compiled: a checkout moved (or a
    // target dir shared with another clone) must read its own charts.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    for chart in CHARTS {
        let dir = Path::new(&manifest_dir).join("../charts").join(chart);
        std::fs::create_dir_all(Path::new(&out).join(chart)).expect("OUT_DIR is writable");
        for (yaml, json) in [("Chart.yaml", "Chart.json"), ("values.yaml", "values.json")] {
            let path = dir.join(yaml);
            println!("cargo::rerun-if-changed={}", path.display());
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let value: serde_json::Value =
                serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: not valid YAML: {e}", path.display()));
            std::fs::write(Path::new(&out).join(chart).join(json), value.to_string()).expect("OUT_DIR is writable");
        }
    }
}
