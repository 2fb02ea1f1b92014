//! The CRs the render benchmarks render.

/// A v1alpha1 ModelOrchestra `bench` with `n` GPU applications (node selector, env, reader
/// options).
pub fn many_apps(n: usize) -> String {
    let mut yaml = String::from("apiVersion: models.titanml.co/v1alpha1\nkind: ModelOrchestra\nmetadata:\n  name: bench\nspec:\n  applications:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "    app-{i}:\n      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-A100}}\n      env: [{{name: INDEX, value: '{i}'}}]\n      readerConfig: {{modelName: model-{i}, device: cuda, maxBatchSize: 16}}\n"
        ));
    }
    yaml
}

/// The sample CR's text.
pub fn sample() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples/modelorchestra.yaml")).unwrap()
}
