//! OLM v0 on the drill's cluster, installed as a cluster admin installs it from its
//! quickstart: its images in the cluster's registry (built by the project's image code from
//! the pinned modules, at their quay.io paths, which the cluster mirrors), the `olm`
//! namespace pinned to the real node, its CRDs, then its `olm.yaml` (as
//! `local_cluster::olm_v0` adapts it). olm-operator and catalog-operator run as the pods
//! of their Deployments, and the pods they make — catalog registry pods, bundle unpack
//! Jobs, the operators' Deployments — run on the real node too.

use local_cluster::olm_v0;

use crate::drill::Drill;

/// Installs OLM v0 and waits for its two operators' rollouts; returns its image and opm's.
pub async fn install(d: &Drill) -> (String, String) {
    let images = d.cluster().push_olm_v0_images().await.unwrap_or_else(|e| panic!("OLM v0's images: {e}"));
    d.cluster()
        .run_pods_for_real(olm_v0::NAMESPACE)
        .await
        .unwrap_or_else(|e| panic!("pin the {} namespace to the real node: {e}", olm_v0::NAMESPACE));
    let crds = olm_v0::crds().unwrap_or_else(|e| panic!("{e}"));
    // The CSV's CRD is too large for client-side apply's last-applied annotation.
    d.kubectl(&["apply", "--server-side", "-f", "-"], Some(&crds));
    d.kubectl(&["wait", "--for=condition=Established", "--timeout=60s", "-f", "-"], Some(&crds));
    let objects = olm_v0::install_manifests().unwrap_or_else(|e| panic!("{e}"));
    let manifests: String =
        objects.iter().map(|o| format!("---\n{}", serde_yaml::to_string(o).expect("YAML"))).collect();
    d.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifests));
    for deployment in ["olm-operator", "catalog-operator"] {
        d.kubectl(
            &["-n", olm_v0::NAMESPACE, "rollout", "status", &format!("deployment/{deployment}"), "--timeout=180s"],
            None,
        );
    }
    images
}
