//! The OLM v1 drill: catalogd and operator-controller install both lines from the released
//! catalog, upgrade the v0 line to 0.1.1, and a catalog that would break a line never
//! reaches the registry.

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::crs::*;
use crate::drill::{arg, condition, describe_condition, Drill, Maintainer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operator_lines_live_side_by_side_under_a_real_olm_v1() {
    let mut d = Drill::start("olm-v1-drill").await;
    d.on_failure_show(&["get", "clustercatalogs,clusterextensions", "-o", "wide"]);
    d.on_failure_show(&["get", "pods", "-A", "-o", "wide"]);

    // 1. The maintainer publishes the releases and the released catalog while OLM starts:
    //    neither needs the other.
    let maintainer = d.maintainer.clone();
    let publishing = tokio::task::spawn_blocking(move || the_maintainer_publishes_the_released_catalog(&maintainer));
    d.start_olm_v1().await;
    let images = publishing.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    d.step(&format!(
        "pushed as released (mirrored): {}, their bundles, and catalog/configs as {}",
        images.join(", "),
        d.maintainer.catalog_image("v1.0.0")
    ));

    // 2. The cluster admin: the operators' namespaces on the real node, the shared CRD, then
    //    one subscription per line; OLM installs both, and each line's pod really runs.
    the_admin_pins_the_operators_namespaces_to_the_real_node(&d).await;
    the_admin_applies_the_shared_crd(&d);
    the_admin_subscribes(&d, "v1.0.0", "stable-v0");
    the_admin_subscribes(&d, "v1.0.0", "stable-v1");
    catalogd_serves_the_catalog(&d).await;
    let ready = operator_controller_installs_both_lines(&d).await;
    let mut created = vec![];
    for line in ["v0", "v1"] {
        let extension =
            cluster_extension(&d).get(&format!("model-orchestra-operator-{line}")).await.expect("the extension");
        created.push((line, extension.metadata.creation_timestamp.expect("a creation time")));
    }
    d.step(&subscription_to_ready("ClusterExtensions", &created, &ready));
    each_line_gets_the_rbac_its_csv_asks_for(&d).await;

    // 3. CRs reach their line by label and apiVersion.
    the_user_applies_three_crs(&d).await;
    an_unlabelled_v1alpha2_cr_is_the_v1_lines(&d).await;
    released_0_1_0_is_refused_its_first_write(&d).await;
    granted_the_finalizers_0_1_0_takes_the_labelled_v1alpha1_cr(&d).await;
    an_unlabelled_v1alpha1_cr_waits_for_a_line_that_routes_it(&d);

    // 4. 0.1.1 (routes unlabelled v1alpha1 CRs) joins the catalog; OLM upgrades the v0 line.
    let maintainer = d.maintainer.clone();
    tokio::task::spawn_blocking(move || {
        maintainer.release("0.1.1", "v1alpha1", "stable-v0");
        maintainer.publish_catalog("v0.1.1", &["0.1.0", "0.1.1", "1.0.0"]);
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let before = Children::of(&d, "drill-c").await;
    let before_v1 = Children::of(&d, "drill-a").await;
    // The ClusterCatalog is shared by the lines: the newest subscriptions name its image.
    let v0_pod = d.line_pods("v0").await.into_iter().next().expect("the v0 line's pod");
    let upgrade_began = d.elapsed().as_secs();
    the_admin_subscribes(&d, "v0.1.1", "stable-v0");
    olm_upgrades_the_v0_line_to_0_1_1_and_leaves_the_v1_line(&d).await;
    the_v0_pod_is_replaced_while_the_cr_is_edited(&d, &v0_pod).await;
    d.step(&format!("from the new catalog to 0.1.1's pod Ready: {} s", d.elapsed().as_secs() - upgrade_began));
    the_upgrade_applies_the_edit_and_keeps_the_childrens_uids(&d, &before, &before_v1).await;
    the_waiting_unlabelled_v1alpha1_cr_becomes_0_1_1s(&d).await;

    // 5. A release that would break a line is refused before anything is pushed.
    let maintainer = d.maintainer.clone();
    let refused = tokio::task::spawn_blocking(move || {
        a_catalog_whose_bundle_drops_v1alpha1_is_refused_before_it_is_pushed(&maintainer)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    d.step(&format!("refused: {refused}…"));
    d.step(&format!("ok in {} s", d.elapsed().as_secs()));
}

// --- 2. the cluster admin, and OLM ---------------------------------------------------------

/// `bundle-tool subscriptions --catalog-image …-catalog:TAG --channel CHANNEL | kubectl apply --server-side -f -`
fn the_admin_subscribes(d: &Drill, tag: &str, channel: &str) {
    let image = d.maintainer.catalog_image(tag);
    let manifests = d.maintainer.output(&["subscriptions", "--catalog-image", &image, "--channel", channel]);
    d.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifests));
}

fn cluster_extension(d: &Drill) -> Api<DynamicObject> {
    d.cluster_scoped("olm.operatorframework.io/v1", "ClusterExtension", "clusterextensions")
}

/// The bundle a ClusterExtension has installed: (name, version).
fn installed_bundle(extension: &DynamicObject) -> (String, String) {
    let bundle = &extension.data["status"]["install"]["bundle"];
    let field = |f: &str| bundle[f].as_str().unwrap_or_default().to_string();
    (field("name"), field("version"))
}

async fn catalogd_serves_the_catalog(d: &Drill) {
    let catalogs = d.cluster_scoped("olm.operatorframework.io/v1", "ClusterCatalog", "clustercatalogs");
    let catalog = d
        .wait_until(120, "catalogd serves the ClusterCatalog model-orchestra-catalog", || async {
            let catalog = catalogs.get("model-orchestra-catalog").await.map_err(|e| e.to_string())?;
            match condition(&catalog, "Serving") {
                Some(c) if c["status"] == "True" => Ok(catalog),
                _ => Err(describe_condition(&catalog, "Serving")),
            }
        })
        .await;
    d.step(&format!("catalogd serves {}", catalog.data["status"]["urls"]["base"].as_str().unwrap_or("?")));
}

/// operator-controller installs each line's bundle: its Deployment and ServiceAccount (no
/// conflict: neither bundle owns the shared CRD), whose pod runs the image its CSV names on
/// the real node and passes its readiness probe.
async fn operator_controller_installs_both_lines(d: &Drill) -> Vec<(&'static str, k8s_openapi::api::core::v1::Pod)> {
    let extensions = cluster_extension(d);
    for line in ["v0", "v1"] {
        let name = format!("model-orchestra-operator-{line}");
        let extension = d
            .wait_until(180, &format!("the ClusterExtension {name} is Installed"), || async {
                let extension = extensions.get(&name).await.map_err(|e| e.to_string())?;
                match condition(&extension, "Installed") {
                    Some(c) if c["status"] == "True" => Ok(extension),
                    _ => Err(format!(
                        "{}; {}",
                        describe_condition(&extension, "Installed"),
                        describe_condition(&extension, "Progressing")
                    )),
                }
            })
            .await;
        d.step(&format!("{name}: installed bundle {}", installed_bundle(&extension).0));
    }
    each_lines_operator_runs_in_the_pod_olm_made(d).await
}

// --- 5. the upgrade to 0.1.1 ---------------------------------------------------------------

/// The v0 ClusterExtension moves to 0.1.1 (`replaces` 0.1.0 in stable-v0); the v1 line
/// stays on 1.0.0.
async fn olm_upgrades_the_v0_line_to_0_1_1_and_leaves_the_v1_line(d: &Drill) {
    let extensions = cluster_extension(d);
    let extension = d
        .wait_until(180, "OLM upgrades the v0 line to 0.1.1", || async {
            let extension = extensions.get("model-orchestra-operator-v0").await.map_err(|e| e.to_string())?;
            match installed_bundle(&extension) {
                (_, version) if version == "0.1.1" => Ok(extension),
                (name, _) => Err(format!("installed {name}; {}", describe_condition(&extension, "Progressing"))),
            }
        })
        .await;
    let v1 = extensions.get("model-orchestra-operator-v1").await.expect("the v1 ClusterExtension");
    assert_eq!(installed_bundle(&v1).1, "1.0.0", "the bundle version of the v1 line after the v0 upgrade");
    d.step(&format!("OLM upgraded model-orchestra-operator-v0 to {}", installed_bundle(&extension).0));
}

// --- 6. a release that would break a line --------------------------------------------------

/// 2.0.0 carries the CRD (owned mode) and drops v1alpha1, which 0.1.x serves: its bundle
/// builds, the catalog listing it renders, but `catalog validate` refuses it (rule
/// crd-keeps-versions), so does `catalog build` (a maintainer skipping validate), and the
/// registry never gets the tag. Returns the refusal.
fn a_catalog_whose_bundle_drops_v1alpha1_is_refused_before_it_is_pushed(m: &Maintainer) -> String {
    let bad = m.bundles().with_file_name("bad-bundles");
    #[rustfmt::skip]
    let generate = ["bundle", "generate", "--version", "2.0.0", "--crd-version", "v1alpha2", "--image", &m.base,
        "--crd-mode", "owned", "--channels", "stable-v2", "--default-channel", "stable-v2", "--output", arg(&bad)];
    m.bundle_tool("release-2.0.0", &generate).unwrap_or_else(|e| panic!("bundle generate 2.0.0: {e}"));
    let crd_path = bad.join("2.0.0/manifests/models.titanml.co_modelorchestras.yaml");
    let text = std::fs::read_to_string(&crd_path).unwrap_or_else(|e| panic!("{}: {e}", crd_path.display()));
    let mut crd: Value = serde_yaml::from_str(&text).expect("the bundle's CRD");
    let versions = crd["spec"]["versions"].as_array_mut().expect("the CRD's versions");
    versions.retain(|v| v["name"] != "v1alpha1");
    std::fs::write(&crd_path, serde_yaml::to_string(&crd).expect("YAML")).expect("write the CRD");
    m.push_bundle("2.0.0", &bad.join("2.0.0"));

    let dir = m.render_catalog("v2.0.0", &["0.1.0", "0.1.1", "1.0.0", "2.0.0"]);
    let validate = m.bundle_tool("validate-v2.0.0", &["catalog", "validate", arg(&dir)]);
    assert!(validate.is_err(), "catalog validate accepted a catalog whose 2.0.0 bundle drops v1alpha1");
    let image = m.catalog_image("v2.0.0");
    let build = m.bundle_tool("build-v2.0.0", &["catalog", "build", arg(&dir), "--push", &image]);
    assert!(build.is_err(), "catalog build pushed a catalog whose 2.0.0 bundle drops v1alpha1");
    for log in ["validate-v2.0.0", "build-v2.0.0"] {
        assert!(m.log(log).contains("crd-keeps-versions"), "refused for another reason:\n{}", m.log(log));
    }
    let tags = m.tags("model-orchestra-operator-catalog");
    assert!(
        tags.iter().any(|t| t == "v1.0.0") && tags.iter().any(|t| t == "v0.1.1"),
        "the catalog tags pushed before: {tags:?}"
    );
    assert!(!tags.iter().any(|t| t == "v2.0.0"), "the refused catalog's tag exists: {tags:?}");
    let log = m.log("validate-v2.0.0");
    let refusal = log.lines().find(|l| l.contains("crd-keeps-versions")).unwrap_or_default();
    refusal.chars().take(200).collect()
}
