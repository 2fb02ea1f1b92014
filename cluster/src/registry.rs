//! The cluster's image registry: Debian's `docker-registry` (the CNCF distribution
//! registry), inside the cluster's namespaces on 127.0.0.1, reached from the host through a
//! forwarder at the same address. The project's image code pushes there; a real node's
//! containerd pulls from there, for its own images and for the public registries the
//! cluster mirrors.
//!
//! Beside it, the **models registry**: a second, read-only registry over the same storage,
//! whose blob downloads redirect to the blob server ([`crate::blobs`]) — what Ollama's puller
//! needs. Pods reach it as `registry.kube-system.svc:5000` (a Service of the cluster's); the
//! node's own processes as `127.0.0.1:<port>`. Models are pushed to the image registry.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

use std::path::Path;

use crate::Error;

/// The registry's configuration: storage in the cluster's directory, deletes allowed (a
/// test may remove what it pushed), no auth.
pub fn config(storage: &Path, port: u16) -> String {
    format!(
        "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
        storage.display()
    )
}

/// The models registry's configuration: the same storage, read-only, blob downloads
/// redirected to the blob server at `blobs` (`http://10.10.0.10:<port>`).
pub fn models_config(storage: &Path, port: u16, blobs: &str) -> String {
    format!(
        "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  maintenance:\n    readonly:\n      enabled: true\nmiddleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: {blobs}\nhttp:\n  addr: 0.0.0.0:{port}\n",
        storage.display()
    )
}

/// The Service pods reach the models registry by, and its port.
pub const MODELS_SERVICE: (&str, &str, u16) = ("kube-system", "registry", 5000);

/// The models registry's address for pods: a host name (Ollama follows a redirect to another
/// host only), `registry.kube-system.svc:5000`.
pub fn models_address() -> String {
    let (namespace, name, port) = MODELS_SERVICE;
    format!("{name}.{namespace}.svc:{port}")
}

/// The Service (no selector) and EndpointSlice that send [`MODELS_SERVICE`] to the models
/// registry on the node's address.
pub async fn install_models_service(admin: &Client, node: Ipv4Addr, port: u16) -> Result<(), Error> {
    let (namespace, name, service_port) = MODELS_SERVICE;
    let params = PatchParams::apply("local-cluster").force();
    let service = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": service_port, "targetPort": port, "protocol": "TCP"}]},
    });
    Api::<Service>::namespaced(admin.clone(), namespace).patch(name, &params, &Patch::Apply(&service)).await?;
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-node"), "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "local-cluster"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    });
    Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::namespaced(admin.clone(), namespace)
        .patch(&format!("{name}-node"), &params, &Patch::Apply(&slice))
        .await?;
    Ok(())
}

/// The program, or an error saying how to install it.
pub fn program() -> Result<std::path::PathBuf, Error> {
    crate::isolation::which("docker-registry").ok_or_else(|| Error::MissingProgram {
        name: "docker-registry (Debian's package of the CNCF distribution registry)".into(),
        path: "docker-registry".into(),
    })
}

/// The pause image every pod sandbox of a real node runs, by reference in `registry`.
pub fn pause_image(registry: &str) -> String {
    format!("{registry}/local-cluster/pause:{}", env!("CARGO_PKG_VERSION"))
}

/// The image of `mo-pod` for tests (`serve`, `get`: see the `pod/` crate), run as a
/// non-root user, by reference in `registry`.
pub fn pod_image(registry: &str) -> String {
    format!("{registry}/local-cluster/mo-pod:{}", env!("CARGO_PKG_VERSION"))
}
