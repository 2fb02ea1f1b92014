//! A real node beside kwok's fake ones: containerd, runc, the CNI plugins, the kubelet and
//! kube-proxy, in the cluster's namespaces ([`crate::isolation`]), so its pods really run.
//!
//! The node's address is one end of a veth pair inside the namespace; pods get addresses on
//! the bridge `cni0`; Services are kube-proxy's iptables rules in the namespace; names are
//! CoreDNS's ([`crate::dns`]) on the node's address, the kubelet's `clusterDNS`. Images are
//! pulled from the cluster's registry ([`crate::registry`]), which also stands in for the
//! public registries the cluster mirrors (an air-gapped cluster's set-up), so an image named
//! `ghcr.io/...`, `docker.io/...` or `quay.io/...` is pulled from there too.
//!
//! Only pods meant for it land there: the node is labelled and tainted
//! ([`REAL_NODE_LABEL`], [`REAL_NODE_TAINT`]). A namespace whose pods should really run is
//! annotated so (see [`real_pods_annotations`]): the API server's PodNodeSelector and
//! PodTolerationRestriction admission give its pods the node's selector and toleration,
//! as a cluster admin pins a namespace to a node pool. Other pods go to kwok's nodes
//! (whose fake pods would otherwise take Service endpoints that lead nowhere).
//!
//! What mattered on this kind of machine (root without `cap_sys_resource`, cgroup v1, no
//! systemd): containerd's `restrict_oom_score_adj` (runc cannot set -998 otherwise); the
//! kubelet's `failCgroupV1: false`, `cgroupfs` driver and a `cgroupRoot` per cluster (two
//! kubelets under one `/kubepods` delete each other's pods); kube-proxy's conntrack settings
//! at 0 (it would otherwise write host-wide sysctls).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::forward::Forwarder;
use crate::isolation::Isolation;
use crate::kubeconfig::Credentials;
use crate::pki::Pki;
use crate::process::Supervised;
use crate::{dns, registry, tools, Error};

/// The label every real node carries (`real`), and kwok's nodes too (`kwok`).
pub const REAL_NODE_LABEL: &str = "local-cluster.titanml.co/node";
/// The taint of real nodes: `local-cluster.titanml.co/node=real:NoSchedule`.
pub const REAL_NODE_TAINT: &str = "local-cluster.titanml.co/node";
/// The subnet of the first real node's pods.
pub const POD_SUBNET: &str = "10.244.0.0/24";
/// The cluster's Service addresses.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The `kubernetes` Service's address (the first of the range).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// The annotations that make a namespace's pods run on the real node: its selector
/// (PodNodeSelector) and a toleration of its taint (PodTolerationRestriction).
pub fn real_pods_annotations() -> Value {
    json!({
        "scheduler.alpha.kubernetes.io/node-selector": format!("{REAL_NODE_LABEL}=real"),
        "scheduler.alpha.kubernetes.io/defaultTolerations":
            json!([{"key": REAL_NODE_TAINT, "operator": "Equal", "value": "real", "effect": "NoSchedule"}]).to_string(),
    })
}

/// Where one real node keeps its files, and how it is reached.
pub struct NodeLayout {
    pub name: String,
    pub address: Ipv4Addr,
    pub dir: PathBuf,
}

impl NodeLayout {
    pub fn new(cluster_dir: &Path, name: &str, address: Ipv4Addr) -> NodeLayout {
        NodeLayout { name: name.into(), address, dir: cluster_dir.join(name) }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// containerd's socket (on the namespace's own /run).
    pub fn containerd_socket(&self) -> String {
        format!("/run/containerd-{}/containerd.sock", self.name)
    }
}

/// containerd's configuration (version 2, as Debian's containerd 1.6 reads it).
pub fn containerd_config(node: &NodeLayout, sandbox_image: &str) -> String {
    let root = node.path("containerd");
    format!(
        r#"version = 2
root = "{root}/root"
state = "/run/containerd-{name}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # runc cannot give a container oom_score_adj -998 without cap_sys_resource.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{root}/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{root}/certs.d"
"#,
        root = root.display(),
        name = node.name,
        socket = node.containerd_socket(),
    )
}

/// `certs.d/<host>/hosts.toml`: the cluster's registry (plain HTTP, loopback) for itself
/// and for every mirrored registry.
pub fn registry_hosts(registry: &str, host: &str) -> String {
    let upstream = if host == registry { format!("http://{registry}") } else { format!("https://{host}") };
    format!(
        "server = \"{upstream}\"\n\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n"
    )
}

/// The bridge network of the node's pods.
pub fn cni_config() -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "local-cluster",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/run/cni-ipam"
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    })
}

/// The kubelet's configuration.
pub fn kubelet_config(node: &NodeLayout, cgroup_root: &str, ca: &Path, healthz_port: u16) -> Value {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // 1.35+ refuses cgroup v1 unless told otherwise; this kind of machine has v1 only.
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": format!("/{cgroup_root}"),
        "containerRuntimeEndpoint": format!("unix://{}", node.containerd_socket()),
        "podLogsDir": node.path("pod-logs"),
        "resolvConf": node.path("resolv.conf"),
        "address": node.address.to_string(),
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": node.path("pki/kubelet.crt"),
        "tlsPrivateKeyFile": node.path("pki/kubelet.key"),
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": ca},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [node.address.to_string()],
        "clusterDomain": dns::CLUSTER_DOMAIN,
        "failSwapOn": false,
        "serializeImagePulls": false,
        "maxPods": 110,
        // The machine's disk is shared: evict late, never collect images on our account.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "registerWithTaints": [{"key": REAL_NODE_TAINT, "value": "real", "effect": "NoSchedule"}],
        "shutdownGracePeriod": "0s",
        "nodeStatusReportFrequency": "10s",
    })
}

/// kube-proxy's configuration: iptables in the namespace, and no host-wide sysctl.
pub fn kube_proxy_config(node: &NodeLayout, kubeconfig: &Path, healthz_port: u16, metrics_port: u16) -> Value {
    json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig},
        "mode": "iptables",
        "hostnameOverride": node.name,
        "bindAddress": node.address.to_string(),
        "healthzBindAddress": format!("127.0.0.1:{healthz_port}"),
        "metricsBindAddress": format!("127.0.0.1:{metrics_port}"),
        "clusterCIDR": POD_SUBNET,
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    })
}

/// Writes the node's files: certificates, kubeconfigs, containerd's, the kubelet's,
/// kube-proxy's and CNI's configurations.
pub struct NodeFiles {
    pub containerd_config: PathBuf,
    pub kubelet_config: PathBuf,
    pub kubelet_kubeconfig: PathBuf,
    pub kube_proxy_config: PathBuf,
}

#[allow(clippy::too_many_arguments)]
pub fn write_files(
    node: &NodeLayout,
    pki: &Pki,
    server: &str,
    registry: &str,
    mirrors: &[String],
    sandbox_image: &str,
    isolation: &Isolation,
    ports: (u16, u16, u16),
) -> Result<NodeFiles, Error> {
    let write = |path: PathBuf, text: &str| -> Result<PathBuf, Error> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    };
    let json_text = |v: &Value| serde_json::to_string_pretty(v).expect("JSON");
    for d in ["pod-logs", "kubelet", "pki", "containerd/root"] {
        std::fs::create_dir_all(node.path(d)).map_err(|e| Error::io(&node.path(d), e))?;
    }
    // The kubelet's serving certificate (the API server checks it) and its identity.
    let serving = pki.serving_for(&format!("{}-kubelet", node.name), &[&node.name], &[IpAddr::V4(node.address)])?;
    write(node.path("pki/kubelet.crt"), &serving.cert)?;
    write(node.path("pki/kubelet.key"), &serving.key)?;
    let identity = pki.client(
        &format!("{}-kubelet-client", node.name),
        &format!("system:node:{}", node.name),
        Some("system:nodes"),
    )?;
    let kubelet_kubeconfig = node.path("kubelet.kubeconfig");
    crate::kubeconfig::write(
        &kubelet_kubeconfig,
        server,
        &pki.ca.cert,
        crate::kubeconfig::Credentials::Certificate(&identity),
        "default",
    )?;
    let proxy_identity = pki.client(&format!("{}-kube-proxy", node.name), "system:kube-proxy", None)?;
    let proxy_kubeconfig = node.path("kube-proxy.kubeconfig");
    crate::kubeconfig::write(
        &proxy_kubeconfig,
        server,
        &pki.ca.cert,
        crate::kubeconfig::Credentials::Certificate(&proxy_identity),
        "default",
    )?;

    // Pods resolve names with the cluster's DNS only (nothing outside exists for them).
    write(node.path("resolv.conf"), "# the local cluster's pods have no upstream resolver\n")?;
    write(node.path("containerd/cni/10-local-cluster.conflist"), &json_text(&cni_config()))?;
    let containerd_config = write(node.path("containerd/config.toml"), &containerd_config(node, sandbox_image))?;
    for host in std::iter::once(registry).chain(mirrors.iter().map(String::as_str)) {
        write(node.path(&format!("containerd/certs.d/{host}/hosts.toml")), &registry_hosts(registry, host))?;
    }
    let (kubelet_healthz, proxy_healthz, proxy_metrics) = ports;
    let kubelet_config = write(
        node.path("kubelet-config.json"),
        &json_text(&kubelet_config(node, isolation.cgroup_root(), &pki.path("ca.crt"), kubelet_healthz)),
    )?;
    let kube_proxy_config = write(
        node.path("kube-proxy-config.json"),
        &json_text(&kube_proxy_config(node, &proxy_kubeconfig, proxy_healthz, proxy_metrics)),
    )?;
    Ok(NodeFiles { containerd_config, kubelet_config, kubelet_kubeconfig, kube_proxy_config })
}

/// What starting a real node needs of the cluster.
pub(crate) struct Context<'a> {
    pub isolation: &'a Arc<Isolation>,
    pub pki: &'a Pki,
    pub dir: &'a Path,
    pub logs: &'a Path,
    pub server: &'a str,
    pub admin: &'a kube::Client,
    pub mirrors: &'a [String],
    pub processes: &'a mut Vec<(&'static str, Supervised)>,
    pub forwarders: &'a mut Vec<Forwarder>,
}

/// What a real node's start leaves the cluster.
pub(crate) struct Started {
    /// The image registry, `127.0.0.1:<port>` on both sides.
    pub registry: String,
    pub models: ModelsRegistry,
}

/// The models registry (see [`crate::registry`]).
pub struct ModelsRegistry {
    /// For pods: `registry.kube-system.svc:5000`.
    pub in_cluster: String,
    /// For the node's own processes (in the cluster's namespace): `127.0.0.1:<port>`.
    pub on_node: String,
    /// Where models are pushed: the image registry.
    pub push: String,
    /// Its blob server, whose faults a test turns on.
    pub blobs: crate::blobs::BlobServer,
}

/// The programs of a real node that come from the machine's packages (Debian's names).
const MACHINE_PROGRAMS: [&str; 4] = ["containerd", "runc", "iptables", "docker-registry"];

/// Every program a real node needs, or one error naming what is missing.
pub(crate) fn check_programs() -> Result<(), Error> {
    for program in MACHINE_PROGRAMS {
        if crate::isolation::which(program).is_none() {
            return Err(Error::MissingProgram { name: program.into(), path: program.into() });
        }
    }
    if !Path::new("/usr/lib/cni/bridge").is_file() {
        return Err(Error::MissingProgram {
            name: "CNI plugins (containernetworking-plugins)".into(),
            path: "/usr/lib/cni/bridge".into(),
        });
    }
    for program in ["kubelet", "kube-proxy", "coredns"] {
        tools::program(program)?;
    }
    tools::static_program("mo-pod")?;
    Ok(())
}

/// Starts the real node: the cluster's registry (with the pause image pushed to it), the
/// models registry and its blob server, CoreDNS, containerd, the kubelet and kube-proxy.
/// The caller waits for the node to be Ready.
pub(crate) async fn start(ctx: Context<'_>) -> Result<Started, Error> {
    let isolation = ctx.isolation;
    let free_port = || crate::process::free_port().map_err(|e| Error::io(Path::new("127.0.0.1:0"), e));
    let inside = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let node = NodeLayout::new(ctx.dir, crate::REAL_NODE_NAME, crate::NODE_ADDRESS);

    // The registry, at the same 127.0.0.1:PORT inside and on the host.
    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let config = ctx.dir.join("registry.yml");
    std::fs::write(&config, registry::config(&ctx.dir.join("registry"), port)).map_err(|e| Error::io(&config, e))?;
    let mut command = isolation.command(registry::program()?);
    command.arg("serve").arg(&config);
    ctx.processes.push(("registry", crate::spawn_logged(command, ctx.logs, "registry")?));
    ctx.forwarders
        .push(Forwarder::start(inside(port), inside(port), isolation.clone()).map_err(|e| Error::io(&config, e))?);
    crate::wait_http_ok(|| isolation.connect(inside(port)), "/v2/", "registry", ctx.logs).await?;

    // The models registry: the same storage, blob downloads redirected to the blob server
    // on the node's address (reachable from pods and from the node alike).
    let blob_port = free_port()?;
    let listener = isolation
        .bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, blob_port)))
        .map_err(|e| Error::io(Path::new("the blob server's port"), e))?;
    let blobs = crate::blobs::BlobServer::start(listener, ctx.dir.join("registry"))
        .map_err(|e| Error::io(Path::new("the blob server"), e))?;
    let models_port = free_port()?;
    let models_config = ctx.dir.join("models-registry.yml");
    let blobs_url = format!("http://{}:{blob_port}", node.address);
    std::fs::write(&models_config, registry::models_config(&ctx.dir.join("registry"), models_port, &blobs_url))
        .map_err(|e| Error::io(&models_config, e))?;
    let mut command = isolation.command(registry::program()?);
    command.arg("serve").arg(&models_config);
    ctx.processes.push(("models-registry", crate::spawn_logged(command, ctx.logs, "models-registry")?));
    crate::wait_http_ok(|| isolation.connect(inside(models_port)), "/v2/", "models-registry", ctx.logs).await?;
    registry::install_models_service(ctx.admin, node.address, models_port).await?;
    let models = ModelsRegistry {
        in_cluster: registry::models_address(),
        on_node: format!("127.0.0.1:{models_port}"),
        push: address.clone(),
        blobs,
    };

    // The pause image and the test pods' image, from our own static program.
    let program = tools::static_program("mo-pod")?;
    let binary = std::fs::read(&program).map_err(|e| Error::io(&program, e))?;
    let sandbox_image = registry::pause_image(&address);
    for (image, reference) in [
        (mo_images::pod_image(&binary, &["pause"], "65535:65535"), sandbox_image.clone()),
        (mo_images::pod_image(&binary, &["serve", "8080"], "65532:65532"), registry::pod_image(&address)),
    ] {
        let options = mo_images::push::PushOptions {
            access: mo_images::registry::Access { insecure: true, ..Default::default() },
            force: true,
            quiet: true,
        };
        mo_images::push::push(&image, &reference, &options).await.map_err(|e| Error::Start {
            component: format!("pushing {reference}"),
            message: e.to_string(),
            log: ctx.logs.join("registry.log"),
            tail: crate::tail(&ctx.logs.join("registry.log"), 20),
        })?;
    }

    // CoreDNS on the node's address.
    dns::install_rbac(ctx.admin).await?;
    let identity = ctx.pki.client("coredns", dns::USER, None)?;
    let dns_kubeconfig = ctx.dir.join("coredns.kubeconfig");
    crate::kubeconfig::write(
        &dns_kubeconfig,
        ctx.server,
        &ctx.pki.ca.cert,
        Credentials::Certificate(&identity),
        "default",
    )?;
    let (health, ready) = (free_port()?, free_port()?);
    let corefile = ctx.dir.join("Corefile");
    std::fs::write(&corefile, dns::corefile(node.address, &dns_kubeconfig, health, ready))
        .map_err(|e| Error::io(&corefile, e))?;
    let mut command = isolation.command(tools::program("coredns")?);
    command.arg("-conf").arg(&corefile);
    ctx.processes.push(("coredns", crate::spawn_logged(command, ctx.logs, "coredns")?));

    // containerd, then the kubelet and kube-proxy.
    let ports = (free_port()?, free_port()?, free_port()?);
    let files = write_files(&node, ctx.pki, ctx.server, &address, ctx.mirrors, &sandbox_image, isolation, ports)?;
    let mut command = isolation.command("containerd");
    command.arg("--config").arg(&files.containerd_config);
    ctx.processes.push(("containerd", crate::spawn_logged(command, ctx.logs, "containerd")?));
    // The socket is on the namespace's own /run: seen through the holder's root.
    let socket = PathBuf::from(format!("/proc/{}/root{}", isolation.holder_pid(), node.containerd_socket()));
    wait_until(ctx.logs, "containerd", || socket.exists()).await?;

    let mut command = isolation.command(tools::program("kubelet")?);
    command
        .arg("--config")
        .arg(&files.kubelet_config)
        .arg("--kubeconfig")
        .arg(&files.kubelet_kubeconfig)
        .arg("--root-dir")
        .arg(node.path("kubelet"))
        .args(["--node-ip", &node.address.to_string(), "--hostname-override", &node.name])
        .args(["--node-labels", &format!("{REAL_NODE_LABEL}=real"), "--v", "1"]);
    ctx.processes.push(("kubelet", crate::spawn_logged(command, ctx.logs, "kubelet")?));

    let mut command = isolation.command(tools::program("kube-proxy")?);
    command.arg("--config").arg(&files.kube_proxy_config).args(["--v", "1"]);
    ctx.processes.push(("kube-proxy", crate::spawn_logged(command, ctx.logs, "kube-proxy")?));

    crate::wait_http_ok(|| isolation.connect(inside(ready)), "/ready", "coredns", ctx.logs).await?;
    Ok(Started { registry: address, models })
}

/// Polls `done` every 50 ms for up to a minute.
async fn wait_until(logs: &Path, component: &str, done: impl Fn() -> bool) -> Result<(), Error> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(60) {
            let log = logs.join(format!("{component}.log"));
            return Err(Error::Start {
                component: component.into(),
                message: "did not start".into(),
                tail: crate::tail(&log, 30),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirrored_registry_is_pulled_from_the_clusters_registry_over_plain_http() {
        let hosts = registry_hosts("127.0.0.1:5000", "ghcr.io");
        assert!(hosts.starts_with("server = \"https://ghcr.io\""), "{hosts}");
        assert!(hosts.contains("[host.\"http://127.0.0.1:5000\"]"), "{hosts}");
    }

    #[test]
    fn the_real_node_is_tainted_so_only_pods_that_tolerate_it_land_there() {
        let node = NodeLayout::new(Path::new("/c"), "real-0", Ipv4Addr::new(10, 10, 0, 10));
        let config = kubelet_config(&node, "local-cluster-1-0", Path::new("/c/ca.crt"), 1);
        assert_eq!(config["registerWithTaints"][0]["key"], REAL_NODE_TAINT);
        assert_eq!(config["registerWithTaints"][0]["effect"], "NoSchedule");
        assert_eq!(config["cgroupRoot"], "/local-cluster-1-0");
        let annotations = real_pods_annotations();
        let tolerations: Value =
            serde_json::from_str(annotations["scheduler.alpha.kubernetes.io/defaultTolerations"].as_str().unwrap())
                .unwrap();
        assert_eq!(tolerations[0]["key"], REAL_NODE_TAINT);
        assert_eq!(annotations["scheduler.alpha.kubernetes.io/node-selector"], format!("{REAL_NODE_LABEL}=real"));
    }

    #[test]
    fn kube_proxy_writes_no_host_wide_conntrack_setting() {
        let node = NodeLayout::new(Path::new("/c"), "real-0", Ipv4Addr::new(10, 10, 0, 10));
        let config = kube_proxy_config(&node, Path::new("/k"), 1, 2);
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["conntrack"]["min"], 0);
    }
}
