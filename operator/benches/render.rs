//! Render benchmarks: `make bench` (or `cargo bench -p model-orchestra-operator --bench render`).
//!
//! - `render/sample`: the sample CR, in process, to checked objects (what the operator does);
//! - `render/apps_50`: a 50-application CR (target: ≤ 2 ms);
//! - `render/apps_50_yaml`: the same plus the YAML stream `render` prints;
//! - `yaml/apps_50`: that YAML stream alone, from the 50-application CR's ~150 objects;
//! - `parse/sample`: strict parsing of the sample CR;
//! - `chart/load`: loading the embedded chart (compiling its templates), once per process.
//!
//! The whole `render` process is measured by the `render_process` bench (also `make bench`).

// The allocator of the operator binary, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/crs.rs"]
mod crs;

use criterion::{criterion_group, criterion_main, Criterion};
use crs::many_apps;
use model_orchestra::chart::{to_yaml_stream, Chart};
use model_orchestra::model::Values;
use model_orchestra_api::ApiVersion;

/// A manifest's values, as the operator reads a CR: its envelope, then its spec strictly as
/// its version's.
fn parse(text: &str) -> Values {
    let doc = model_orchestra_api::parse::document_from_yaml(text).unwrap();
    model_orchestra::versions::served(doc.api_version).values(&doc.spec).unwrap()
}

fn benches(c: &mut Criterion) {
    let chart = Chart::embedded(ApiVersion::V1alpha1).unwrap();
    let sample_text = crs::sample();
    let sample = parse(&sample_text);
    let fifty = parse(&many_apps(50));
    let none = Default::default();
    let render = |values: &Values| chart.render("bench", "default", values, &none).unwrap().objects;

    c.bench_function("chart/load", |b| b.iter(|| Chart::embedded(ApiVersion::V1alpha1).unwrap()));
    c.bench_function("parse/sample", |b| b.iter(|| parse(&sample_text)));
    c.bench_function("render/sample", |b| b.iter(|| render(&sample)));
    c.bench_function("render/apps_50", |b| b.iter(|| render(&fifty)));
    c.bench_function("render/apps_50_yaml", |b| b.iter(|| to_yaml_stream(&render(&fifty))));
    let fifty_objects = render(&fifty);
    c.bench_function("yaml/apps_50", |b| b.iter(|| to_yaml_stream(&fifty_objects)));
}

criterion_group! {
    name = render;
    config = Criterion::default().sample_size(50).warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    targets = benches
}
criterion_main!(render);
