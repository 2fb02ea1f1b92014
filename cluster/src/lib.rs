//! A local Kubernetes cluster made of the real upstream programs — etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler — with kwok playing the kubelets of fake CPU and
//! GPU nodes, and real nodes beside them (containerd, runc, the kubelet, kube-proxy, cluster
//! DNS: [`node`]) whose pods really run. All of it lives in a mount and network namespace
//! of its own ([`isolation`]), so no pod or node address ever exists in the host's
//! namespace; the host reaches the API server and the cluster's registry on 127.0.0.1
//! through forwarders ([`forward`]). Ports are ephemeral, files in a temp dir; every
//! process is stopped by PID when the [`Cluster`] is dropped or this program exits (see
//! [`process`]), and whatever outlives that (pods, containerd's shims) by the namespace's
//! holder.
//!
//! The API server runs as a production cluster's would in the ways an operator notices:
//! RBAC authorization, Pod Security admission, `OwnerReferencesPermissionEnforcement` (as
//! OpenShift enables it), a structural-schema and CEL-checking apiextensions server, and an
//! audit log of every request ([`audit`]). The controller manager runs each controller
//! under its own ServiceAccount, as kubeadm clusters do. A default StorageClass and a
//! provisioner of hostPath volumes in the cluster's directory ([`storage`]) let
//! PersistentVolumeClaims bind.
//!
//! Used by the e2e tests ([`Cluster::shared`]: one cluster per test binary) and by
//! `make cluster` (the `local-cluster` binary).

mod accept;
pub mod audit;
pub mod blobs;
pub mod dns;
pub mod forward;
pub mod isolation;
pub mod kubeconfig;
pub mod node;
pub mod nodes;
pub mod ollama;
pub mod olm_v0;
mod operator_image;
pub mod pki;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod storage;
pub mod tools;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;

use forward::Forwarder;
use isolation::Isolation;
use kubeconfig::Credentials;
pub use nodes::NodeSpec;
use pki::{CertPem, Pki};
use process::Supervised;
use storage::Provisioner;

/// Why the cluster could not start (or a request to it failed).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{name} is missing ({path}): {}", fix_for(name), path = path.display())]
    MissingProgram { name: String, path: PathBuf },
    #[error("{path}: {source}", path = path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("certificates: {0}")]
    Pki(String),
    #[error("{component} did not start: {message}\n--- last lines of {log} ---\n{tail}", log = log.display())]
    Start { component: String, message: String, log: PathBuf, tail: String },
    #[error("the cluster's API: {0}")]
    Kube(#[from] kube::Error),
    #[error("timed out after {0:?} waiting until {1}")]
    Timeout(Duration, String),
}

/// How to get a missing program.
fn fix_for(name: &str) -> &'static str {
    if name.contains("static") {
        "run `make static` (make test does)"
    } else if ["containerd", "runc", "docker-registry", "iptables", "CNI"].iter().any(|p| name.starts_with(p)) {
        "apt-get install containerd runc containernetworking-plugins iptables docker-registry (scripts/install-test-deps.sh does)"
    } else {
        "run scripts/build-go-tools.sh (make test does)"
    }
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_path_buf(), source }
    }
}

/// The addresses kwok gives pods. Routed nowhere in the cluster's namespace (a request to
/// a fake pod fails at once); a test that stands in for a fake pod puts the range on the
/// namespace's loopback ([`Cluster::serve_fake_pod_addresses`]).
pub const POD_CIDR: &str = "10.128.0.0/10";
/// kwok's nodes' addresses, routed nowhere too.
pub const KWOK_NODE_RANGE: &str = "10.127.0.0/16";
/// The address of the node, inside the cluster's namespace: the API server advertises it
/// (the `kubernetes` Service's endpoint), a real node's kubelet serves on it.
pub const NODE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 10);
/// The name of the first real node (`real-K` are the others).
pub const REAL_NODE_NAME: &str = "real-0";

/// What to start.
#[derive(Debug, Clone)]
pub struct Options {
    /// kwok's fake nodes.
    pub nodes: Vec<NodeSpec>,
    /// Real nodes (0 to [`node::MAX_REAL_NODES`]): a containerd and a kubelet each; with
    /// the first, kube-proxy, cluster DNS and the cluster's registry.
    pub real_nodes: usize,
    /// How long a node may be silent before it is `NotReady` and its pods are evicted, in
    /// seconds: the controller manager's `--node-monitor-grace-period` and the API server's
    /// default not-ready and unreachable tolerations. None keeps Kubernetes' own (50 s, then
    /// 300 s): a test that stops a node sets it shorter.
    pub node_failure_seconds: Option<u32>,
    /// Public registries a real node pulls from the cluster's registry instead (as an
    /// air-gapped cluster's mirrors): an image `ghcr.io/org/x:1` is `org/x:1` there.
    pub mirrored_registries: Vec<String>,
    /// Client rate limit of the controller manager and the scheduler (requests per second);
    /// raise it for benchmarks that create thousands of objects.
    pub controller_qps: u32,
    /// Keep the cluster's directory (logs, audit log, etcd data) after it stops.
    pub keep_dir: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            nodes: nodes::default_nodes(),
            real_nodes: 1,
            node_failure_seconds: None,
            mirrored_registries: vec!["docker.io".into(), "ghcr.io".into(), "quay.io".into()],
            controller_qps: 100,
            keep_dir: false,
        }
    }
}

impl Options {
    /// Fake nodes only: no real node, no registry (benchmarks that create thousands of pods).
    pub fn fake_nodes_only() -> Options {
        Options { real_nodes: 0, ..Options::default() }
    }
}

/// A running cluster. Dropping it stops every process it started (by PID) and removes its
/// directory.
pub struct Cluster {
    dir: PathBuf,
    keep_dir: bool,
    /// `https://127.0.0.1:<port>`
    pub server: String,
    pub ca_pem: String,
    /// Kubeconfig of the admin (group `system:masters`).
    pub kubeconfig: PathBuf,
    pub audit_log: PathBuf,
    pub nodes: Vec<NodeSpec>,
    /// The real nodes' names, `real-0` first.
    pub real_nodes: Vec<String>,
    /// `127.0.0.1:<port>`, the same from the host and inside: the registry real nodes pull
    /// from (None without real nodes).
    pub registry: Option<String>,
    /// The models registry Ollama pulls from (None without real nodes).
    pub models_registry: Option<node::ModelsRegistry>,
    admin: CertPem,
    /// In start order; stopped in reverse, after the real nodes'.
    processes: Mutex<Vec<(String, Supervised)>>,
    /// Each real node's containerd and kubelet (none while it is stopped).
    real: Mutex<Vec<node::RealNode>>,
    /// Stopped before the processes.
    provisioner: Mutex<Option<Provisioner>>,
    /// The host's ways in (the API server's, the registry's): stopped after the processes.
    forwarders: Mutex<Vec<Forwarder>>,
    /// Stopped last: the holder kills what is left (pods, shims) and removes the cgroups.
    isolation: Arc<Isolation>,
    /// The API server's program and arguments, to start it again the same way.
    api_server_command: (std::ffi::OsString, Vec<std::ffi::OsString>),
}

const START_TIMEOUT: Duration = Duration::from_secs(90);

impl Cluster {
    /// The cluster of this program, started on first use and stopped when the program exits:
    /// one per test binary (tests take a namespace each).
    pub fn shared() -> &'static Cluster {
        static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
        match SHARED.get_or_init(|| Cluster::start_blocking(Options::default()).map_err(|e| e.to_string())) {
            Ok(cluster) => cluster,
            Err(e) => panic!("the local cluster did not start: {e}"),
        }
    }

    /// [`Cluster::start`] from synchronous code, or from within an async runtime (it runs on
    /// a thread and runtime of its own).
    pub fn start_blocking(options: Options) -> Result<Cluster, Error> {
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::io(Path::new("a tokio runtime"), e))?;
            runtime.block_on(Cluster::start(options))
        })
        .join()
        .unwrap_or_else(|_| {
            Err(Error::Start {
                component: "the cluster".into(),
                message: "its start panicked".into(),
                log: PathBuf::new(),
                tail: String::new(),
            })
        })
    }

    /// Starts the cluster's namespaces, etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler and kwok, and the real nodes; creates kwok's nodes; returns once every
    /// node is Ready and schedulable.
    pub async fn start(options: Options) -> Result<Cluster, Error> {
        let started = Instant::now();
        if options.real_nodes > node::MAX_REAL_NODES {
            return Err(Error::Start {
                component: "real nodes".into(),
                message: format!(
                    "{} real nodes asked for; a cluster has at most {}",
                    options.real_nodes,
                    node::MAX_REAL_NODES
                ),
                log: PathBuf::new(),
                tail: String::new(),
            });
        }
        // Before anything starts: what is missing is one error naming it.
        isolation::check_machine()?;
        if options.real_nodes > 0 {
            node::check_programs()?;
        }
        let dir = temp_dir()?;
        process::remove_at_exit(&dir);
        let pki = Pki::create(&dir.join("pki"))?;
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| Error::io(&logs, e))?;
        let port = || process::free_port().map_err(|e| Error::io(Path::new("127.0.0.1:0"), e));
        // Declared first, dropped last: whatever fails below, the holder tears down.
        let isolation =
            Arc::new(Isolation::create(&dir, options.keep_dir, NODE_ADDRESS, &[POD_CIDR, KWOK_NODE_RANGE])?);
        let mut forwarders = Vec::new();
        let mut processes = Vec::new();
        let spawn = |program: &str| -> Result<Command, Error> { Ok(isolation.command(tools::program(program)?)) };

        // etcd: its data dir needs no fsync (the cluster is thrown away).
        let (etcd_port, peer_port) = (port()?, port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = spawn("etcd")?;
        etcd.args(["--name", "local", "--data-dir"])
            .arg(dir.join("etcd"))
            .args(["--listen-client-urls", &etcd_url, "--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("local={peer_url}")])
            .args(["--unsafe-no-fsync", "--log-level", "warn", "--quota-backend-bytes", "8589934592"]);
        processes.push(("etcd".to_string(), spawn_logged(etcd, &logs, "etcd")?));
        let inside = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        wait_http_ok(|| isolation.connect(inside(etcd_port)), "/health", "etcd", &logs).await?;

        // The API server's certificate names every way it is reached: loopback (the host,
        // through the forwarder, and the components), the node's address and the
        // `kubernetes` Service (pods).
        let service_names =
            ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"];
        pki.serving_for(
            "apiserver",
            &service_names,
            &[IpAddr::V4(NODE_ADDRESS), IpAddr::V4(node::KUBERNETES_SERVICE_IP)],
        )?;
        // How it authenticates to a real node's kubelet (logs, exec, port-forward).
        pki.client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", Some("system:masters"))?;
        let audit_policy = dir.join("audit-policy.yaml");
        std::fs::write(&audit_policy, include_str!("../config/audit-policy.yaml"))
            .map_err(|e| Error::io(&audit_policy, e))?;
        let audit_log = dir.join("audit.log");
        // Free on the host: the forwarder listens there, the API server at the same port inside.
        let api_port = port()?;
        let server = format!("https://127.0.0.1:{api_port}");
        let mut apiserver = spawn("kube-apiserver")?;
        apiserver
            .args(["--etcd-servers", &etcd_url, "--bind-address", "0.0.0.0"])
            .args(["--advertise-address", &NODE_ADDRESS.to_string()])
            .args(["--secure-port", &api_port.to_string()])
            .arg("--cert-dir")
            .arg(dir.join("apiserver"))
            .arg(format!("--tls-cert-file={}", pki.path("apiserver.crt").display()))
            .arg(format!("--tls-private-key-file={}", pki.path("apiserver.key").display()))
            .arg(format!("--client-ca-file={}", pki.path("ca.crt").display()))
            .arg(format!("--service-account-key-file={}", pki.path("sa.pub").display()))
            .arg(format!("--service-account-signing-key-file={}", pki.path("sa.key").display()))
            .args(["--service-account-issuer", &server])
            .args(["--service-cluster-ip-range", node::SERVICE_CIDR, "--allow-privileged=true"])
            .args(["--authorization-mode", "Node,RBAC"])
            // The defaults (PodSecurity, ServiceAccount, NamespaceLifecycle, …); the check
            // OpenShift enables (setting blockOwnerDeletion needs `update` on the owner's
            // finalizers); a node's own writes only (NodeRestriction); and the namespace
            // annotations that pin a namespace's pods to the real node (node::real_pods_annotations).
            .args([
                "--enable-admission-plugins",
                "OwnerReferencesPermissionEnforcement,NodeRestriction,PodNodeSelector,PodTolerationRestriction",
            ])
            .arg(format!("--kubelet-client-certificate={}", pki.path("apiserver-kubelet-client.crt").display()))
            .arg(format!("--kubelet-client-key={}", pki.path("apiserver-kubelet-client.key").display()))
            .arg(format!("--kubelet-certificate-authority={}", pki.path("ca.crt").display()))
            // Else it resolves the node's name with the host's resolver, unreachable from inside.
            .args(["--kubelet-preferred-address-types", "InternalIP"])
            .arg(format!("--audit-policy-file={}", audit_policy.display()))
            .arg(format!("--audit-log-path={}", audit_log.display()))
            .args(["--audit-log-format", "json", "--audit-log-mode", "blocking", "--audit-log-maxsize", "0"])
            .args(["--profiling=false", "--v", "1"]);
        if let Some(seconds) = options.node_failure_seconds {
            apiserver.arg(format!("--default-not-ready-toleration-seconds={seconds}"));
            apiserver.arg(format!("--default-unreachable-toleration-seconds={seconds}"));
        }
        let api_server_command =
            (apiserver.get_program().to_owned(), apiserver.get_args().map(|a| a.to_owned()).collect());
        processes.push(("kube-apiserver".to_string(), spawn_logged(apiserver, &logs, "kube-apiserver")?));
        let host = SocketAddr::from((Ipv4Addr::LOCALHOST, api_port));
        forwarders.push(
            Forwarder::start(host, inside(api_port), isolation.clone())
                .map_err(|e| Error::io(Path::new(&server), e))?,
        );

        let admin = pki.client("admin", "kubernetes-admin", Some("system:masters"))?;
        let kubeconfig = dir.join("admin.kubeconfig");
        kubeconfig::write(&kubeconfig, &server, &pki.ca.cert, Credentials::Certificate(&admin), "default")?;
        let client = client_for(&kubeconfig).await?;
        wait_ready(&client, &logs).await?;
        let token = storage::install(&client).await?;
        let provisioner_kubeconfig = dir.join("volume-provisioner.kubeconfig");
        kubeconfig::write(&provisioner_kubeconfig, &server, &pki.ca.cert, Credentials::Token(&token), "default")?;
        let provisioner =
            Provisioner::start(provisioner_kubeconfig, dir.join("volumes"), logs.join("volume-provisioner.log"))?;

        let component_kubeconfig = |stem: &str, user: &str, group: Option<&str>| -> Result<PathBuf, Error> {
            let cert = pki.client(stem, user, group)?;
            let path = dir.join(format!("{stem}.kubeconfig"));
            kubeconfig::write(&path, &server, &pki.ca.cert, Credentials::Certificate(&cert), "default")?;
            Ok(path)
        };
        let qps = options.controller_qps.to_string();
        let burst = (options.controller_qps * 2).to_string();
        let mut kcm = spawn("kube-controller-manager")?;
        kcm.arg("--kubeconfig")
            .arg(component_kubeconfig("controller-manager", "system:kube-controller-manager", None)?)
            .args(["--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=true"])
            .arg(format!("--service-account-private-key-file={}", pki.path("sa.key").display()))
            .arg(format!("--root-ca-file={}", pki.path("ca.crt").display()))
            .arg(format!("--cluster-signing-cert-file={}", pki.path("ca.crt").display()))
            .arg(format!("--cluster-signing-key-file={}", pki.path("ca.key").display()))
            .args(["--kube-api-qps", &qps, "--kube-api-burst", &burst, "--v", "1"]);
        if let Some(seconds) = options.node_failure_seconds {
            kcm.arg(format!("--node-monitor-grace-period={seconds}s"));
        }
        processes.push(("kube-controller-manager".to_string(), spawn_logged(kcm, &logs, "kube-controller-manager")?));

        let mut scheduler = spawn("kube-scheduler")?;
        scheduler.arg("--kubeconfig").arg(component_kubeconfig("scheduler", "system:kube-scheduler", None)?).args([
            "--leader-elect=false",
            "--secure-port=0",
            "--kube-api-qps",
            &qps,
            "--kube-api-burst",
            &burst,
            "--v",
            "1",
        ]);
        processes.push(("kube-scheduler".to_string(), spawn_logged(scheduler, &logs, "kube-scheduler")?));

        let stages = dir.join("kwok-stages.yaml");
        std::fs::write(&stages, include_str!("../config/kwok-stages.yaml")).map_err(|e| Error::io(&stages, e))?;
        let kwok_home = dir.join("kwok-home");
        std::fs::create_dir_all(&kwok_home).map_err(|e| Error::io(&kwok_home, e))?;
        let mut kwok = spawn("kwok")?;
        kwok.arg("--kubeconfig")
            .arg(component_kubeconfig("kwok", "kwok", Some("system:masters"))?)
            .arg("--config")
            .arg(&stages)
            .arg(format!("--manage-nodes-with-annotation-selector={}=fake", nodes::KWOK_NODE_ANNOTATION))
            .args(["--node-lease-duration-seconds", "40", "--cidr", POD_CIDR, "--node-ip", "10.127.0.1"])
            // kwok reads ~/.kwok first: keep it away from the user's home.
            .env("HOME", &kwok_home)
            .env("KWOK_WORKDIR", &kwok_home);
        processes.push(("kwok".to_string(), spawn_logged(kwok, &logs, "kwok")?));

        let (mut registry, mut models_registry, mut real) = (None, None, Vec::new());
        if options.real_nodes > 0 {
            let started = node::start(node::Context {
                isolation: &isolation,
                pki: &pki,
                dir: &dir,
                logs: &logs,
                server: &server,
                admin: &client,
                mirrors: &options.mirrored_registries,
                count: options.real_nodes,
                processes: &mut processes,
                forwarders: &mut forwarders,
            })
            .await?;
            registry = Some(started.registry);
            models_registry = Some(started.models);
            real = started.nodes;
        }
        let real_nodes = real.iter().map(|n| n.layout.name.clone()).collect();

        let cluster = Cluster {
            dir,
            keep_dir: options.keep_dir,
            server,
            ca_pem: pki.ca.cert.clone(),
            kubeconfig,
            audit_log,
            nodes: options.nodes.clone(),
            real_nodes,
            registry,
            models_registry,
            admin,
            processes: Mutex::new(processes),
            real: Mutex::new(real),
            provisioner: Mutex::new(Some(provisioner)),
            forwarders: Mutex::new(forwarders),
            isolation,
            api_server_command,
        };
        cluster.create_nodes(&client).await?;
        cluster.wait_schedulable(&client).await?;
        // Pods need their namespace's `default` ServiceAccount (the controller manager's
        // serviceaccount controller makes it): wait for the first one to know it runs.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        cluster
            .wait_for("the default ServiceAccount exists", || async {
                accounts.get_opt("default").await.ok().flatten().map(drop)
            })
            .await?;
        if options.keep_dir {
            process::forget_dir(&cluster.dir);
        }
        eprintln!(
            "local-cluster: {} up in {:.1} s (logs and audit log in {})",
            cluster.server,
            started.elapsed().as_secs_f64(),
            cluster.dir.display()
        );
        Ok(cluster)
    }

    /// The cluster's directory: `logs/`, `audit.log`, `pki/`, kubeconfigs, `volumes/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the provisioner makes the default StorageClass's volumes (one directory each).
    pub fn volumes_dir(&self) -> PathBuf {
        self.dir.join("volumes")
    }

    /// Whether the volume provisioner (a thread of this program) runs.
    pub fn provisioner_running(&self) -> bool {
        self.provisioner.lock().expect("provisioner lock").as_ref().is_some_and(Provisioner::is_running)
    }

    /// An admin client (group `system:masters`).
    pub async fn client(&self) -> Result<Client, Error> {
        client_for(&self.kubeconfig).await
    }

    /// The admin's certificate, for clients that are not kube-rs.
    pub fn admin_certificate(&self) -> &CertPem {
        &self.admin
    }

    /// Writes a kubeconfig that authenticates as the ServiceAccount `namespace/name` with a
    /// fresh bound token, so its RBAC is what the API server enforces. `server` overrides
    /// the API server address (e.g. a [`proxy::FaultProxy`]'s).
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        path: &Path,
        server: Option<&str>,
    ) -> Result<(), Error> {
        let token = kubeconfig::service_account_token(&self.client().await?, namespace, name).await?;
        kubeconfig::write(path, server.unwrap_or(&self.server), &self.ca_pem, Credentials::Token(&token), namespace)
    }

    /// The audit log: every request the API server answered so far.
    pub fn audit(&self) -> audit::AuditLog {
        audit::AuditLog::new(&self.audit_log)
    }

    /// Runs the cluster's own `kubectl` (the pinned version) as the admin.
    pub fn kubectl(&self) -> Command {
        let mut c = Command::new(tools::bin_dir().join("kubectl"));
        c.env("KUBECONFIG", &self.kubeconfig);
        c
    }

    /// PIDs of the running components, by name (the real nodes' last).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let processes = self.processes.lock().expect("processes lock");
        let real = self.real.lock().expect("real nodes lock");
        let nodes = real.iter().flat_map(|n| n.processes.iter());
        processes.iter().chain(nodes).map(|(n, p)| (n.clone(), p.pid())).collect()
    }

    /// Stops the real node `name` as a machine loses power: its kubelet, its containerd,
    /// their shims and its pods are killed at once, nothing is cleaned up. The API server
    /// hears nothing more from it: after the node failure time
    /// ([`Options::node_failure_seconds`]) it is `NotReady`, then its pods are evicted.
    /// What the network namespace runs (kube-proxy, CoreDNS, the registries) stays up.
    pub fn stop_real_node(&self, name: &str) -> Result<(), Error> {
        let mut real = self.real.lock().expect("real nodes lock");
        let node = real.iter_mut().find(|n| n.layout.name == name).ok_or_else(|| unknown_real_node(name))?;
        node.power_off(&self.isolation);
        Ok(())
    }

    /// Starts a stopped real node again from its files: its containerd finds the containers
    /// it had, its kubelet registers again and reconciles its pods with the API server's.
    /// Returns once the node is Ready and schedulable.
    pub async fn start_real_node(&self, name: &str) -> Result<(), Error> {
        let mut node = {
            let mut real = self.real.lock().expect("real nodes lock");
            let at = real.iter().position(|n| n.layout.name == name).ok_or_else(|| unknown_real_node(name))?;
            real.remove(at)
        };
        let started =
            if node.processes.is_empty() { node.run(&self.isolation, &self.dir.join("logs")).await } else { Ok(()) };
        self.real.lock().expect("real nodes lock").push(node);
        started?;
        let client = self.client().await?;
        self.wait_nodes_schedulable(&client, &[name.to_string()]).await
    }

    /// Restarts the API server as an upgrade of the control plane does: told to stop
    /// (SIGTERM, up to 5 s), then started again with the same flags on the same port and
    /// etcd. Returns once it is ready. Meanwhile every client's requests and watches fail;
    /// what is running (pods, kube-proxy's rules) goes on. Its log goes on in the same file.
    pub async fn restart_api_server(&self) -> Result<(), Error> {
        let logs = self.dir.join("logs");
        {
            let mut processes = self.processes.lock().expect("processes lock");
            let at = processes.iter().position(|(name, _)| name == "kube-apiserver").expect("an API server");
            processes[at].1.stop(Duration::from_secs(5));
            let (program, args) = &self.api_server_command;
            let mut command = self.isolation.command(program);
            command.args(args);
            processes[at].1 = spawn_logged_appending(command, &logs, "kube-apiserver")?;
        }
        wait_ready(&self.client().await?, &logs).await
    }

    /// The memory a real node's processes and pods use (its cgroup), in bytes.
    pub fn real_node_memory_bytes(&self, name: &str) -> Option<u64> {
        self.isolation.memory_bytes(Some(name))
    }

    /// Stops the provisioner, then every component (reverse start order), the forwarders,
    /// and last the namespaces' holder, which kills what is left (pods, containerd's shims)
    /// and removes the cluster's cgroups; then removes the directory.
    pub fn stop(&self) {
        if let Some(mut provisioner) = self.provisioner.lock().expect("provisioner lock").take() {
            provisioner.stop();
        }
        for node in self.real.lock().expect("real nodes lock").iter_mut() {
            while let Some((_, mut p)) = node.processes.pop() {
                p.stop(Duration::from_secs(5));
            }
        }
        let mut processes = self.processes.lock().expect("processes lock");
        while let Some((_, mut p)) = processes.pop() {
            p.stop(Duration::from_secs(5));
        }
        let mut forwarders = self.forwarders.lock().expect("forwarders lock");
        while let Some(mut f) = forwarders.pop() {
            f.stop();
        }
        if let Some(models) = &self.models_registry {
            models.blobs.stop();
        }
        self.isolation.stop();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The cluster's namespaces and cgroups: to run a program inside, or to make a socket
    /// there.
    pub fn isolation(&self) -> &Arc<Isolation> {
        &self.isolation
    }

    /// Makes `namespace` (created if missing) one whose pods run on the real node: annotated
    /// with its node selector and a toleration of its taint ([`node::real_pods_annotations`]).
    pub async fn run_pods_for_real(&self, namespace: &str) -> Result<(), Error> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client().await?);
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "annotations": node::real_pods_annotations()},
        });
        api.patch(namespace, &PatchParams::apply("local-cluster").force(), &Patch::Apply(&object)).await?;
        Ok(())
    }

    /// Puts kwok's pod range on the loopback of the cluster's network namespace, so a test
    /// can stand in for a fake pod: a listener it binds there (with [`Isolation::bind`]) on
    /// `0.0.0.0:PORT` answers at every fake pod's address, e.g. to the API server's service
    /// proxy. Nothing of this exists in the host's namespace.
    pub fn serve_fake_pod_addresses(&self) -> Result<(), Error> {
        let present =
            || self.isolation.run("ip", &["-4", "addr", "show", "dev", "lo"]).is_ok_and(|a| a.contains(POD_CIDR));
        if present() {
            return Ok(());
        }
        // Another test may add it at the same moment: present afterwards is what counts.
        match self.isolation.run("ip", &["addr", "add", POD_CIDR, "dev", "lo"]) {
            Err(_) if present() => Ok(()),
            other => other.map(drop),
        }
    }

    async fn create_nodes(&self, client: &Client) -> Result<(), Error> {
        let api: Api<Node> = Api::all(client.clone());
        for node in &self.nodes {
            let object = node.object();
            let params = PatchParams::apply("local-cluster").force();
            api.patch(&node.name, &params, &Patch::Apply(&object)).await?;
            // The status on create may be dropped: set capacity through the subresource.
            let status = serde_json::json!({"apiVersion": "v1", "kind": "Node", "status": object["status"]});
            api.patch_status(&node.name, &params, &Patch::Apply(&status)).await?;
        }
        Ok(())
    }

    /// Every node Ready (kwok's, and the real node's kubelet) and without the not-ready
    /// taint (node lifecycle controller).
    async fn wait_schedulable(&self, client: &Client) -> Result<(), Error> {
        let names: Vec<String> =
            self.nodes.iter().map(|n| n.name.clone()).chain(self.real_nodes.iter().cloned()).collect();
        self.wait_nodes_schedulable(client, &names).await
    }

    async fn wait_nodes_schedulable(&self, client: &Client, names: &[String]) -> Result<(), Error> {
        let api: Api<Node> = Api::all(client.clone());
        self.wait_for("every node is Ready and schedulable", || async {
            let list = api.list(&Default::default()).await.ok()?;
            let ready = |n: &Node| {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                let tainted = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
                ready && !tainted
            };
            names
                .iter()
                .all(|name| list.items.iter().any(|n| n.metadata.name.as_ref() == Some(name) && ready(n)))
                .then_some(())
        })
        .await
    }

    async fn wait_for<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let start = Instant::now();
        loop {
            if let Some(v) = f().await {
                return Ok(v);
            }
            self.check_alive()?;
            if start.elapsed() > START_TIMEOUT {
                return Err(Error::Timeout(START_TIMEOUT, what.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// An error naming the first component that exited, with its log's tail.
    fn check_alive(&self) -> Result<(), Error> {
        let mut processes = self.processes.lock().expect("processes lock");
        let mut real = self.real.lock().expect("real nodes lock");
        for (name, p) in processes.iter_mut().chain(real.iter_mut().flat_map(|n| n.processes.iter_mut())) {
            if let Some(status) = p.exited() {
                return Err(exited(name, &self.dir.join("logs"), status));
            }
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn unknown_real_node(name: &str) -> Error {
    Error::Start {
        component: format!("real node {name}"),
        message: "no real node has this name (they are real-0, real-1, …)".into(),
        log: PathBuf::new(),
        tail: String::new(),
    }
}

fn exited(name: &str, logs: &Path, status: std::process::ExitStatus) -> Error {
    let log = logs.join(format!("{name}.log"));
    Error::Start { component: name.to_string(), message: format!("exited ({status})"), tail: tail(&log, 30), log }
}

fn temp_dir() -> Result<PathBuf, Error> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("local-cluster-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// Spawns a component with stdout and stderr in `logs/<name>.log`.
pub(crate) fn spawn_logged(command: Command, logs: &Path, name: &str) -> Result<Supervised, Error> {
    let path = logs.join(format!("{name}.log"));
    let log = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    spawn_with_log(command, log, path, name)
}

/// [`spawn_logged`] for a program started again: its log goes on after the last run's.
fn spawn_logged_appending(command: Command, logs: &Path, name: &str) -> Result<Supervised, Error> {
    let path = logs.join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new().append(true).create(true).open(&path).map_err(|e| Error::io(&path, e))?;
    spawn_with_log(command, log, path, name)
}

fn spawn_with_log(mut command: Command, log: std::fs::File, path: PathBuf, name: &str) -> Result<Supervised, Error> {
    let log2 = log.try_clone().map_err(|e| Error::io(&path, e))?;
    command.stdin(Stdio::null()).stdout(log).stderr(log2);
    process::spawn(command).map_err(|e| Error::Start {
        component: name.into(),
        message: e.to_string(),
        log: path.clone(),
        tail: String::new(),
    })
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Polls a plain-HTTP endpoint (reached by `connect`) until it answers 200.
pub(crate) async fn wait_http_ok(
    connect: impl Fn() -> std::io::Result<std::net::TcpStream>,
    path: &str,
    component: &str,
    logs: &Path,
) -> Result<(), Error> {
    let start = Instant::now();
    loop {
        let ok = connect().ok().and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
            let mut buf = String::new();
            s.read_to_string(&mut buf).ok()?;
            (buf.split_whitespace().nth(1) == Some("200")).then_some(())
        });
        if ok.is_some() {
            return Ok(());
        }
        if start.elapsed() > START_TIMEOUT {
            let log = logs.join(format!("{component}.log"));
            return Err(Error::Start {
                component: component.into(),
                message: format!("{path} never answered 200"),
                tail: tail(&log, 30),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the API server's /readyz is ok (its post-start hooks, RBAC bootstrap
/// included, have run).
async fn wait_ready(client: &Client, logs: &Path) -> Result<(), Error> {
    let start = Instant::now();
    loop {
        let request = http::Request::get("/readyz").body(Vec::new()).expect("a valid request");
        match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            _ if start.elapsed() > START_TIMEOUT => {
                let log = logs.join("kube-apiserver.log");
                return Err(Error::Start {
                    component: "kube-apiserver".into(),
                    message: "/readyz never became ok".into(),
                    tail: tail(&log, 30),
                    log,
                });
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Result<Client, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kube(kube::Error::InferKubeconfig(e)))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kube(kube::Error::InferKubeconfig(e)))?;
    Ok(Client::try_from(config)?)
}
