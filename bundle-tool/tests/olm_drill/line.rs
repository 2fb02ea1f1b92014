//! An operator line run as its pod would run: kwok pods run no process, so the drill starts
//! the binary itself with the Deployment's args and env (fieldRefs resolved for the line's
//! kwok pod), under a token of the Deployment's ServiceAccount — the one OLM created, so
//! OLM's RBAC is what the API server enforces. Its metrics move to an ephemeral loopback port.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::drill::Drill;

/// What the line's pod would run.
pub struct PodRun {
    pub namespace: String,
    pub pod: String,
    pub service_account: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl PodRun {
    /// Reads the line's Deployment (OLM made it from the bundle's CSV) and its Running pod.
    pub async fn of(drill: &Drill, line: &str) -> PodRun {
        let namespace = format!("model-orchestra-{line}");
        let name = format!("model-orchestra-operator-{line}");
        let deployment = Api::<Deployment>::namespaced(drill.client(), &namespace)
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("the Deployment {namespace}/{name} OLM made: {e}"));
        let selector = format!("app.kubernetes.io/instance={name}");
        let pods = Api::<Pod>::namespaced(drill.client(), &namespace)
            .list(&ListParams::default().labels(&selector).fields("status.phase=Running"))
            .await
            .expect("list the line's pods");
        let pod = pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .find_map(|p| p.metadata.name.clone())
            .unwrap_or_else(|| panic!("no Running pod of {namespace}/{name} ({selector})"));
        let spec = deployment.spec.and_then(|s| s.template.spec).expect("the Deployment's pod spec");
        let service_account = spec.service_account_name.clone().expect("the Deployment names its ServiceAccount");
        let container = spec.containers.first().expect("the Deployment's container");
        // The image's entrypoint is the binary: its command's first word is replaced by ours.
        let args: Vec<String> =
            container.command.iter().flatten().skip(1).chain(container.args.iter().flatten()).cloned().collect();
        let env = container
            .env
            .iter()
            .flatten()
            .map(|e| {
                let value = match e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) {
                    None if e.value_from.is_some() => {
                        panic!("{namespace}/{name}: env {} comes from other than the pod's fields", e.name)
                    }
                    None => e.value.clone().unwrap_or_default(),
                    Some(field) => match field.field_path.as_str() {
                        "metadata.name" => pod.clone(),
                        "metadata.namespace" => namespace.clone(),
                        other => {
                            panic!("{namespace}/{name}: env {} takes {other}, which the drill does not resolve", e.name)
                        }
                    },
                };
                (e.name.clone(), value)
            })
            .collect();
        PodRun { namespace, pod, service_account, args, env }
    }
}

/// Starts `binary` as the `line` operator's pod would run it.
pub async fn run_line(drill: &Drill, line: &str, binary: &Path) {
    let run = PodRun::of(drill, line).await;
    let kubeconfig = drill.work().join(format!("kubeconfig-{line}"));
    drill
        .cluster()
        .service_account_kubeconfig(&run.namespace, &run.service_account, &kubeconfig, None)
        .await
        .unwrap_or_else(|e| panic!("a token of {}/{}: {e}", run.namespace, run.service_account));
    let mut command = Command::new(binary);
    command
        .args(&run.args)
        .env_clear()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .env("MODEL_ORCHESTRA_METRICS_ADDR", "127.0.0.1:0")
        .env("KUBECONFIG", &kubeconfig);
    drill.spawn_line(line, command);
    let env: Vec<String> = run.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    drill.step(&format!(
        "{line}: {} as pod {}/{}, user system:serviceaccount:{}:{}, args {}, env {}",
        binary.display(),
        run.namespace,
        run.pod,
        run.namespace,
        run.service_account,
        run.args.join(" "),
        env.join(" ")
    ));
}
