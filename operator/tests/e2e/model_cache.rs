//! Model caches on the real control plane: the real PersistentVolume, Job and Deployment
//! controllers, the cluster's default StorageClass and its provisioner, kwok in the
//! kubelet's place (it runs a download pod to success, or to the failure a missing model
//! gives, see `cluster/config/kwok-stages.yaml`).

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use model_orchestra_api::kinds::Kind;
use serde_json::{json, Value};

const RELEASE: &str = "cached";
const DEPLOYMENT: &str = "cached-model-orchestra-chat";
const CLAIM: &str = "cached-model-orchestra-chat-models";
/// The model the local cluster's kwok fails to download, as Hugging Face would.
const MISSING_MODEL: &str = "missing/model";

fn cached_cr(namespace: &str, model: &str) -> Value {
    json!({
        "apiVersion": "models.titanml.co/v1alpha2",
        "kind": "ModelOrchestra",
        "metadata": {"name": RELEASE, "namespace": namespace},
        "spec": {
            "applicationTemplate": {"modelCache": {"enabled": true, "size": "1Gi", "downloader": {"backoffLimit": 0}}},
            "applications": {"chat": {"readerConfig": {"modelName": model, "device": "cpu"}}}
        }
    })
}

/// A cluster with a v1alpha2 line. The CR's claim names no StorageClass, as the chart's
/// default: the cluster's default class provisions its volume (on the local cluster, its
/// host-path provisioner) and the real PersistentVolume controller binds the two.
async fn setup(test: &str) -> (Cluster, Operator) {
    let cluster = Cluster::start(test).await;
    let options = OperatorOptions {
        api_version: "v1alpha2",
        routing: "v1",
        claim_unlabeled: true,
        identity: "op-cache",
        ..Default::default()
    };
    let operator = Operator::start(&cluster, options).await;
    (cluster, operator)
}

fn v1alpha2_api(cluster: &Cluster) -> Api<DynamicObject> {
    Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &model_orchestra_api::ApiVersion::V1alpha2.resource(),
    )
}

async fn apply(cluster: &Cluster, model: &str) {
    cluster
        .apply_value(&cached_cr(&cluster.namespace, model), "modelorchestras", "models.titanml.co", "v1alpha2")
        .await;
}

/// Waits until the chat application's model has `phase`; returns the CR (read at v1alpha2).
/// On a timeout, says what the status, the Jobs and the download pods were.
async fn wait_model(cluster: &Cluster, phase: &str) -> DynamicObject {
    let api = v1alpha2_api(cluster);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let cr = api.get(RELEASE).await.ok();
        if let Some(cr) = &cr {
            let current = cr.data["status"]["observedGeneration"].as_i64() == cr.metadata.generation;
            if current && cr.data["status"]["applications"]["chat"]["model"]["phase"] == phase {
                return cr.clone();
            }
        }
        if std::time::Instant::now() > deadline {
            let status = cr.map(|c| c.data["status"].clone()).unwrap_or_default();
            let jobs: Vec<Value> = cluster
                .api(Kind::Job)
                .list(&ListParams::default())
                .await
                .map(|l| l.items.into_iter().map(|j| j.data["status"].clone()).collect())
                .unwrap_or_default();
            let pods: Vec<Value> = cluster
                .component_pods(RELEASE, "model-chat")
                .await
                .into_iter()
                .map(|p| serde_json::to_value(p.status).unwrap())
                .collect();
            panic!("the chat model is not {phase} after 90 s\nstatus: {status:#}\njobs: {jobs:#?}\npods: {pods:#?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

async fn deployment(cluster: &Cluster) -> Value {
    serde_json::to_value(cluster.api(Kind::Deployment).get(DEPLOYMENT).await.expect("the chat Deployment")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_application_serves_only_after_its_model_is_downloaded_into_its_claim() {
    let (cluster, _operator) = setup("cache-ready").await;
    apply(&cluster, "org/model").await;
    // While the download runs (kwok gives it two seconds), the application has no pod.
    let api = v1alpha2_api(&cluster);
    let downloading = eventually("the download is under way", || async {
        let cr = api.get(RELEASE).await.ok()?;
        let phase = cr.data["status"]["applications"]["chat"]["model"]["phase"].as_str()?.to_string();
        matches!(phase.as_str(), "Pending" | "Downloading").then_some(phase)
    })
    .await;
    assert_eq!(deployment(&cluster).await["spec"]["replicas"], 0, "held while the model is {downloading}");
    assert!(cluster.component_pods(RELEASE, "application-chat").await.is_empty());
    let cr = wait_model(&cluster, "Ready").await;
    cluster.wait_converged(RELEASE).await;

    let job_name = cr.data["status"]["applications"]["chat"]["model"]["job"].as_str().unwrap().to_string();
    let job: Job =
        Api::namespaced(cluster.client.clone(), &cluster.namespace).get(&job_name).await.expect("the download Job");
    let completed = job.status.and_then(|s| s.completion_time).expect("the Job completed");
    let d = deployment(&cluster).await;
    assert_eq!(d["spec"]["replicas"], 1);
    let volumes = d["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["persistentVolumeClaim"]["claimName"] == CLAIM), "{volumes:?}");
    let claim = cluster.api(Kind::PersistentVolumeClaim).get(CLAIM).await.unwrap();
    assert_eq!(claim.data["status"]["phase"], "Bound");
    // No reader pod existed before the download was done.
    for pod in cluster.component_pods(RELEASE, "application-chat").await {
        let created = pod.metadata.creation_timestamp.clone().unwrap();
        assert!(
            created.0 >= completed.0,
            "pod {} created at {:?}, before the download completed at {:?}",
            pod.name_any(),
            created,
            completed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_download_is_reported_with_the_pods_message_and_fixing_the_model_recovers() {
    let (cluster, _operator) = setup("cache-failed").await;
    apply(&cluster, MISSING_MODEL).await;
    let cr = wait_model(&cluster, "Failed").await;
    let message = cr.data["status"]["applications"]["chat"]["model"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("BackoffLimitExceeded") && message.contains("Repository Not Found"), "{message}");
    let ready = ready_condition(&cr).unwrap();
    assert_eq!(ready["reason"], "ModelDownloadFailed");
    assert!(ready["message"].as_str().unwrap().contains("Repository Not Found"), "{ready}");
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    eventually("a ModelDownloadFailed event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ModelDownloadFailed") && e.type_.as_deref() == Some("Warning"))
            .then_some(())
    })
    .await;
    // Nothing is torn down: the gateway serves, the application waits at zero replicas.
    assert_eq!(deployment(&cluster).await["spec"]["replicas"], 0);
    let gateway = cluster.api(Kind::Deployment).get("cached-model-orchestra-gateway").await.unwrap();
    assert_eq!(gateway.data["status"]["readyReplicas"], 1);

    apply(&cluster, "org/model").await;
    wait_model(&cluster, "Ready").await;
    cluster.wait_converged(RELEASE).await;
    assert_eq!(deployment(&cluster).await["spec"]["replicas"], 1);
    let jobs = cluster.api(Kind::Job).list(&ListParams::default()).await.unwrap();
    assert_eq!(jobs.items.len(), 1, "the failed download's Job is pruned once the next one exists");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_downloads_again_rolls_the_pods_once_and_is_stamped_on_the_cr() {
    let (cluster, _operator) = setup("cache-refresh").await;
    apply(&cluster, "org/model").await;
    let before = wait_model(&cluster, "Ready").await;
    cluster.wait_converged(RELEASE).await;
    let first_job = before.data["status"]["applications"]["chat"]["model"]["job"].as_str().unwrap().to_string();
    let revision = |d: &Value| {
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"].as_str().unwrap_or_default().to_string()
    };
    let first_revision = revision(&deployment(&cluster).await);

    let pod_revision =
        |d: &Value| d["spec"]["template"]["metadata"]["annotations"]["models.titanml.co/model-revision"].clone();
    let first_pods = pod_revision(&deployment(&cluster).await);

    cluster.kubectl(&[
        "annotate",
        "modelorchestras.v1alpha2.models.titanml.co",
        RELEASE,
        "models.titanml.co/refresh=r1",
    ]);
    let api = v1alpha2_api(&cluster);
    // While the same model downloads again, the application keeps serving the first download.
    eventually("the refresh's download is under way", || async {
        let cr = api.get(RELEASE).await.ok()?;
        let model = &cr.data["status"]["applications"]["chat"]["model"];
        (model["refresh"] == "r1" && model["phase"] != "Ready").then_some(())
    })
    .await;
    let during = deployment(&cluster).await;
    assert_eq!(during["spec"]["replicas"], 1, "not taken down for a refresh");
    assert_eq!(pod_revision(&during), first_pods, "its pods stay on the first download until the new one is ready");
    let after = eventually("the refresh is stamped", || async {
        let cr = api.get(RELEASE).await.ok()?;
        (cr.data["status"]["modelRefresh"]["value"] == "r1").then_some(cr)
    })
    .await;
    cluster.wait_converged(RELEASE).await;
    let model = &after.data["status"]["applications"]["chat"]["model"];
    assert_ne!(model["job"], first_job.as_str(), "a new Job");
    assert_eq!(model["refresh"], "r1");
    let d = deployment(&cluster).await;
    assert_eq!(
        revision(&d).parse::<u32>().unwrap(),
        first_revision.parse::<u32>().unwrap() + 1,
        "the pods rolled once"
    );

    // Annotating again with the same value (and reconciling for another reason) does nothing.
    let stamped = after.data["status"]["modelRefresh"].clone();
    cluster.kubectl(&[
        "annotate",
        "--overwrite",
        "modelorchestras.v1alpha2.models.titanml.co",
        RELEASE,
        "models.titanml.co/refresh=r1",
        "touched=yes",
    ]);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let again = api.get(RELEASE).await.unwrap();
    assert_eq!(again.data["status"]["modelRefresh"], stamped);
    assert_eq!(again.data["status"]["applications"]["chat"]["model"]["job"], model["job"]);
    assert_eq!(revision(&deployment(&cluster).await), revision(&d));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_sample_as_written_becomes_ready_on_the_clusters_default_storage() {
    let (cluster, _operator) = setup("cache-sample").await;
    if !cluster.has_fake_nodes("the_cache_sample_as_written_becomes_ready_on_the_clusters_default_storage") {
        return;
    }
    let sample = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/samples/modelorchestra-v1alpha2-cache.yaml"
    ))
    .unwrap();
    // As the book does: kubectl apply of the file, no PersistentVolume made by hand.
    cluster.kubectl_with_input(&["apply", "-f", "-"], &sample);
    let ready = eventually_within(std::time::Duration::from_secs(120), "the cache sample is Ready", || async {
        let cr = v1alpha2_api(&cluster).get("cached-models").await.ok()?;
        (ready_condition(&cr)?["status"] == "True").then_some(cr)
    })
    .await;
    for app in ["chat", "embedder"] {
        assert_eq!(ready.data["status"]["applications"][app]["model"]["phase"], "Ready", "{app}");
    }
    let claims = cluster.kubectl(&["get", "pvc", "-o", "jsonpath={.items[*].status.phase}"]);
    assert_eq!(claims.split_whitespace().collect::<Vec<_>>(), ["Bound", "Bound"], "{claims}");
}
