//! Real nodes beside kwok's fake ones: containerd, runc, the CNI plugins and the kubelet of
//! each, in the cluster's namespaces ([`crate::isolation`]), so their pods really run.
//!
//! Node `real-K` has the address `10.10.0.(10+K)` on one end of a veth pair inside the
//! namespace, its own containerd (socket, state, root), its own kubelet (its cgroup subtree
//! `real-K`, where its containerd runs too) and its own pod subnet `10.244.K.0/24` on its
//! own bridge `cniK`. The nodes share the cluster's one network namespace, as machines share
//! a network: a pod reaches a pod of another node through the namespace's routes between
//! the bridges. What the network provides is the namespace's, not a node's, and stays up
//! when a node is stopped: Services are the iptables rules of **one** kube-proxy (two in one
//! namespace would rewrite each other's chains), names are CoreDNS's ([`crate::dns`]) on the
//! first node's address (every kubelet's `clusterDNS`), and the registries. Images are
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
use std::process::Command;
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
/// The real nodes' pods' addresses: `10.244.K.0/24` on node K.
pub const POD_NETWORK: &str = "10.244.0.0/16";
/// How many real nodes a cluster may have (their addresses and pod subnets are numbered).
pub const MAX_REAL_NODES: usize = 16;
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
    /// K of `real-K`.
    pub index: usize,
    pub name: String,
    pub address: Ipv4Addr,
    pub dir: PathBuf,
}

impl NodeLayout {
    /// Node `real-K`: `10.10.0.(10+K)`, its files in the cluster's directory `real-K/`.
    pub fn real(cluster_dir: &Path, index: usize) -> NodeLayout {
        assert!(index < MAX_REAL_NODES, "at most {MAX_REAL_NODES} real nodes");
        let name = real_node_name(index);
        let [a, b, c, d] = crate::NODE_ADDRESS.octets();
        NodeLayout { index, address: Ipv4Addr::new(a, b, c, d + index as u8), dir: cluster_dir.join(&name), name }
    }

    /// Its pods' subnet.
    pub fn pod_subnet(&self) -> String {
        format!("10.244.{}.0/24", self.index)
    }

    /// Its cgroup under the cluster's subtree: its containerd and kubelet run in `<this>/system`,
    /// its pods below (the kubelet's `cgroupRoot`). Stopping the node kills all of it.
    pub fn cgroup(&self) -> &str {
        &self.name
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

/// The name of real node K.
pub fn real_node_name(index: usize) -> String {
    format!("real-{index}")
}

/// The bridge network of the node's pods: a bridge and a subnet of its own (the bridge is
/// the pods' gateway, and the namespace routes between the nodes' bridges).
pub fn cni_config(node: &NodeLayout) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "local-cluster",
        "plugins": [
            {
                "type": "bridge",
                "bridge": format!("cni{}", node.index),
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_subnet()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    // host-local keeps its leases per network name: one directory per node.
                    "dataDir": format!("/run/cni-ipam/{}", node.name)
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    })
}

/// The kubelet's configuration: `cgroup_root` is the cluster's subtree, `dns` CoreDNS's address.
pub fn kubelet_config(node: &NodeLayout, cgroup_root: &str, ca: &Path, healthz_port: u16, dns: Ipv4Addr) -> Value {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // 1.35+ refuses cgroup v1 unless told otherwise; this kind of machine has v1 only.
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": format!("/{cgroup_root}/{}", node.cgroup()),
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
        "clusterDNS": [dns.to_string()],
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

/// kube-proxy's configuration: iptables in the namespace (for every node's pods), and no
/// host-wide sysctl.
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
        "clusterCIDR": POD_NETWORK,
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    })
}

/// The files a real node's containerd and kubelet start from (written once: a stopped node
/// starts again from the same).
pub struct NodeFiles {
    pub containerd_config: PathBuf,
    pub kubelet_config: PathBuf,
    pub kubelet_kubeconfig: PathBuf,
}

fn write_file(path: PathBuf, text: &str) -> Result<PathBuf, Error> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

fn json_text(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("JSON")
}

/// What every real node shares: the cluster's API server, registries and DNS.
pub(crate) struct Shared<'a> {
    pub isolation: &'a Arc<Isolation>,
    pub pki: &'a Pki,
    pub server: &'a str,
    /// The image registry, `127.0.0.1:<port>`.
    pub registry: &'a str,
    pub mirrors: &'a [String],
    pub sandbox_image: &'a str,
    /// CoreDNS's address (the first node's).
    pub dns: Ipv4Addr,
}

/// Writes a node's files: its certificates and kubeconfig, containerd's, the kubelet's and
/// CNI's configurations.
pub(crate) fn write_files(node: &NodeLayout, shared: &Shared<'_>, kubelet_healthz: u16) -> Result<NodeFiles, Error> {
    let pki = shared.pki;
    for d in ["pod-logs", "kubelet", "pki", "containerd/root"] {
        std::fs::create_dir_all(node.path(d)).map_err(|e| Error::io(&node.path(d), e))?;
    }
    // The kubelet's serving certificate (the API server checks it) and its identity.
    let serving = pki.serving_for(&format!("{}-kubelet", node.name), &[&node.name], &[IpAddr::V4(node.address)])?;
    write_file(node.path("pki/kubelet.crt"), &serving.cert)?;
    write_file(node.path("pki/kubelet.key"), &serving.key)?;
    let identity = pki.client(
        &format!("{}-kubelet-client", node.name),
        &format!("system:node:{}", node.name),
        Some("system:nodes"),
    )?;
    let kubelet_kubeconfig = node.path("kubelet.kubeconfig");
    crate::kubeconfig::write(
        &kubelet_kubeconfig,
        shared.server,
        &pki.ca.cert,
        crate::kubeconfig::Credentials::Certificate(&identity),
        "default",
    )?;
    // Pods resolve names with the cluster's DNS only (nothing outside exists for them).
    write_file(node.path("resolv.conf"), "# the local cluster's pods have no upstream resolver\n")?;
    write_file(node.path("containerd/cni/10-local-cluster.conflist"), &json_text(&cni_config(node)))?;
    let containerd_config =
        write_file(node.path("containerd/config.toml"), &containerd_config(node, shared.sandbox_image))?;
    for host in std::iter::once(shared.registry).chain(shared.mirrors.iter().map(String::as_str)) {
        write_file(
            node.path(&format!("containerd/certs.d/{host}/hosts.toml")),
            &registry_hosts(shared.registry, host),
        )?;
    }
    let config = kubelet_config(node, shared.isolation.cgroup_root(), &pki.path("ca.crt"), kubelet_healthz, shared.dns);
    let kubelet_config = write_file(node.path("kubelet-config.json"), &json_text(&config))?;
    Ok(NodeFiles { containerd_config, kubelet_config, kubelet_kubeconfig })
}

/// A real node: where it is, what it starts from, and its processes while it runs.
pub(crate) struct RealNode {
    pub layout: NodeLayout,
    files: NodeFiles,
    /// containerd and the kubelet, in start order; empty while the node is stopped.
    pub processes: Vec<(String, Supervised)>,
}

impl RealNode {
    /// Prepares node `index` (its address, files and cgroup) and starts it.
    pub(crate) async fn start(index: usize, dir: &Path, logs: &Path, shared: &Shared<'_>) -> Result<RealNode, Error> {
        let layout = NodeLayout::real(dir, index);
        if index > 0 {
            // The first node's address is the holder's; the others join it on the same link.
            shared.isolation.run("ip", &["addr", "add", &format!("{}/24", layout.address), "dev", "node0"])?;
        }
        let healthz = crate::process::free_port().map_err(|e| Error::io(Path::new("127.0.0.1:0"), e))?;
        let files = write_files(&layout, shared, healthz)?;
        let mut node = RealNode { layout, files, processes: Vec::new() };
        node.run(shared.isolation, logs).await?;
        Ok(node)
    }

    /// Names its processes `containerd` and `kubelet` on the first node (their logs too),
    /// `containerd-real-K` and `kubelet-real-K` on the others.
    fn process_name(&self, program: &str) -> String {
        if self.layout.index == 0 {
            program.to_string()
        } else {
            format!("{program}-{}", self.layout.name)
        }
    }

    /// Starts its containerd, then its kubelet, in its cgroup. The caller waits for Ready.
    pub(crate) async fn run(&mut self, isolation: &Arc<Isolation>, logs: &Path) -> Result<(), Error> {
        let cgroup = self.layout.cgroup().to_string();
        isolation.make_cgroup(&cgroup)?;
        isolation.make_cgroup(&format!("{cgroup}/system"))?;
        let name = self.process_name("containerd");
        let mut command = Command::new("containerd");
        isolation.enter(&mut command, &format!("{cgroup}/system"));
        command.arg("--config").arg(&self.files.containerd_config);
        self.processes.push((name.clone(), crate::spawn_logged(command, logs, &name)?));
        // The socket is on the namespace's own /run: seen through the holder's root. After a
        // power-off the killed containerd's socket file is still there: wait until one answers.
        let socket = PathBuf::from(format!("/proc/{}/root{}", isolation.holder_pid(), self.layout.containerd_socket()));
        wait_until(logs, &name, || std::os::unix::net::UnixStream::connect(&socket).is_ok()).await?;

        let name = self.process_name("kubelet");
        let mut command = Command::new(tools::program("kubelet")?);
        isolation.enter(&mut command, &format!("{cgroup}/system"));
        command
            .arg("--config")
            .arg(&self.files.kubelet_config)
            .arg("--kubeconfig")
            .arg(&self.files.kubelet_kubeconfig)
            .arg("--root-dir")
            .arg(self.layout.path("kubelet"))
            .args(["--node-ip", &self.layout.address.to_string(), "--hostname-override", &self.layout.name])
            .args(["--node-labels", &format!("{REAL_NODE_LABEL}=real"), "--v", "1"]);
        self.processes.push((name.clone(), crate::spawn_logged(command, logs, &name)?));
        Ok(())
    }

    /// Stops it as a machine loses power: its kubelet, containerd, their shims and its pods
    /// are killed at once (its cgroup), nothing is cleaned up, its files stay.
    pub(crate) fn power_off(&mut self, isolation: &Isolation) {
        for (_, p) in self.processes.iter_mut().rev() {
            p.kill();
        }
        self.processes.clear();
        isolation.kill_cgroup(self.layout.cgroup());
    }
}

/// What starting the real nodes needs of the cluster.
pub(crate) struct Context<'a> {
    pub isolation: &'a Arc<Isolation>,
    pub pki: &'a Pki,
    pub dir: &'a Path,
    pub logs: &'a Path,
    pub server: &'a str,
    pub admin: &'a kube::Client,
    pub mirrors: &'a [String],
    pub count: usize,
    pub processes: &'a mut Vec<(String, Supervised)>,
    pub forwarders: &'a mut Vec<Forwarder>,
}

/// What the real nodes' start leaves the cluster.
pub(crate) struct Started {
    /// The image registry, `127.0.0.1:<port>` on both sides.
    pub registry: String,
    pub models: ModelsRegistry,
    pub nodes: Vec<RealNode>,
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

/// A kubeconfig in the cluster's directory for one of the network namespace's components.
fn component_kubeconfig(ctx: &Context<'_>, stem: &str, user: &str) -> Result<PathBuf, Error> {
    let identity = ctx.pki.client(stem, user, None)?;
    let path = ctx.dir.join(format!("{stem}.kubeconfig"));
    crate::kubeconfig::write(&path, ctx.server, &ctx.pki.ca.cert, Credentials::Certificate(&identity), "default")?;
    Ok(path)
}

/// Starts the real nodes and what they share: the cluster's registry (with the pause image
/// pushed to it), the models registry and its blob server, CoreDNS, each node's containerd
/// and kubelet, and kube-proxy. The caller waits for the nodes to be Ready.
pub(crate) async fn start(ctx: Context<'_>) -> Result<Started, Error> {
    let isolation = ctx.isolation;
    let free_port = || crate::process::free_port().map_err(|e| Error::io(Path::new("127.0.0.1:0"), e));
    let inside = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let first = NodeLayout::real(ctx.dir, 0);

    // The registry, at the same 127.0.0.1:PORT inside and on the host.
    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let config = ctx.dir.join("registry.yml");
    std::fs::write(&config, registry::config(&ctx.dir.join("registry"), port)).map_err(|e| Error::io(&config, e))?;
    let mut command = isolation.command(registry::program()?);
    command.arg("serve").arg(&config);
    ctx.processes.push(("registry".into(), crate::spawn_logged(command, ctx.logs, "registry")?));
    ctx.forwarders
        .push(Forwarder::start(inside(port), inside(port), isolation.clone()).map_err(|e| Error::io(&config, e))?);
    crate::wait_http_ok(|| isolation.connect(inside(port)), "/v2/", "registry", ctx.logs).await?;

    // The models registry: the same storage, blob downloads redirected to the blob server
    // on the first node's address (reachable from pods and from the nodes alike).
    let blob_port = free_port()?;
    let listener = isolation
        .bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, blob_port)))
        .map_err(|e| Error::io(Path::new("the blob server's port"), e))?;
    let blobs = crate::blobs::BlobServer::start(listener, ctx.dir.join("registry"))
        .map_err(|e| Error::io(Path::new("the blob server"), e))?;
    let models_port = free_port()?;
    let models_config = ctx.dir.join("models-registry.yml");
    let blobs_url = format!("http://{}:{blob_port}", first.address);
    std::fs::write(&models_config, registry::models_config(&ctx.dir.join("registry"), models_port, &blobs_url))
        .map_err(|e| Error::io(&models_config, e))?;
    let mut command = isolation.command(registry::program()?);
    command.arg("serve").arg(&models_config);
    ctx.processes.push(("models-registry".into(), crate::spawn_logged(command, ctx.logs, "models-registry")?));
    crate::wait_http_ok(|| isolation.connect(inside(models_port)), "/v2/", "models-registry", ctx.logs).await?;
    registry::install_models_service(ctx.admin, first.address, models_port).await?;
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

    // CoreDNS on the first node's address.
    dns::install_rbac(ctx.admin).await?;
    let dns_kubeconfig = component_kubeconfig(&ctx, "coredns", dns::USER)?;
    let (health, ready) = (free_port()?, free_port()?);
    let corefile = ctx.dir.join("Corefile");
    std::fs::write(&corefile, dns::corefile(first.address, &dns_kubeconfig, health, ready))
        .map_err(|e| Error::io(&corefile, e))?;
    let mut command = isolation.command(tools::program("coredns")?);
    command.arg("-conf").arg(&corefile);
    ctx.processes.push(("coredns".into(), crate::spawn_logged(command, ctx.logs, "coredns")?));

    // The nodes, then kube-proxy: the namespace's, in the cluster's cgroup, not a node's.
    let shared = Shared {
        isolation,
        pki: ctx.pki,
        server: ctx.server,
        registry: &address,
        mirrors: ctx.mirrors,
        sandbox_image: &sandbox_image,
        dns: first.address,
    };
    let mut nodes = Vec::new();
    for index in 0..ctx.count {
        nodes.push(RealNode::start(index, ctx.dir, ctx.logs, &shared).await?);
    }
    let proxy_kubeconfig = component_kubeconfig(&ctx, "kube-proxy", "system:kube-proxy")?;
    let proxy_config = write_file(
        ctx.dir.join("kube-proxy-config.json"),
        &json_text(&kube_proxy_config(&first, &proxy_kubeconfig, free_port()?, free_port()?)),
    )?;
    let mut command = isolation.command(tools::program("kube-proxy")?);
    command.arg("--config").arg(&proxy_config).args(["--v", "1"]);
    ctx.processes.push(("kube-proxy".into(), crate::spawn_logged(command, ctx.logs, "kube-proxy")?));

    crate::wait_http_ok(|| isolation.connect(inside(ready)), "/ready", "coredns", ctx.logs).await?;
    Ok(Started { registry: address, models, nodes })
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
        let node = NodeLayout::real(Path::new("/c"), 0);
        let config = kubelet_config(&node, "local-cluster-1-0", Path::new("/c/ca.crt"), 1, node.address);
        assert_eq!(config["registerWithTaints"][0]["key"], REAL_NODE_TAINT);
        assert_eq!(config["registerWithTaints"][0]["effect"], "NoSchedule");
        assert_eq!(config["cgroupRoot"], "/local-cluster-1-0/real-0");
        let annotations = real_pods_annotations();
        let tolerations: Value =
            serde_json::from_str(annotations["scheduler.alpha.kubernetes.io/defaultTolerations"].as_str().unwrap())
                .unwrap();
        assert_eq!(tolerations[0]["key"], REAL_NODE_TAINT);
        assert_eq!(annotations["scheduler.alpha.kubernetes.io/node-selector"], format!("{REAL_NODE_LABEL}=real"));
    }

    #[test]
    fn each_real_node_has_its_own_address_bridge_pod_subnet_and_cgroup() {
        let second = NodeLayout::real(Path::new("/c"), 1);
        assert_eq!((second.name.as_str(), second.address), ("real-1", Ipv4Addr::new(10, 10, 0, 11)));
        let cni = cni_config(&second);
        assert_eq!(cni["plugins"][0]["bridge"], "cni1");
        assert_eq!(cni["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], "10.244.1.0/24");
        assert_eq!(cni["plugins"][0]["ipam"]["dataDir"], "/run/cni-ipam/real-1");
        let config =
            kubelet_config(&second, "local-cluster-1-0", Path::new("/c/ca.crt"), 1, Ipv4Addr::new(10, 10, 0, 10));
        assert_eq!(config["cgroupRoot"], "/local-cluster-1-0/real-1");
        assert_eq!(config["address"], "10.10.0.11");
        assert_eq!(config["clusterDNS"][0], "10.10.0.10", "the cluster's DNS is the first node's");
        assert_eq!(second.containerd_socket(), "/run/containerd-real-1/containerd.sock");
    }

    #[test]
    fn one_kube_proxy_routes_services_to_the_pods_of_every_node() {
        let node = NodeLayout::real(Path::new("/c"), 0);
        assert_eq!(kube_proxy_config(&node, Path::new("/k"), 1, 2)["clusterCIDR"], POD_NETWORK);
    }

    #[test]
    fn kube_proxy_writes_no_host_wide_conntrack_setting() {
        let node = NodeLayout::real(Path::new("/c"), 0);
        let config = kube_proxy_config(&node, Path::new("/k"), 1, 2);
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["conntrack"]["min"], 0);
    }
}
