//! The cluster's image registry: Debian's `docker-registry` (the CNCF distribution
//! registry), inside the cluster's namespaces on 127.0.0.1, reached from the host through a
//! forwarder at the same address. The project's image code pushes there; a real node's
//! containerd pulls from there, for its own images and for the public registries the
//! cluster mirrors.

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
