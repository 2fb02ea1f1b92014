//! The real API server as the oracle of what the operator renders: every object of the
//! sample and the maximal CR, and of the operator's own deploy manifests, passes a
//! server-side dry run; and for generated CRs (≥ 500 per run, of both API versions:
//! arbitrary applications, env, ports, services, resources, probes, volumes, ingress,
//! scaling, node selectors and tolerations, distributed-llama groups, mostly valid, some
//! not), each is either rejected by the operator's own
//! validation with a field path, or every object it renders is accepted by the API server.
//! `PROPTEST_CASES` sets the number of cases; failures persist their seeds in
//! `proptest-regressions/server_validation.txt`, replayed first on every run.

#[allow(unused_imports)]
use crate::support::Cluster;
use futures::{StreamExt, TryStreamExt};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use model_orchestra::chart::RenderedObject;
use model_orchestra::error::RenderError;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

/// Server-side dry runs of every object (as the operator applies them: forced, in the
/// test's namespace); the first refusal, with the object and the server's message.
async fn dry_run(cluster: &Cluster, objects: &[RenderedObject]) -> Result<(), String> {
    futures::stream::iter(objects)
        .map(|o| async move {
            let api: Api<DynamicObject> =
                Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &o.kind.resource());
            let params = PatchParams { dry_run: true, ..PatchParams::apply("server-validation").force() };
            api.patch(&o.name, &params, &Patch::Apply(&o.object))
                .await
                .map(drop)
                .map_err(|e| format!("{} {}: {e}", o.kind.kind(), o.name))
        })
        .buffer_unordered(8)
        .try_collect()
        .await
}

fn render_in(cluster: &Cluster, yaml: &str) -> Result<Vec<RenderedObject>, RenderError> {
    let mut doc = model_orchestra_api::parse::document_from_yaml(yaml)?;
    doc.metadata.namespace = Some(cluster.namespace.clone());
    model_orchestra::render_document(&doc, None, &cluster.namespace).map(|r| r.objects)
}

fn repo(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_samples_objects_pass_the_api_servers_dry_run() {
    let cluster = Cluster::start("dry-run-sample").await;
    let objects = render_in(&cluster, &repo("config/samples/modelorchestra.yaml")).unwrap();
    dry_run(&cluster, &objects).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1alpha2_samples_objects_pass_the_api_servers_dry_run() {
    let cluster = Cluster::start("dry-run-v1alpha2").await;
    for sample in [
        "config/samples/modelorchestra-v1alpha2.yaml",
        "config/samples/modelorchestra-v1alpha2-cache.yaml",
        "config/samples/modelorchestra-v1alpha2-promotion.yaml",
        "config/samples/modelorchestra-v1alpha2-distributed-llama.yaml",
    ] {
        let text = repo(sample);
        assert!(text.contains("models.titanml.co/v1alpha2"), "{sample} is a v1alpha2 CR");
        let objects = render_in(&cluster, &text).unwrap();
        dry_run(&cluster, &objects).await.unwrap_or_else(|e| panic!("{sample}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximal_crs_objects_pass_the_api_servers_dry_run() {
    let cluster = Cluster::start("dry-run-maximal").await;
    let objects = render_in(&cluster, &repo("operator/tests/data/maximal.yaml")).unwrap();
    assert!(objects.iter().any(|o| o.kind.is_optional()), "the maximal CR renders the KEDA and Prometheus kinds too");
    dry_run(&cluster, &objects).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_deploy_manifests_pass_the_api_servers_dry_run() {
    let cluster = Cluster::start("dry-run-deploy").await;
    let discovery = kube::discovery::Discovery::new(cluster.client.clone()).run().await.unwrap();
    for mut object in model_orchestra_api::deploy::operator::all(&crate::support::deploy_options("v7")) {
        let gvk = kube::api::GroupVersionKind::try_from(&kube::api::TypeMeta {
            api_version: object["apiVersion"].as_str().unwrap().into(),
            kind: object["kind"].as_str().unwrap().into(),
        })
        .unwrap();
        let (ar, caps) = discovery.resolve_gvk(&gvk).unwrap();
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let api: Api<DynamicObject> = match caps.scope {
            // Namespaced objects go to the test's namespace (the deploy namespace need not exist).
            kube::discovery::Scope::Namespaced => {
                object["metadata"]["namespace"] = json!(cluster.namespace);
                Api::namespaced_with(cluster.client.clone(), &cluster.namespace, &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(cluster.client.clone(), &ar),
        };
        let params = PatchParams { dry_run: true, ..PatchParams::apply("server-validation").force() };
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{} {name}: {e}", object["kind"]));
    }
}

/// CRs the property test found refused by the API server though the operator's validation
/// passed them, kept as fixed cases (the seeds in `server_validation.proptest-regressions`
/// replay them only while the generator is unchanged).
#[test]
fn crs_the_property_test_found_are_rejected_with_their_field() {
    let rejected = |spec: Value| -> String {
        let cr = json!({"apiVersion": "models.titanml.co/v1alpha1", "kind": "ModelOrchestra", "metadata": {"name": "found"}, "spec": spec});
        match model_orchestra::render_value(&cr, "default") {
            Err(RenderError::Input(e)) => e.errors()[0].field.clone(),
            other => panic!("expected an input error, got {other:?}"),
        }
    };
    // KEDA's CRD: maxReplicaCount ≥ 1 (the ModelOrchestra schema allows 0).
    assert_eq!(
        rejected(json!({"applications": {"a0": {"scaling": {"enabled": true, "spec": {"maxReplicaCount": 0}}}}})),
        "spec.applications.a0.scaling.spec.maxReplicaCount"
    );
    // Server-side apply merges container ports by (containerPort, protocol): duplicates are refused.
    assert_eq!(
        rejected(json!({"applications": {"a0": {"ports": [{"containerPort": 3001}, {"containerPort": 3001}]}}})),
        "spec.applications.a0.ports[1].containerPort"
    );
}

// ---------------------------------------------------------------------------------------
// Generated CRs. Every value drawn is valid on its own; combinations need not be (a mount
// of a volume that is not there, a NodePort on a ClusterIP Service, a request above its
// limit, two probe handlers after the merge). About a third of the CRs also get one value
// users get wrong (a fault) in the gateway, the template or an application.

fn pick<T: Clone + std::fmt::Debug + 'static>(values: &[T]) -> impl Strategy<Value = T> {
    prop::sample::select(values.to_vec())
}

fn maybe(s: impl Strategy<Value = Value>, chance_some: f64) -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(chance_some, s)
}

fn obj(pairs: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(pairs.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))).collect())
}

fn env_var() -> impl Strategy<Value = Value> {
    let value_from = prop_oneof![
        pick(&["metadata.name", "metadata.namespace", "status.podIP", "spec.nodeName", "metadata.labels['app']"])
            .prop_map(|p| json!({"fieldRef": {"fieldPath": p}})),
        (pick(&["token", "hf-token"]), pick(&["key", "HF_TOKEN"]))
            .prop_map(|(n, k)| json!({"secretKeyRef": {"name": n, "key": k}})),
        (pick(&["settings", "cfg"]), pick(&["a", "b.c"]))
            .prop_map(|(n, k)| json!({"configMapKeyRef": {"name": n, "key": k}})),
        pick(&["limits.cpu", "requests.memory"]).prop_map(|r| json!({"resourceFieldRef": {"resource": r}})),
    ];
    let name = prop_oneof![8 => "[A-Z][A-Z0-9_]{0,12}", 1 => pick(&["dotted.name-ok", "1STARTS_WITH_DIGIT", "lower_case"]).prop_map(String::from)];
    let source = prop_oneof![8 => "[a-z0-9 :/._-]{0,20}".prop_map(|v| ("value", json!(v))), 2 => value_from.prop_map(|f| ("valueFrom", f))];
    (name, source).prop_map(|(name, (key, value))| obj(vec![("name", Some(json!(name))), (key, Some(value))]))
}

fn container_ports() -> impl Strategy<Value = Value> {
    let ports = prop::sample::subsequence(
        vec![(80, "http"), (3000, "inference"), (3001, "metrics"), (8080, "grpc"), (65535, "openai")],
        0..4,
    );
    (
        ports,
        prop::collection::vec(
            (prop::bool::weighted(0.8), prop::option::weighted(0.3, pick(&["TCP", "UDP", "SCTP"]))),
            4,
        ),
    )
        .prop_map(|(ports, extras)| {
            Value::from(
                ports
                    .into_iter()
                    .zip(extras)
                    .map(|((p, n), (named, proto))| {
                        obj(vec![
                            ("containerPort", Some(json!(p))),
                            ("name", named.then(|| json!(n))),
                            ("protocol", proto.map(Value::from)),
                        ])
                    })
                    .collect::<Vec<_>>(),
            )
        })
}

fn service() -> impl Strategy<Value = Value> {
    let port = |(port, name): (i32, &'static str)| {
        (
            Just((port, name)),
            prop::bool::weighted(0.95),
            prop::option::weighted(
                0.5,
                prop_oneof![
                    pick(&[3000, 8080]).prop_map(Value::from),
                    pick(&["inference", "metrics"]).prop_map(Value::from)
                ],
            ),
            prop::option::weighted(0.05, pick(&[30080, 32767])),
            prop::option::weighted(0.2, pick(&["TCP", "UDP"])),
        )
            .prop_map(|((port, name), named, target, node, proto)| {
                obj(vec![
                    ("port", Some(json!(port))),
                    ("name", named.then(|| json!(name))),
                    ("targetPort", target),
                    ("nodePort", node.map(Value::from)),
                    ("protocol", proto.map(Value::from)),
                ])
            })
    };
    let ports = prop::sample::subsequence(vec![(80, "http"), (443, "https"), (3000, "metrics"), (8080, "a-b")], 1..3)
        .prop_flat_map(move |chosen| chosen.into_iter().map(port).collect::<Vec<_>>());
    (prop::option::weighted(0.5, pick(&["ClusterIP", "NodePort", "LoadBalancer"])), prop::option::weighted(0.7, ports))
        .prop_map(|(t, ports)| obj(vec![("type", t.map(Value::from)), ("ports", ports.map(Value::from))]))
}

fn quantities() -> impl Strategy<Value = std::collections::BTreeMap<&'static str, &'static str>> {
    let entry = prop_oneof![
        pick(&["100m", "1", "2", "500m", "1.5", "2e3"]).prop_map(|q| ("cpu", q)),
        pick(&["1Gi", "512Mi", "2e9", "0"]).prop_map(|q| ("memory", q)),
        pick(&["1", "2", "4"]).prop_map(|q| ("nvidia.com/gpu", q)),
        pick(&["10Gi"]).prop_map(|q| ("ephemeral-storage", q)),
    ];
    prop::collection::vec(entry, 0..3).prop_map(|v| v.into_iter().collect())
}

fn resources() -> impl Strategy<Value = Value> {
    let requests = quantities().prop_map(|mut q| {
        // A GPU request alone is a fault of its own (see FAULTS); here, rarely.
        q.remove("nvidia.com/gpu");
        q
    });
    (prop::option::weighted(0.6, quantities()), prop::option::weighted(0.6, requests)).prop_map(|(limits, requests)| {
        obj(vec![("limits", limits.map(|l| json!(l))), ("requests", requests.map(|r| json!(r)))])
    })
}

fn probe() -> impl Strategy<Value = Value> {
    let handler = prop_oneof![
        (
            pick(&["/healthz", "/ready"]),
            prop_oneof![
                pick(&[3000, 3001]).prop_map(Value::from),
                pick(&["management", "inference"]).prop_map(Value::from)
            ]
        )
            .prop_map(|(path, port)| json!({"httpGet": {"path": path, "port": port}})),
        pick(&[3000, 3001]).prop_map(|p| json!({"tcpSocket": {"port": p}})),
        Just(json!({"exec": {"command": ["cat", "/tmp/ready"]}})),
    ];
    (
        handler,
        prop::option::of(pick(&[0, 5])),
        prop::option::weighted(0.1, pick(&[1, 2])),
        prop::option::weighted(0.05, pick(&[30])),
    )
        .prop_map(|(mut p, delay, success, grace)| {
            let fields = p.as_object_mut().unwrap();
            fields.extend(
                [
                    ("initialDelaySeconds", delay),
                    ("successThreshold", success),
                    ("terminationGracePeriodSeconds", grace),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), json!(v?)))),
            );
            p
        })
}

fn volumes_and_mounts() -> impl Strategy<Value = (Value, Value)> {
    let source = prop_oneof![
        pick(&["", "Memory"]).prop_map(|m| json!({"emptyDir": {"medium": m}})),
        Just(json!({"emptyDir": {"sizeLimit": "1Gi"}})),
        Just(json!({"configMap": {"name": "settings"}})),
        Just(json!({"secret": {"secretName": "creds"}})),
        Just(json!({"persistentVolumeClaim": {"claimName": "models-pvc"}})),
        pick(&["", "Directory"]).prop_map(|t| json!({"hostPath": {"path": "/mnt/models", "type": t}})),
    ];
    // Mostly names of their own; sometimes the chart's (`config`, `dshm`).
    let name = prop_oneof![9 => pick(&["data", "cache", "models", "scratch"]), 1 => pick(&["config", "dshm"])];
    let volumes = prop::collection::vec((name, source), 0..3).prop_map(|v| {
        let mut seen = std::collections::HashSet::new();
        v.into_iter()
            .filter(|(name, _)| seen.insert(*name))
            .map(|(name, mut source)| {
                source["name"] = json!(name);
                source
            })
            .collect::<Vec<Value>>()
    });
    volumes.prop_flat_map(|volumes| {
        // Mounts mostly of the volumes just drawn (or the chart's `dshm`), at their own paths.
        let names: Vec<String> = volumes
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_string())
            .chain(["dshm".to_string(), "missing".to_string()])
            .collect();
        let paths = prop::sample::subsequence(vec!["/data", "/cache", "/models", "/scratch", "/dev/shm"], 0..3);
        let mounts = paths.prop_flat_map(move |paths| {
            let names = names.clone();
            paths
                .into_iter()
                .map(move |path| {
                    (prop::sample::select(names.clone()), prop::option::weighted(0.2, pick(&["sub", "a/b"]))).prop_map(
                        move |(name, sub)| {
                            obj(vec![
                                ("name", Some(json!(name))),
                                ("mountPath", Some(json!(path))),
                                ("subPath", sub.map(Value::from)),
                            ])
                        },
                    )
                })
                .collect::<Vec<_>>()
        });
        (Just(Value::from(volumes)), mounts.prop_map(Value::from))
    })
}

fn ingress() -> impl Strategy<Value = Value> {
    let path =
        (pick(&["/", "/api", "/v1/models"]), prop::option::of(pick(&["Exact", "Prefix", "ImplementationSpecific"])))
            .prop_map(|(p, t)| obj(vec![("path", Some(json!(p))), ("pathType", t.map(Value::from))]));
    let host = (pick(&["example.com", "*.example.com", "api.example.com", ""]), prop::collection::vec(path, 0..3))
        .prop_map(|(h, paths)| json!({"host": h, "paths": paths}));
    (
        any::<bool>(),
        pick(&["", "nginx"]),
        prop::collection::vec(host, 0..3),
        prop::option::weighted(0.3, Just(json!([{"hosts": ["example.com"], "secretName": "tls-cert"}]))),
    )
        .prop_map(|(enabled, class, hosts, tls)| {
            obj(vec![
                ("enabled", Some(json!(enabled))),
                ("className", Some(json!(class))),
                ("hosts", Some(json!(hosts))),
                ("tls", tls),
            ])
        })
}

fn tolerations() -> impl Strategy<Value = Value> {
    // Mostly consistent: Exists without a value, Equal with one; sometimes not.
    let key_op_value = prop_oneof![
        4 => pick(&["nvidia.com/gpu", "dedicated"]).prop_map(|k| (k, Some("Exists"), None)),
        4 => pick(&["nvidia.com/gpu", "dedicated"]).prop_map(|k| (k, Some("Equal"), Some("present"))),
        1 => Just(("", Some("Exists"), None)),
        1 => (pick(&["dedicated", ""]), prop::option::of(pick(&["Exists", "Equal"])), prop::option::of(pick(&["", "present"]))),
    ];
    let t = (
        key_op_value,
        prop::option::of(pick(&["NoSchedule", "NoExecute", "PreferNoSchedule"])),
        prop::option::weighted(0.1, Just(60)),
    )
        .prop_map(|((key, op, value), effect, seconds)| {
            obj(vec![
                ("key", Some(json!(key))),
                ("operator", op.map(Value::from)),
                ("value", value.map(Value::from)),
                ("effect", effect.map(Value::from)),
                ("tolerationSeconds", seconds.map(Value::from)),
            ])
        });
    prop::collection::vec(t, 0..3).prop_map(Value::from)
}

fn labels() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        pick(&["team", "nvidia.com/gpu.product", "example.com/tier"]),
        pick(&["ml", "NVIDIA-A100", "", "a.b_c-d"]),
        0..3,
    )
    .prop_map(|m| json!(m))
}

fn security_context() -> impl Strategy<Value = Value> {
    (
        prop::option::of(pick(&[1000i64, 0])),
        prop::option::weighted(0.2, any::<bool>()),
        prop::option::weighted(0.3, any::<bool>()),
        prop::option::weighted(0.2, pick(&["RuntimeDefault", "Localhost"])),
    )
        .prop_map(|(user, privileged, escalation, seccomp)| {
            obj(vec![
                ("runAsUser", user.map(Value::from)),
                ("privileged", privileged.map(Value::from)),
                ("allowPrivilegeEscalation", escalation.map(Value::from)),
                ("seccompProfile", seccomp.map(|s| json!({"type": s}))),
            ])
        })
}

fn affinity() -> impl Strategy<Value = Value> {
    prop_oneof![
        (pick(&["In", "NotIn", "Exists", "Gt"]), pick(&[vec!["NVIDIA-A100"], vec![], vec!["3"]])).prop_map(|(op, values)| {
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": op, "values": values}]}]}}})
        }),
        pick(&[1, 100]).prop_map(|w| json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}}]}})),
    ]
}

/// The fields a gateway, the template or an application may set.
fn pod_fields() -> impl Strategy<Value = Map<String, Value>> {
    (
        (
            maybe(prop::collection::vec(env_var(), 0..4).prop_map(Value::from), 0.5),
            maybe(container_ports(), 0.3),
            maybe(service(), 0.4),
            maybe(resources(), 0.5),
            maybe(probe(), 0.3),
            maybe(probe(), 0.3),
        ),
        (
            prop::option::weighted(0.3, volumes_and_mounts()),
            maybe(ingress(), 0.25),
            maybe(labels(), 0.3),
            maybe(tolerations(), 0.3),
            maybe(labels(), 0.2),
            maybe(security_context(), 0.2),
            maybe(affinity(), 0.15),
            prop::option::weighted(
                0.2,
                (pick(&["tytn/takeoff-pro", "registry.example.com/reader"]), pick(&["", "v1", "sha256:abc"])),
            ),
        ),
    )
        .prop_map(
            |(
                (env, ports, service, resources, liveness, readiness),
                (volumes, ingress, node_selector, tolerations, pod_labels, security, affinity, image),
            )| {
                let (volumes, mounts) = volumes.unzip();
                let Value::Object(m) = obj(vec![
                    ("env", env),
                    ("ports", ports),
                    ("service", service),
                    ("resources", resources),
                    ("livenessProbe", liveness),
                    ("readinessProbe", readiness),
                    ("volumes", volumes),
                    ("volumeMounts", mounts),
                    ("ingress", ingress),
                    ("nodeSelector", node_selector),
                    ("tolerations", tolerations),
                    ("podLabels", pod_labels),
                    ("securityContext", security),
                    ("affinity", affinity),
                    ("image", image.map(|(r, t)| json!({"repository": r, "tag": t}))),
                ]) else {
                    unreachable!()
                };
                m
            },
        )
}

fn application() -> impl Strategy<Value = Value> {
    (
        pod_fields(),
        pick(&["cpu", "cuda"]),
        prop::option::weighted(0.3, pick(&[1i64, 2, 16])),
        prop::option::weighted(0.2, (any::<bool>(), pick(&[0, 1, 4]))),
        prop::option::of(pick(&[0, 1, 2])),
        prop::option::weighted(0.5, (pick(&[1i64, 2, 4, 8, 64, 3]), pick(&[1i64, 4]), pick(&["q80", "f32"]))),
    )
        .prop_map(|(mut m, device, tensor, scaling, replicas, group)| {
            m.insert(
                "readerConfig".into(),
                obj(vec![
                    ("modelName", Some(json!("org/model"))),
                    ("device", Some(json!(device))),
                    ("tensorParallel", tensor.map(Value::from)),
                ]),
            );
            if let Some((enabled, max)) = scaling {
                m.insert("scaling".into(), json!({"enabled": enabled, "spec": {"maxReplicaCount": max}}));
            }
            if let Some(r) = replicas {
                m.insert("replicaCount".into(), json!(r));
            }
            // A distributed-llama group (kept in `v1alpha2` CRs only): one group, a model by
            // distributed-llama's name, sometimes a size that is not a power of two.
            if let Some((nodes, nthreads, buffers)) = group {
                m.remove("scaling");
                m.remove("replicaCount");
                m["readerConfig"]["modelName"] = json!("qwen3_0.6b_q40");
                m.insert(
                    "engine".into(),
                    json!({"distributedLlama": {"nodes": nodes, "nthreads": nthreads, "bufferFloatType": buffers}}),
                );
            }
            Value::Object(m)
        })
}

/// One value users get wrong: `(field, value)` set in (or appended to, for lists) a
/// component, or an application name.
const FAULTS: &[(&str, &str)] = &[
    ("env", r#"{"name": "1BAD=NAME", "value": "x"}"#),
    ("env", r#"{"name": "with\ttab", "value": "x"}"#),
    ("env", r#"{"name": "BOTH", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}"#),
    ("env", r#"{"name": "EMPTY_FROM", "valueFrom": {}}"#),
    ("env", r#"{"name": "BAD_FIELD", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers[0].image"}}}"#),
    ("env", r#"{"name": "BAD_SECRET", "valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}"#),
    ("ports", r#"{"containerPort": 70000}"#),
    ("ports", r#"{"containerPort": 8080, "name": "Bad_Name"}"#),
    ("ports", r#"{"containerPort": 8080, "protocol": "HTTP"}"#),
    ("service", r#"{"type": "ExternalName"}"#),
    ("service", r#"{"ports": [{"port": 0, "name": "zero"}]}"#),
    ("service", r#"{"ports": [{"port": 80, "name": "Bad_Name"}]}"#),
    ("service", r#"{"type": "NodePort", "ports": [{"port": 80, "name": "http", "nodePort": 40000}]}"#),
    ("service", r#"{"ports": [{"port": 80, "name": "http", "nodePort": 30090}]}"#),
    ("service", r#"{"ports": []}"#),
    ("resources", r#"{"limits": {"cpu": "abc"}}"#),
    ("resources", r#"{"requests": {"memory": "-1"}}"#),
    ("resources", r#"{"limits": {"bogus": "1"}}"#),
    ("resources", r#"{"requests": {"nvidia.com/gpu": "1"}}"#),
    ("resources", r#"{"limits": {"nvidia.com/gpu": "500m"}}"#),
    ("livenessProbe", r#"{"exec": {"command": []}}"#),
    ("livenessProbe", r#"{"httpGet": {"path": "/", "port": "Bad_Port"}}"#),
    ("readinessProbe", r#"{"tcpSocket": {"port": 70000}}"#),
    ("readinessProbe", r#"{"initialDelaySeconds": -1}"#),
    ("volumes", r#"{"name": "Bad_Name", "emptyDir": {}}"#),
    ("volumes", r#"{"name": "nosource"}"#),
    ("volumes", r#"{"name": "two", "emptyDir": {}, "configMap": {"name": "x"}}"#),
    ("volumes", r#"{"name": "medium", "emptyDir": {"medium": "Bogus"}}"#),
    ("volumeMounts", r#"{"name": "missing", "mountPath": "/missing"}"#),
    ("volumeMounts", r#"{"name": "config", "mountPath": ""}"#),
    ("volumeMounts", r#"{"name": "dshm", "mountPath": "/x", "subPath": "../escape"}"#),
    ("ingress", r#"{"enabled": true, "hosts": [{"host": "Bad_Host"}]}"#),
    ("ingress", r#"{"enabled": true, "hosts": [{"host": "1.2.3.4"}]}"#),
    ("ingress", r#"{"enabled": true, "hosts": [{"host": "a.com", "paths": [{"path": "relative"}]}]}"#),
    ("ingress", r#"{"enabled": true, "className": "Bad Class", "hosts": [{"host": "a.com"}]}"#),
    ("tolerations", r#"{"key": "k", "operator": "Bogus"}"#),
    ("tolerations", r#"{"key": "bad key", "operator": "Exists"}"#),
    ("tolerations", r#"{"key": "k", "effect": "Bogus"}"#),
    ("nodeSelector", r#"{"bad key": "x"}"#),
    ("podLabels", r#"{"team": "has space"}"#),
    ("securityContext", r#"{"runAsUser": -1}"#),
    ("securityContext", r#"{"seccompProfile": {"type": "Bogus"}}"#),
    ("affinity", r#"{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}"#),
    (
        "affinity",
        r#"{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Bogus"}]}]}}}"#,
    ),
    ("image", r#"{"repository": ""}"#),
    ("image", r#"{"repository": "has space"}"#),
    ("applicationName", "Chat"),
    ("applicationName", "a_b"),
    ("applicationName", "gateway"),
    ("applicationName", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
];

fn inject(spec: &mut Value, fault: usize, target: usize) {
    let (field, value) = FAULTS[fault];
    if field == "applicationName" {
        let apps = spec["applications"].as_object_mut().unwrap();
        let first = apps.values().next().cloned().unwrap_or(json!({}));
        apps.insert(value.to_string(), first);
        return;
    }
    let component = match target {
        0 => &mut spec["gateway"],
        1 => &mut spec["applicationTemplate"],
        _ => spec["applications"].as_object_mut().unwrap().values_mut().next().unwrap(),
    };
    if component.is_null() {
        *component = json!({});
    }
    let value: Value = serde_json::from_str(value).unwrap();
    let slot = &mut component[field];
    match slot {
        Value::Array(items) if !value.is_array() => items.push(value),
        _ if matches!(field, "env" | "ports" | "volumes" | "volumeMounts" | "tolerations") => *slot = json!([value]),
        _ => *slot = value,
    }
}

/// A CR's API version and spec: half of them `v1alpha2` (its applications and template
/// without the Service and Ingress that contract took away; some applications
/// distributed-llama groups), half `v1alpha1` (no engines).
fn spec() -> impl Strategy<Value = (&'static str, Value)> {
    let fault = prop::option::weighted(0.35, (0..FAULTS.len(), 0..3usize));
    (
        prop::collection::btree_map("[a-z][a-z0-9-]{0,10}[a-z0-9]", application(), 1..4),
        prop::option::weighted(0.3, pod_fields()),
        prop::option::weighted(0.3, pod_fields()),
        any::<bool>(),
        fault,
        any::<bool>(),
    )
        .prop_map(|(mut apps, mut template, gateway, metrics, fault, v1alpha2)| {
            let version = if v1alpha2 { "v1alpha2" } else { "v1alpha1" };
            let taken_away: &[&str] = if v1alpha2 { &["service", "ingress"] } else { &["engine"] };
            for fields in apps.values_mut().filter_map(Value::as_object_mut).chain(template.as_mut()) {
                fields.retain(|k, _| !taken_away.contains(&k.as_str()));
            }
            let mut spec = json!({"applications": apps});
            if let Some(t) = template {
                spec["applicationTemplate"] = Value::Object(t);
            }
            let mut g = gateway.unwrap_or_default();
            g.insert("exportPrometheusMetrics".into(), json!(metrics));
            spec["gateway"] = Value::Object(g);
            if let Some((fault, target)) = fault {
                inject(&mut spec, fault, target);
            }
            (version, spec)
        })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(500)
}

#[test]
fn every_generated_cr_is_rejected_with_a_field_path_or_entirely_accepted_by_the_api_server() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cluster = runtime.block_on(Cluster::start("property"));
    // A new seed each run (printed), or SERVER_VALIDATION_SEED to replay one.
    let seed = std::env::var("SERVER_VALIDATION_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    eprintln!("generator seed: SERVER_VALIDATION_SEED={seed}");
    let config = Config {
        cases: cases(),
        rng_seed: RngSeed::Fixed(seed),
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/e2e/server_validation.proptest-regressions",
        ))),
        // A shrinking step is a round of dry runs: keep the search short.
        max_shrink_iters: 200,
        ..Config::default()
    };
    let (rejected, accepted) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let reasons = std::cell::RefCell::new(std::collections::BTreeMap::<String, u32>::new());
    let groups = std::cell::Cell::new(0u32);
    let result = TestRunner::new(config).run(&spec(), |(version, spec)| {
        let cr = json!({"apiVersion": format!("models.titanml.co/{version}"), "kind": "ModelOrchestra", "metadata": {"name": "gen"}, "spec": spec});
        let outcome = model_orchestra::render_value(&cr, &cluster.namespace).map(|r| r.objects);
        match outcome {
            Err(RenderError::Input(errors)) => {
                let e = &errors.errors()[0];
                prop_assert!(e.field.starts_with("spec") || e.field.starts_with("metadata"), "a rejection names the field: {e}");
                rejected.set(rejected.get() + 1);
                // The rule, not the place: the field path without the component and indices.
                let parts: Vec<&str> = e.field.split('.').map(|p| p.split('[').next().unwrap_or(p)).collect();
                let field = parts.iter().skip(if parts.get(1) == Some(&"applications") { 3 } else { 2 }).copied().collect::<Vec<_>>().join(".");
                *reasons.borrow_mut().entry(format!("{version} {field}")).or_default() += 1;
                Ok(())
            }
            Err(e) => Err(TestCaseError::fail(format!("not an input error: {e}"))),
            Ok(objects) => {
                runtime.block_on(dry_run(&cluster, &objects)).map_err(|e| {
                    TestCaseError::fail(format!("rendered, but the API server refuses: {e}\nCR: {}", serde_json::to_string(&cr).unwrap()))
                })?;
                accepted.set(accepted.get() + 1);
                if objects.iter().any(|o| o.kind == model_orchestra_api::kinds::Kind::StatefulSet) {
                    groups.set(groups.get() + 1);
                }
                Ok(())
            }
        }
    });
    let (rejected, accepted, groups) = (rejected.get(), accepted.get(), groups.get());
    eprintln!(
        "{} cases: {rejected} rejected by validation, {accepted} accepted by the API server ({groups} with \
         distributed-llama workers)",
        rejected + accepted
    );
    eprintln!("rejections by field: {:?}", reasons.borrow());
    if let Err(e) = result {
        panic!("{e}\nreplay: SERVER_VALIDATION_SEED={seed} cargo test -p model-orchestra-operator --test server_validation");
    }
    assert!(accepted >= cases() / 5, "the generator must produce mostly valid CRs ({accepted} accepted)");
    assert!(rejected >= cases() / 20, "and some invalid ones ({rejected} rejected)");
    assert!(groups >= cases() / 40, "and distributed-llama groups among the accepted ({groups})");
}
