//! Where the upstream programs are: `target/tools/bin` of this project (built by
//! `scripts/build-go-tools.sh` from the pinned modules under `tools/`), or `$MO_TOOLS_BIN`.

use std::path::PathBuf;

use crate::Error;

/// The directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
/// kubectl and kwok.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MO_TOOLS_BIN") {
        return PathBuf::from(dir);
    }
    // The tools are built per project, not per cargo target dir (CARGO_TARGET_DIR may be
    // elsewhere), so locate them from the workspace root.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/bin")
}

/// The path of one program, or an error saying how to build it.
pub fn program(name: &str) -> Result<PathBuf, Error> {
    let path = bin_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingProgram { name: name.to_string(), path })
    }
}

/// Files taken from pinned modules (e.g. `crds/`: the KEDA and Prometheus Operator CRDs).
pub fn share_dir() -> PathBuf {
    bin_dir().join("../share")
}

/// Where the static binaries (the operator's, `mo-pod`) that the project's images are made
/// of are: `$MO_STATIC_DIR` (the Makefile sets it: inside `make test`, the dev profile's, as
/// the tiers were built), else `make static`'s, `<target>/x86_64-unknown-linux-gnu/release`.
pub fn static_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MO_STATIC_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("x86_64-unknown-linux-gnu/release")
}

/// One static binary, or an error saying how to build it.
pub fn static_program(name: &str) -> Result<PathBuf, Error> {
    let path = static_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingProgram { name: format!("{name} (static, for an image)"), path })
    }
}
