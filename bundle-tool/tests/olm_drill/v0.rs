//! The OLM v0 drill: operator-lifecycle-manager (olm-operator and catalog-operator as pods on
//! the real node) installs both lines from the released catalog, each by the manifests
//! `bundle-tool subscriptions --olm v0` prints — its namespace, a CatalogSource of the
//! catalog image, an AllNamespaces OperatorGroup and a Subscription — the v0 line's
//! InstallPlans approved by hand (`Manual`), the v1 line's not; OLM upgrades the v0 line to
//! 0.1.1 along `stable-v0`; bundles that break OLM v0's rules, refused by `bundle validate`
//! and `catalog validate` but pushed anyway, are refused by OLM v0 in its own words with
//! nothing of the installed lines lost; and uninstalling a line leaves the other serving.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::ResourceExt;
use serde_json::Value;

use crate::crs::*;
use crate::drill::{arg, describe_condition, Drill, Maintainer};
use crate::olm_v0;

/// The CRD the lines share.
const CRD: &str = "modelorchestras.models.titanml.co";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operator_lines_live_side_by_side_under_a_real_olm_v0() {
    let mut d = Drill::start("olm-v0-drill").await;
    #[rustfmt::skip]
    let shown: [&[&str]; 5] = [
        &["get", "subscriptions,installplans,clusterserviceversions,catalogsources,operatorgroups", "-A", "-o", "wide"],
        // A namespace that does not go away says what it still holds.
        &["get", "namespaces", "-o", r#"jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.conditions[?(@.status=="True")].message}{"\n"}{end}"#],
        &["get", "pods,jobs", "-A", "-o", "wide"],
        &["-n", local_cluster::olm_v0::NAMESPACE, "logs", "deploy/olm-operator", "--tail=30"],
        &["-n", local_cluster::olm_v0::NAMESPACE, "logs", "deploy/catalog-operator", "--tail=30"],
    ];
    for args in shown {
        d.on_failure_show(args);
    }

    // 1. The maintainer publishes the releases and the released catalog while the admin
    //    installs OLM v0: neither needs the other.
    let maintainer = d.maintainer.clone();
    let publishing = tokio::task::spawn_blocking(move || the_maintainer_publishes_the_released_catalog(&maintainer));
    the_admin_installs_olm_v0(&d).await;
    let images = publishing.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    d.step(&format!(
        "pushed as released (mirrored): {}, their bundles, and catalog/configs as {}",
        images.join(", "),
        d.maintainer.catalog_image("v1.0.0")
    ));

    // 2. The cluster admin: the operators' namespaces on the real node, the shared CRD, then
    //    one subscription per line, the v0 line's approved by hand.
    the_admin_pins_the_operators_namespaces_to_the_real_node(&d).await;
    the_admin_applies_the_shared_crd(&d);
    the_admin_subscribes(&d, "v1.0.0", "stable-v0", Some("Manual"));
    the_admin_subscribes(&d, "v1.0.0", "stable-v1", None);
    each_catalog_is_served_by_a_registry_pod_on_the_real_node(&d).await;
    let plan = the_install_plan_waits_for_approval(&d, "v0", "model-orchestra-operator.v0.1.0").await;
    the_admin_approves(&d, "v0", &plan);
    let ready = olm_installs_both_lines(&d, [("v0", "0.1.0"), ("v1", "1.0.0")]).await;
    let created = [("v0", subscription_created(&d, "v0").await), ("v1", subscription_created(&d, "v1").await)];
    d.step(&subscription_to_ready("Subscriptions (v0's approval included)", &created, &ready));
    each_bundle_was_unpacked_by_a_job_on_the_real_node(&d).await;
    each_line_gets_the_rbac_its_csv_asks_for(&d).await;

    // 3. CRs reach their line by label and apiVersion.
    the_user_applies_three_crs(&d).await;
    an_unlabelled_v1alpha2_cr_is_the_v1_lines(&d).await;
    released_0_1_0_is_refused_its_first_write(&d).await;
    granted_the_finalizers_0_1_0_takes_the_labelled_v1alpha1_cr(&d).await;
    an_unlabelled_v1alpha1_cr_waits_for_a_line_that_routes_it(&d);

    // 4. 0.1.1 joins the catalog; the v0 line's Subscription follows stable-v0 to it, once
    //    the admin approves its InstallPlan.
    let maintainer = d.maintainer.clone();
    tokio::task::spawn_blocking(move || {
        maintainer.release("0.1.1", "v1alpha1", "stable-v0");
        maintainer.publish_catalog("v0.1.1", &["0.1.0", "0.1.1", "1.0.0"]);
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let before = Children::of(&d, "drill-c").await;
    let before_v1 = Children::of(&d, "drill-a").await;
    let v1_csv = csv(&d, "v1", "model-orchestra-operator.v1.0.0").await;
    let v0_pod = d.line_pods("v0").await.into_iter().next().expect("the v0 line's pod");
    let upgrade_began = d.elapsed().as_secs();
    the_admin_subscribes(&d, "v0.1.1", "stable-v0", Some("Manual"));
    let plan = the_install_plan_waits_for_approval(&d, "v0", "model-orchestra-operator.v0.1.1").await;
    the_admin_approves(&d, "v0", &plan);
    olm_replaces_0_1_0_with_0_1_1_and_leaves_the_v1_line(&d, &v1_csv).await;
    the_v0_pod_is_replaced_while_the_cr_is_edited(&d, &v0_pod).await;
    d.step(&format!(
        "from the new catalog to 0.1.1's pod Ready: {} s (the approval included)",
        d.elapsed().as_secs() - upgrade_began
    ));
    the_upgrade_applies_the_edit_and_keeps_the_childrens_uids(&d, &before, &before_v1).await;
    the_waiting_unlabelled_v1alpha1_cr_becomes_0_1_1s(&d).await;

    // 5. Bundles that break OLM v0's rules: bundle-tool refuses them; pushed anyway, OLM v0
    //    refuses them too, in its own words, and nothing of the two lines is lost.
    let kept = Kept::of(&d).await;
    let maintainer = d.maintainer.clone();
    let refused = tokio::task::spawn_blocking(move || the_maintainer_is_refused_three_breaking_releases(&maintainer))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    for (rule, finding) in &refused {
        // Without the path the finding starts with.
        let said = finding.split_once(": error: ").map_or(finding.as_str(), |(_, f)| f);
        let said = said.split_once(&format!("[{rule}]: ")).map_or(said, |(_, f)| f);
        d.step(&format!("bundle-tool refused ({rule}): {}…", said.chars().take(240).collect::<String>()));
    }
    olm_v0_refuses_them_in_its_own_words(&d).await;
    nothing_of_the_installed_lines_is_lost(&d, &kept).await;

    // 6. Uninstalling a line: its Subscription and CSV deleted.
    the_admin_uninstalls_the_v1_line(&d);
    the_v0_line_serves_on_and_every_cr_and_child_is_in_place(&d, &kept).await;
    d.step(&format!("ok in {} s", d.elapsed().as_secs()));
}

// --- 1. OLM v0 -----------------------------------------------------------------------------

/// OLM's quickstart, as an admin of a cluster without the internet installs it: the images
/// mirrored, the CRDs, then `olm.yaml`; both operators roll out on the real node.
async fn the_admin_installs_olm_v0(d: &Drill) {
    let (olm, opm) = olm_v0::install(d).await;
    let pods = Api::<Pod>::namespaced(d.client(), local_cluster::olm_v0::NAMESPACE)
        .list(&ListParams::default())
        .await
        .expect("OLM's pods");
    for pod in pods.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let spec = pod.spec.as_ref().expect("a pod spec");
        assert_eq!(
            spec.node_name.as_deref(),
            Some(local_cluster::REAL_NODE_NAME),
            "{} runs on the real node",
            pod.name_any()
        );
    }
    d.step(&format!(
        "OLM v0 up: olm-operator and catalog-operator in their pods on the real node, from {olm} (and {opm})"
    ));
}

// --- 2. the cluster admin, and OLM ---------------------------------------------------------

/// `bundle-tool subscriptions --olm v0 --catalog-image …-catalog:TAG --channel CHANNEL
/// [--install-plan-approval Manual] | kubectl apply --server-side -f -`
fn the_admin_subscribes(d: &Drill, tag: &str, channel: &str, approval: Option<&str>) {
    let image = d.maintainer.catalog_image(tag);
    let mut args = vec!["subscriptions", "--olm", "v0", "--catalog-image", &image, "--channel", channel];
    if let Some(approval) = approval {
        args.extend(["--install-plan-approval", approval]);
    }
    let manifests = d.maintainer.output(&args);
    d.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifests));
}

fn olm_api(d: &Drill, namespace: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let version = if kind == "OperatorGroup" { "v1" } else { "v1alpha1" };
    d.namespaced(&format!("operators.coreos.com/{version}"), kind, plural, namespace)
}

fn line_namespace(line: &str) -> String {
    format!("model-orchestra-{line}")
}

/// The catalog operator serves each line's CatalogSource from a registry pod on the real
/// node: the catalog copied out of its image by OLM's utilities (`extractContent`), served
/// by `opm serve`, the connection READY.
async fn each_catalog_is_served_by_a_registry_pod_on_the_real_node(d: &Drill) {
    for line in ["v0", "v1"] {
        let namespace = line_namespace(line);
        let sources = olm_api(d, &namespace, "CatalogSource", "catalogsources");
        d.wait_until(180, &format!("the {line} line's CatalogSource is READY"), || async {
            let source = sources.get("model-orchestra-catalog").await.map_err(|e| e.to_string())?;
            let state = &source.data["status"]["connectionState"];
            match state["lastObservedState"].as_str() {
                Some("READY") => Ok(()),
                other => Err(format!("{other:?} ({})", state["address"])),
            }
        })
        .await;
        let pods = Api::<Pod>::namespaced(d.client(), &namespace)
            .list(&ListParams::default().labels("olm.catalogSource=model-orchestra-catalog"))
            .await
            .expect("the registry pods");
        let pod = pods.items.iter().find(|p| p.metadata.deletion_timestamp.is_none()).expect("a registry pod");
        let spec = pod.spec.as_ref().expect("a pod spec");
        assert_eq!(spec.node_name.as_deref(), Some(local_cluster::REAL_NODE_NAME), "the registry pod's node");
        let init: Vec<&str> = spec.init_containers.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(init, ["extract-utilities", "extract-content"], "the catalog is copied out of its image");
        let server = spec.containers[0].image.as_deref().unwrap_or_default();
        assert!(server.starts_with(local_cluster::olm_v0::OPM_IMAGE), "served by opm's image: {server}");
    }
    d.step("each line's CatalogSource is READY, served by opm in a registry pod on the real node");
}

/// The InstallPlan of `line`'s namespace that would install `csv`, once it waits for
/// approval (`Manual`); its name.
async fn the_install_plan_waits_for_approval(d: &Drill, line: &str, csv: &str) -> String {
    let plans = olm_api(d, &line_namespace(line), "InstallPlan", "installplans");
    let subscriptions = olm_api(d, &line_namespace(line), "Subscription", "subscriptions");
    let subscription = format!("model-orchestra-operator-{line}");
    let plan = d
        .wait_until(180, &format!("an InstallPlan for {csv} waits for approval"), || async {
            let list = plans.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let names = |p: &DynamicObject| p.data["spec"]["clusterServiceVersionNames"].to_string();
            let plan = match list.items.iter().find(|p| names(p).contains(&format!("\"{csv}\""))) {
                Some(p) if p.data["status"]["phase"] == "RequiresApproval" => p.clone(),
                Some(p) => return Err(format!("{} is {}", p.name_any(), p.data["status"]["phase"])),
                None => return Err(format!("plans: {:?}", list.items.iter().map(names).collect::<Vec<_>>())),
            };
            // The Subscription says so once the catalog operator has seen the plan.
            let sub = subscriptions.get(&subscription).await.map_err(|e| e.to_string())?;
            match sub.data["status"]["state"].as_str() {
                Some("UpgradePending") => Ok(plan),
                state => Err(format!("{} waits for approval; the Subscription is {state:?}", plan.name_any())),
            }
        })
        .await;
    assert_eq!(plan.data["spec"]["approved"], false, "a Manual InstallPlan is not approved");
    d.step(&format!(
        "{}: {csv} waits for approval (RequiresApproval, the Subscription UpgradePending)",
        plan.name_any()
    ));
    plan.name_any()
}

/// `kubectl -n model-orchestra-<line> patch installplan NAME --type merge -p '{"spec":{"approved":true}}'`
fn the_admin_approves(d: &Drill, line: &str, plan: &str) {
    let namespace = line_namespace(line);
    #[rustfmt::skip]
    d.kubectl(&["-n", &namespace, "patch", "installplan", plan, "--type", "merge", "-p", r#"{"spec":{"approved":true}}"#], None);
}

/// When `line`'s Subscription was created.
async fn subscription_created(d: &Drill, line: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let subscription = olm_api(d, &line_namespace(line), "Subscription", "subscriptions")
        .get(&format!("model-orchestra-operator-{line}"))
        .await
        .expect("the Subscription");
    subscription.metadata.creation_timestamp.expect("a creation time")
}

/// The CSV `name` of `line`'s namespace.
async fn csv(d: &Drill, line: &str, name: &str) -> DynamicObject {
    olm_api(d, &line_namespace(line), "ClusterServiceVersion", "clusterserviceversions")
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("the CSV {name}: {e}"))
}

/// Waits until `line`'s CSV of `version` is `Succeeded`.
async fn wait_succeeded(d: &Drill, line: &str, version: &str) -> DynamicObject {
    let csvs = olm_api(d, &line_namespace(line), "ClusterServiceVersion", "clusterserviceversions");
    let name = format!("model-orchestra-operator.v{version}");
    d.wait_until(240, &format!("the CSV {name} Succeeded"), || async {
        let csv = csvs.get(&name).await.map_err(|e| e.to_string())?;
        let status = &csv.data["status"];
        match status["phase"].as_str() {
            Some("Succeeded") => Ok(csv),
            phase => Err(format!("{phase:?} {}: {}", status["reason"], status["message"])),
        }
    })
    .await
}

/// OLM installs each line's bundle: its CSV Succeeds (no conflict: neither CSV provides an
/// API, the CRD is shared), and each line's operator runs in the pod OLM's Deployment made.
async fn olm_installs_both_lines(d: &Drill, lines: [(&str, &str); 2]) -> Vec<(&'static str, Pod)> {
    for (line, version) in lines {
        let csv = wait_succeeded(d, line, version).await;
        let subscriptions = olm_api(d, &line_namespace(line), "Subscription", "subscriptions");
        let name = format!("model-orchestra-operator-{line}");
        d.wait_until(60, &format!("the {line} line's Subscription names {} installed", csv.name_any()), || async {
            let sub = subscriptions.get(&name).await.map_err(|e| e.to_string())?;
            let installed = &sub.data["status"]["installedCSV"];
            if *installed == csv.name_any().as_str() {
                Ok(())
            } else {
                Err(format!("installedCSV {installed}, state {}", sub.data["status"]["state"]))
            }
        })
        .await;
        let mode = csv.metadata.annotations.as_ref().and_then(|a| a.get("olm.targetNamespaces")).cloned();
        assert_eq!(mode.as_deref(), Some(""), "installed AllNamespaces (an empty olm.targetNamespaces)");
        d.step(&format!("the {line} line's CSV {} Succeeded", csv.name_any()));
    }
    each_lines_operator_runs_in_the_pod_olm_made(d).await
}

/// Each bundle was unpacked by a Job (OLM's utilities and opm, the bundle image pulled
/// through the cluster's ghcr.io mirror), whose pod ran on the real node and completed.
async fn each_bundle_was_unpacked_by_a_job_on_the_real_node(d: &Drill) {
    let mut unpacked = Vec::new();
    for line in ["v0", "v1"] {
        let jobs = Api::<Job>::namespaced(d.client(), &line_namespace(line))
            .list(&ListParams::default().labels("operatorframework.io/bundle-unpack-ref"))
            .await
            .expect("the unpack Jobs");
        assert!(!jobs.items.is_empty(), "no bundle unpack Job in {}", line_namespace(line));
        for job in &jobs.items {
            let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
            assert!(succeeded > 0, "the unpack Job {} did not complete: {:?}", job.name_any(), job.status);
            let pods = Api::<Pod>::namespaced(d.client(), &line_namespace(line))
                .list(&ListParams::default().labels(&format!("job-name={}", job.name_any())))
                .await
                .expect("the unpack Job's pods");
            assert!(!pods.items.is_empty(), "the unpack Job {} has no pod left", job.name_any());
            for pod in &pods.items {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
                assert_eq!(node, Some(local_cluster::REAL_NODE_NAME), "the unpack pod {}'s node", pod.name_any());
            }
            let image = job
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|s| s.init_containers.as_ref())
                .and_then(|c| c.iter().find(|c| c.name == "pull"))
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            unpacked.push(image);
        }
    }
    d.step(&format!("bundles unpacked by Jobs: {}", unpacked.join(", ")));
}

// --- 4. the upgrade ------------------------------------------------------------------------

/// The v0 line's Subscription moves to 0.1.1 (`replaces` 0.1.0 in stable-v0): 0.1.1's CSV
/// Succeeds, 0.1.0's is gone; the v1 line's CSV is the same object, still Succeeded.
async fn olm_replaces_0_1_0_with_0_1_1_and_leaves_the_v1_line(d: &Drill, v1_csv: &DynamicObject) {
    wait_succeeded(d, "v0", "0.1.1").await;
    let csvs = olm_api(d, &line_namespace("v0"), "ClusterServiceVersion", "clusterserviceversions");
    d.wait_until(120, "0.1.0's CSV is gone", || async {
        match csvs.get_opt("model-orchestra-operator.v0.1.0").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(old) => Err(format!("it is {}", old.data["status"]["phase"])),
        }
    })
    .await;
    let v1 = csv(d, "v1", "model-orchestra-operator.v1.0.0").await;
    assert_eq!((v1.uid(), &v1.data["status"]["phase"]), (v1_csv.uid(), &Value::from("Succeeded")), "the v1 line's CSV");
    d.step("OLM replaced the v0 line's 0.1.0 with 0.1.1; the v1 line's CSV untouched");
}

// --- 5. what OLM v0 refuses ----------------------------------------------------------------

/// What must survive whatever OLM v0 refuses: the CRD's versions, schemas and stored
/// versions, the CRs (each Ready), their children (UIDs), and both lines' CSVs.
struct Kept {
    crd: (Value, Value),
    children: BTreeMap<String, Children>,
}

impl Kept {
    async fn of(d: &Drill) -> Kept {
        let crd = d.cluster_scoped("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions");
        let crd = crd.get(CRD).await.expect("the CRD");
        let mut children = BTreeMap::new();
        for namespace in ["drill-a", "drill-b", "drill-c"] {
            children.insert(namespace.to_string(), Children::of(d, namespace).await);
        }
        Kept { crd: (crd.data["spec"]["versions"].clone(), crd.data["status"]["storedVersions"].clone()), children }
    }
}

/// Three releases that break OLM v0's rules, each generated as a maintainer would, beside a
/// copy of the released bundles: 2.0.0's CRD drops v1alpha2, the storage version, which
/// every CR is stored in; 3.0.0's makes `spec.drillRequired` required in v1alpha1, which no
/// existing CR has; 4.0.0 and 5.0.0 are two lines that both own ModelOrchestra v1alpha2. `bundle validate` refuses each
/// (`bundle generate` already refuses 5.0.0) and `catalog validate` the catalog listing them,
/// naming the rule; the maintainer pushes them anyway, with the library (as docker and opm
/// would, which do not check), with their operator images (this tree's), and the catalog as
/// `…-catalog:refused`. Returns each
/// refusal: (who, finding).
fn the_maintainer_is_refused_three_breaking_releases(m: &Maintainer) -> Vec<(&'static str, String)> {
    let mut refused = Vec::new();
    let mut pushed = Vec::new();
    let generate = |bundles: &std::path::Path, version: &str, crd_version: &str| {
        let channel = format!("stable-v{}", &version[..1]);
        #[rustfmt::skip]
        let args = ["bundle", "generate", "--version", version, "--crd-version", crd_version, "--image", &m.base,
            "--crd-mode", "owned", "--channels", &channel, "--default-channel", &channel, "--output", arg(bundles)];
        m.bundle_tool(&format!("refused-{version}"), &args)
    };
    let edit_crd = |dir: &std::path::Path, edit: &dyn Fn(&mut Vec<Value>)| {
        let path = dir.join("manifests/models.titanml.co_modelorchestras.yaml");
        let mut crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).expect("the CRD")).expect("YAML");
        edit(crd["spec"]["versions"].as_array_mut().expect("the CRD's versions"));
        std::fs::write(&path, serde_yaml::to_string(&crd).expect("YAML")).expect("write the CRD");
    };
    // `bundle validate DIR`, refused with `words` in the finding.
    let refusal = |dir: &std::path::Path, version: &str, words: &str| -> String {
        let log = format!("refused-{version}");
        let validate = m.bundle_tool(&log, &["bundle", "validate", arg(dir)]);
        assert!(validate.is_err(), "bundle validate accepted {version}");
        let said = m.log(&log);
        let finding = said.lines().rev().find(|l| l.contains(words));
        finding.unwrap_or_else(|| panic!("{version} refused for another reason:\n{said}")).to_string()
    };

    let lost = m.scratch_bundles("refused-2");
    generate(&lost, "2.0.0", "v1alpha1").unwrap_or_else(|e| panic!("bundle generate 2.0.0: {e}"));
    edit_crd(&lost.join("2.0.0"), &|versions| {
        versions.retain(|v| v["name"] != "v1alpha2");
        versions[0]["storage"] = true.into();
    });
    refused.push(("bundle validate", refusal(&lost.join("2.0.0"), "2.0.0", "listed as a stored version")));
    pushed.push(("2.0.0", lost.join("2.0.0")));

    let narrowed = m.scratch_bundles("refused-3");
    generate(&narrowed, "3.0.0", "v1alpha1").unwrap_or_else(|e| panic!("bundle generate 3.0.0: {e}"));
    edit_crd(&narrowed.join("3.0.0"), &|versions| {
        let v1alpha1 = versions.iter_mut().find(|v| v["name"] == "v1alpha1").expect("v1alpha1");
        let spec = &mut v1alpha1["schema"]["openAPIV3Schema"]["properties"]["spec"];
        spec["properties"]["drillRequired"] = serde_json::json!({"type": "string"});
        spec["required"] = serde_json::json!(["drillRequired"]);
    });
    refused
        .push(("bundle validate", refusal(&narrowed.join("3.0.0"), "3.0.0", "updated validation is too restrictive")));
    pushed.push(("3.0.0", narrowed.join("3.0.0")));

    let owners = m.scratch_bundles("refused-4-5");
    generate(&owners, "4.0.0", "v1alpha2").unwrap_or_else(|e| panic!("bundle generate 4.0.0: {e}"));
    assert!(generate(&owners, "5.0.0", "v1alpha2").is_err(), "bundle generate accepted 5.0.0 beside 4.0.0");
    refused.push(("bundle validate", refusal(&owners.join("5.0.0"), "5.0.0", "InterOperatorGroupOwnerConflict")));
    pushed.push(("4.0.0", owners.join("4.0.0")));
    pushed.push(("5.0.0", owners.join("5.0.0")));

    // Pushed anyway.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let options = bundle_tool::image::push::PushOptions {
        access: bundle_tool::image::registry::Access { insecure: true, ..Default::default() },
        force: true,
        quiet: true,
    };
    let push = |image: &bundle_tool::image::Image, reference: &str| {
        runtime
            .block_on(bundle_tool::image::push::push(image, reference, &options))
            .unwrap_or_else(|e| panic!("push {reference}: {e}"));
    };
    for (version, dir) in &pushed {
        push(
            &bundle_tool::image::bundle_image(dir).expect("the bundle image"),
            &format!("{}-bundle:v{version}", m.base),
        );
        m.push_operator_image(version, &format!("{}:v{version}", m.base));
    }
    let dir = m.render_catalog("refused", &["0.1.0", "0.1.1", "1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"]);
    assert!(
        m.bundle_tool("validate-refused", &["catalog", "validate", arg(&dir)]).is_err(),
        "catalog validate accepted it"
    );
    let said = m.log("validate-refused");
    for rule in ["crd-keeps-versions", "crd-replaces-safely", "one-owner-per-api"] {
        let finding = said.lines().find(|l| l.contains(rule)).unwrap_or_else(|| panic!("no {rule} finding:\n{said}"));
        refused.push((rule, finding.to_string()));
    }
    push(
        &bundle_tool::catalog::image::catalog_image(&dir, None).expect("the catalog image"),
        &m.catalog_image("refused"),
    );
    refused
}

/// The status of the InstallPlan of `line`'s namespace once it Failed: its message.
async fn failed_install_plan(d: &Drill, line: &str) -> String {
    let plans = olm_api(d, &line_namespace(line), "InstallPlan", "installplans");
    d.wait_until(240, &format!("the {line} line's InstallPlan Failed"), || async {
        let list = plans.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let plan = list.items.first().ok_or("no InstallPlan yet")?;
        match plan.data["status"]["phase"].as_str() {
            Some("Failed") => Ok(plan.data["status"]["message"].as_str().unwrap_or_default().to_string()),
            phase => Err(format!("{phase:?}: {}", plan.data["status"]["message"])),
        }
    })
    .await
}

/// The refused releases, each subscribed to as a line of its own, at once: 2.0.0 (its CRD
/// without v1alpha2, the version every CR is stored in) and 3.0.0 (its v1alpha1 schema
/// requires a field no CR has) — OLM v0 fails each InstallPlan at its CRD step, in its
/// words, after its one-minute retry window, and leaves the cluster's CRD as it was; and
/// 4.0.0 then 5.0.0, two lines owning ModelOrchestra v1alpha2, installed AllNamespaces — the
/// first Succeeds, OLM v0 fails the second (InterOperatorGroupOwnerConflict) and deletes its
/// Deployment. Then the admin deletes the refused lines' namespaces.
async fn olm_v0_refuses_them_in_its_own_words(d: &Drill) {
    for line in ["v2", "v3", "v4"] {
        d.cluster().run_pods_for_real(&line_namespace(line)).await.expect("pin the namespace");
        the_admin_subscribes(d, "refused", &format!("stable-{line}"), None);
    }
    wait_succeeded(d, "v4", "4.0.0").await;
    d.cluster().run_pods_for_real(&line_namespace("v5")).await.expect("pin the namespace");
    the_admin_subscribes(d, "refused", "stable-v5", None);
    let csvs = olm_api(d, &line_namespace("v5"), "ClusterServiceVersion", "clusterserviceversions");
    let failed = d
        .wait_until(240, "5.0.0's CSV fails", || async {
            let csv = csvs.get("model-orchestra-operator.v5.0.0").await.map_err(|e| e.to_string())?;
            let status = &csv.data["status"];
            match (status["phase"].as_str(), status["reason"].as_str()) {
                (Some("Failed"), Some(reason)) => {
                    Ok(format!("{reason}: {}", status["message"].as_str().unwrap_or_default()))
                }
                (phase, reason) => Err(format!("{phase:?} {reason:?}")),
            }
        })
        .await;
    assert_eq!(failed, "InterOperatorGroupOwnerConflict: intersecting operatorgroups provide the same apis");
    d.step(&format!("OLM v0 failed 5.0.0's CSV (4.0.0 Succeeded): {failed}"));

    let lost = failed_install_plan(d, "v2").await;
    assert!(
        lost.contains(&format!("risk of data loss updating \"{CRD}\": new CRD removes version v1alpha2 that is listed as a stored version on the existing CRD")),
        "OLM v0's refusal of 2.0.0: {lost}"
    );
    d.step(&format!("OLM v0 failed 2.0.0's InstallPlan: {lost}"));
    let refused = failed_install_plan(d, "v3").await;
    assert!(
        refused.contains(&format!("error validating existing CRs against new CRD's schema for \"{CRD}\""))
            && refused.contains("updated validation is too restrictive"),
        "OLM v0's refusal of 3.0.0: {refused}"
    );
    d.step(&format!("OLM v0 failed 3.0.0's InstallPlan: {}…", refused.chars().take(300).collect::<String>()));
    #[rustfmt::skip]
    d.kubectl(&["delete", "namespace", "model-orchestra-v2", "model-orchestra-v3", "model-orchestra-v4", "model-orchestra-v5",
        "--wait=true", "--timeout=180s"], None);
}

/// After the refusals: the CRD's versions (with their schemas) and stored versions are as
/// they were, every CR is Ready with the same children, both lines' CSVs Succeeded.
async fn nothing_of_the_installed_lines_is_lost(d: &Drill, kept: &Kept) {
    let now = Kept::of(d).await;
    assert!(now.crd.0 == kept.crd.0, "the CRD's versions changed");
    assert_eq!(now.crd.1, kept.crd.1, "the CRD's stored versions");
    assert_eq!(now.children, kept.children, "the CRs' children (Kind/name → UID)");
    for (namespace, name) in
        [("drill-a", "unlabelled-v1alpha2"), ("drill-b", "unlabelled-v1alpha1"), ("drill-c", "labelled-v0")]
    {
        wait_ready(d, 60, &format!("{namespace}/{name} is Ready after the refusals"), namespace, name).await;
    }
    wait_succeeded(d, "v0", "0.1.1").await;
    wait_succeeded(d, "v1", "1.0.0").await;
    d.step(
        "nothing lost: the CRD's versions and stored versions, every CR Ready with its children, both lines Succeeded",
    );
}

// --- 6. uninstalling a line ----------------------------------------------------------------

/// `kubectl -n model-orchestra-v1 delete subscription model-orchestra-operator-v1`, then
/// `kubectl -n model-orchestra-v1 delete csv model-orchestra-operator.v1.0.0`.
fn the_admin_uninstalls_the_v1_line(d: &Drill) {
    d.kubectl(&["-n", "model-orchestra-v1", "delete", "subscription", "model-orchestra-operator-v1"], None);
    d.kubectl(&["-n", "model-orchestra-v1", "delete", "csv", "model-orchestra-operator.v1.0.0", "--wait=true"], None);
}

/// The v1 line's Deployment goes with its CSV; the v0 line applies an edit; every CR and
/// every child of both lines is still there (OLM never deletes the CRD or the CRs).
async fn the_v0_line_serves_on_and_every_cr_and_child_is_in_place(d: &Drill, kept: &Kept) {
    let deployments = Api::<Deployment>::namespaced(d.client(), "model-orchestra-v1");
    d.wait_until(120, "the v1 line's Deployment is gone", || async {
        match deployments.get_opt("model-orchestra-operator-v1").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
    #[rustfmt::skip]
    d.kubectl(&["patch", "-n", "drill-b", "modelorchestra/unlabelled-v1alpha1", "--type", "merge", "-p",
        r#"{"spec":{"applications":{"hello-world":{"podLabels":{"drill":"after-uninstall"}}}}}"#], None);
    let deployments = Api::<Deployment>::namespaced(d.client(), "drill-b");
    d.wait_until(120, "the v0 line applies an edit after the v1 line's uninstall", || async {
        let list = deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let labelled = list.items.iter().any(|o| {
            o.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
                .is_some_and(|l| l.get("drill").map(String::as_str) == Some("after-uninstall"))
        });
        if labelled {
            Ok(())
        } else {
            Err("not applied yet".into())
        }
    })
    .await;
    for namespace in ["drill-a", "drill-c"] {
        assert_eq!(
            &Children::of(d, namespace).await,
            &kept.children[namespace],
            "{namespace}'s children after the uninstall"
        );
    }
    let crs = modelorchestras(d, "drill-a").get("unlabelled-v1alpha2").await.expect("the v1 line's CR is still there");
    d.step(&format!(
        "uninstalled the v1 line: its Deployment gone, the v0 line serves on, every CR and child in place (the v1 line's CR: {})",
        describe_condition(&crs, "Ready")
    ));
}
