//! The cluster's own mount and network namespace, and its own cgroup subtree.
//!
//! Everything the cluster runs — etcd, the API server, the controllers, kwok, and on a real
//! node containerd, the kubelet, kube-proxy and every pod — lives in one mount + network
//! namespace made for this cluster, so pod addresses, the node's address and its bridge
//! never exist in the host's namespace and nothing the cluster starts can dial an address
//! of the host. The host reaches the cluster only through loopback forwarders
//! ([`crate::forward`]), and a test reaches into it only through [`Isolation::connect`] /
//! [`Isolation::bind`] (sockets made by a thread that entered the network namespace).
//!
//! A holder process (`config/holder.sh`, under `unshare --mount --net`) makes the namespaces
//! and holds them while its standard input is open. This program keeps the other end: when
//! the cluster stops, or this program dies however it dies, the holder kills every process
//! of the cluster and removes its cgroups, and the namespaces — their mounts, network
//! devices, routes and iptables rules — go with their last process. Every process the
//! cluster starts joins the cgroup subtree `local-cluster-<pid>-<n>` (the kubelet's
//! `cgroupRoot` on a real node), which is how the holder finds all of them, pods and
//! containerd's shims included, and how the cluster's memory is read.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Error;

/// The holder script, written into the cluster's directory.
const HOLDER: &str = include_str!("../config/holder.sh");
/// The prefix of every cluster's cgroup subtree (stale ones are swept at the next start).
const CGROUP_PREFIX: &str = "local-cluster-";
const CGROUP_FS: &str = "/sys/fs/cgroup";

/// What cannot be done on this machine, said once, naming what is missing.
fn unavailable(what: &str, fix: &str) -> Error {
    Error::Start {
        component: "the cluster's namespaces".into(),
        message: format!("{what}; {fix}"),
        log: PathBuf::new(),
        tail: String::new(),
    }
}

/// Requests to the thread that lives in the cluster's network namespace.
enum Request {
    Connect(SocketAddr, mpsc::Sender<std::io::Result<TcpStream>>),
    Socket(SocketAddr, mpsc::Sender<std::io::Result<tokio::net::TcpSocket>>),
    Bind(SocketAddr, mpsc::Sender<std::io::Result<TcpListener>>),
}

/// The cluster's namespaces and cgroup subtree.
pub struct Isolation {
    holder: Mutex<Option<Child>>,
    holder_stdin: Mutex<Option<ChildStdin>>,
    holder_pid: u32,
    mnt: Mutex<Option<File>>,
    net: Mutex<Option<File>>,
    /// `local-cluster-<pid>-<n>`: the same path in every cgroup hierarchy.
    cgroup_root: String,
    /// The node's address inside the namespace (the API server advertises it).
    pub node_address: Ipv4Addr,
    /// The network namespace, as `readlink /proc/<pid>/ns/net` prints it.
    pub net_namespace: String,
    dir: PathBuf,
    requests: Mutex<Option<mpsc::Sender<Request>>>,
    inside: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Isolation {
    /// Makes the namespaces (the holder says `ready` once they are set up) with the node's
    /// address on a veth pair inside and the `unreachable` ranges routed nowhere.
    /// The cluster's directory is removed after the teardown unless `keep_dir`.
    pub fn create(
        dir: &Path,
        keep_dir: bool,
        node_address: Ipv4Addr,
        unreachable: &[&str],
    ) -> Result<Isolation, Error> {
        sweep_stale_cgroups(dir);
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cgroup_root = format!("{CGROUP_PREFIX}{}-{seq}", std::process::id());
        let script = dir.join("holder.sh");
        std::fs::write(&script, HOLDER).map_err(|e| Error::io(&script, e))?;
        let log_path = dir.join("logs/holder.log");
        let log = File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--net", "--propagation", "private", "--", "bash"])
            .arg(&script)
            .arg(&cgroup_root)
            .arg(node_address.to_string())
            .arg(if keep_dir { Path::new("-") } else { dir })
            .args(unreachable)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        // Its own process group: a Ctrl-C meant for `make cluster` reaches the cluster
        // through its owner, which stops it in order; the holder cleans up last.
        command.process_group(0);
        let mut holder = command.spawn().map_err(|e| Error::Start {
            component: "the cluster's namespaces".into(),
            message: format!("unshare: {e} (util-linux)"),
            log: log_path.clone(),
            tail: String::new(),
        })?;
        let holder_pid = holder.id();
        let stdin = holder.stdin.take().expect("piped");
        crate::process::register_holder(holder_pid, stdin.as_raw_fd());
        let mut stdout = BufReader::new(holder.stdout.take().expect("piped"));
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let _ = holder.wait();
            crate::process::forget_holder(holder_pid);
            return Err(Error::Start {
                component: "the cluster's namespaces".into(),
                message: "the holder did not set them up".into(),
                tail: crate::tail(&log_path, 20),
                log: log_path,
            });
        }
        let open = |ns: &str| {
            let path = PathBuf::from(format!("/proc/{holder_pid}/ns/{ns}"));
            File::open(&path).map_err(|e| Error::io(&path, e))
        };
        let (mnt, net) = (open("mnt")?, open("net")?);
        let net_namespace = std::fs::read_link(format!("/proc/{holder_pid}/ns/net"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let (requests, inside) = start_inside_thread(&net)?;
        Ok(Isolation {
            holder: Mutex::new(Some(holder)),
            holder_stdin: Mutex::new(Some(stdin)),
            holder_pid,
            mnt: Mutex::new(Some(mnt)),
            net: Mutex::new(Some(net)),
            cgroup_root,
            node_address,
            net_namespace,
            dir: dir.to_path_buf(),
            requests: Mutex::new(Some(requests)),
            inside: Mutex::new(Some(inside)),
        })
    }

    /// The cgroup subtree's name (`local-cluster-<pid>-<n>`), the same in every hierarchy.
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    /// The holder's PID (every process in the cluster's namespaces descends from the
    /// cluster's owner, not from it).
    pub fn holder_pid(&self) -> u32 {
        self.holder_pid
    }

    /// A command that runs inside the namespaces, in the cluster's cgroup `system`, with the
    /// cluster's directory as its working directory.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        self.enter(&mut command, "system");
        command
    }

    /// Makes `command` enter the namespaces and the cluster's cgroup `group` (which must
    /// exist: `system` does) when it starts.
    pub fn enter(&self, command: &mut Command, group: &str) {
        let fd = |m: &Mutex<Option<File>>| m.lock().expect("ns lock").as_ref().map_or(-1, |f| f.as_raw_fd());
        let (mnt, net) = (fd(&self.mnt), fd(&self.net));
        let procs: Vec<CString> = hierarchies()
            .into_iter()
            .map(|h| cstring(&h.join(&self.cgroup_root).join(group).join("cgroup.procs")))
            .collect();
        let cwd = cstring(&self.dir);
        // SAFETY: only async-signal-safe calls (setns, chdir, open, write, close) on data
        // prepared before the fork.
        unsafe {
            command.pre_exec(move || {
                if mnt < 0 || net < 0 {
                    return Err(std::io::Error::other("the cluster's namespaces are gone"));
                }
                if libc::setns(net, libc::CLONE_NEWNET) != 0 || libc::setns(mnt, libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Entering a mount namespace moves to its root directory.
                if libc::chdir(cwd.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                for path in &procs {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // `0` moves the writer itself.
                    let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                    if written != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Makes a cgroup `group` under the cluster's subtree in every hierarchy.
    pub fn make_cgroup(&self, group: &str) -> Result<(), Error> {
        for h in hierarchies() {
            let parent = h.join(&self.cgroup_root);
            let path = parent.join(group);
            std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(value) = std::fs::read_to_string(parent.join(file)) {
                    std::fs::write(path.join(file), value).map_err(|e| Error::io(&path.join(file), e))?;
                }
            }
        }
        Ok(())
    }

    /// Kills every process of the cgroup `group` under the cluster's subtree (frozen first,
    /// so none forks meanwhile) and removes it: the holder's teardown, for one subtree.
    pub fn kill_cgroup(&self, group: &str) {
        sweep(&self.dir, &format!("{}/{group}", self.cgroup_root));
    }

    /// The memory the cluster's processes use (the memory cgroup of its subtree), in bytes.
    pub fn memory_bytes(&self, group: Option<&str>) -> Option<u64> {
        let mut path = PathBuf::from(CGROUP_FS).join("memory").join(&self.cgroup_root);
        if let Some(g) = group {
            path = path.join(g);
        }
        std::fs::read_to_string(path.join("memory.usage_in_bytes")).ok()?.trim().parse().ok()
    }

    /// PIDs of every process of the cluster (its cgroup subtree).
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        if let Some(h) = hierarchies().into_iter().find(|h| h.ends_with("pids") || h.ends_with("memory")) {
            collect_pids(&h.join(&self.cgroup_root), &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// A TCP connection made inside the network namespace (e.g. to the API server on the
    /// namespace's loopback).
    pub fn connect(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let (tx, rx) = mpsc::channel();
        self.send(Request::Connect(addr, tx))?;
        rx.recv().map_err(|_| gone())?
    }

    /// A socket of the network namespace, not yet connected, for an address like `addr`.
    /// A socket belongs to the namespace it was made in, wherever it connects from: the
    /// connect (which may wait for a handshake, or for seconds when the peer is gone) runs
    /// on the caller's runtime, so one slow connect never holds up another.
    pub fn socket_for(&self, addr: SocketAddr) -> std::io::Result<tokio::net::TcpSocket> {
        let (tx, rx) = mpsc::channel();
        self.send(Request::Socket(addr, tx))?;
        rx.recv().map_err(|_| gone())?
    }

    /// A TCP connection made from inside the network namespace without holding up the
    /// namespace's thread: the socket is made there ([`Isolation::socket_for`]), the
    /// connect runs on the caller's runtime and gives up after `within`.
    pub async fn connect_async(
        self: &Arc<Self>,
        addr: SocketAddr,
        within: Duration,
    ) -> std::io::Result<tokio::net::TcpStream> {
        let isolation = self.clone();
        let socket = tokio::task::spawn_blocking(move || isolation.socket_for(addr))
            .await
            .map_err(|_| std::io::Error::other("the socket's task panicked"))??;
        tokio::time::timeout(within, socket.connect(addr))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("connect to {addr}")))?
    }

    /// A listener bound inside the network namespace (e.g. a stand-in for a pod address).
    pub fn bind(&self, addr: SocketAddr) -> std::io::Result<TcpListener> {
        let (tx, rx) = mpsc::channel();
        self.send(Request::Bind(addr, tx))?;
        rx.recv().map_err(|_| gone())?
    }

    fn send(&self, request: Request) -> std::io::Result<()> {
        self.requests.lock().expect("requests lock").as_ref().ok_or_else(gone)?.send(request).map_err(|_| gone())
    }

    /// Runs `program args` inside the namespaces and waits for it; an error quotes its output.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, Error> {
        let out = self.command(program).args(args).stdin(Stdio::null()).output().map_err(|e| Error::Start {
            component: program.into(),
            message: e.to_string(),
            log: PathBuf::new(),
            tail: String::new(),
        })?;
        if !out.status.success() {
            return Err(Error::Start {
                component: format!("{program} {}", args.join(" ")),
                message: format!("{} {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
                log: PathBuf::new(),
                tail: String::new(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Lets the holder tear everything down (every process of the cluster killed, its
    /// cgroups removed), and waits for it. The namespaces go with their last process.
    pub fn stop(&self) {
        // Nothing of ours may keep the namespaces alive.
        drop(self.requests.lock().expect("requests lock").take());
        if let Some(thread) = self.inside.lock().expect("inside lock").take() {
            let _ = thread.join();
        }
        drop(self.mnt.lock().expect("ns lock").take());
        drop(self.net.lock().expect("ns lock").take());
        drop(self.holder_stdin.lock().expect("stdin lock").take());
        let Some(mut holder) = self.holder.lock().expect("holder lock").take() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = holder.try_wait() {
                crate::process::forget_holder(self.holder_pid);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = holder.kill();
        let _ = holder.wait();
        crate::process::forget_holder(self.holder_pid);
        sweep(&self.dir, &self.cgroup_root);
    }
}

impl Drop for Isolation {
    fn drop(&mut self) {
        self.stop();
    }
}

fn gone() -> std::io::Error {
    std::io::Error::other("the cluster's network namespace is gone")
}

fn cstring(path: &Path) -> CString {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).expect("a path without NUL")
}

/// The thread that entered the network namespace and makes sockets there.
fn start_inside_thread(net: &File) -> Result<(mpsc::Sender<Request>, std::thread::JoinHandle<()>), Error> {
    let fd = net.try_clone().map_err(|e| Error::io(Path::new("/proc/self/ns/net"), e))?;
    let (tx, rx) = mpsc::channel::<Request>();
    let (ready_tx, ready_rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("cluster-netns".into())
        .spawn(move || {
            // SAFETY: setns on this thread only (a network namespace is per thread).
            let entered = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } == 0;
            drop(fd);
            let _ = ready_tx.send(entered.then_some(()).ok_or_else(std::io::Error::last_os_error));
            if !entered {
                return;
            }
            for request in rx {
                match request {
                    Request::Connect(addr, reply) => {
                        let _ = reply.send(TcpStream::connect_timeout(&addr, Duration::from_secs(5)));
                    }
                    Request::Socket(addr, reply) => {
                        let socket = if addr.is_ipv4() {
                            tokio::net::TcpSocket::new_v4()
                        } else {
                            tokio::net::TcpSocket::new_v6()
                        };
                        let _ = reply.send(socket);
                    }
                    Request::Bind(addr, reply) => {
                        let _ = reply.send(TcpListener::bind(addr));
                    }
                }
            }
        })
        .map_err(|e| Error::io(Path::new("thread"), e))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok((tx, thread)),
        Ok(Err(e)) => Err(Error::io(Path::new("setns(network namespace)"), e)),
        Err(_) => Err(Error::io(Path::new("setns(network namespace)"), std::io::Error::other("thread died"))),
    }
}

/// Every cgroup hierarchy mounted under /sys/fs/cgroup (v1 controllers, named hierarchies,
/// and a v2 one in hybrid mode).
pub fn hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(CGROUP_FS) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("cgroup.procs").exists() && !p.is_symlink()).collect();
    out.sort();
    out
}

fn collect_pids(dir: &Path, into: &mut Vec<u32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        into.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_pids(&e.path(), into);
            }
        }
    }
}

/// Whether a cluster's namespaces can be made here; one error naming what is missing.
pub(crate) fn check_machine() -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(unavailable(
            "the local cluster runs in namespaces of its own, which needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)",
            "run it as root, e.g. in a VM or a privileged container",
        ));
    }
    for (program, package) in [("unshare", "util-linux"), ("ip", "iproute2"), ("bash", "bash")] {
        if which(program).is_none() {
            return Err(unavailable(
                &format!("`{program}` is not installed"),
                &format!("apt-get install {package} (scripts/install-test-deps.sh does)"),
            ));
        }
    }
    if hierarchies().is_empty() {
        return Err(unavailable("no cgroup hierarchy is mounted under /sys/fs/cgroup", "mount cgroupfs"));
    }
    Ok(())
}

/// A program on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Tears down the cgroup subtrees of clusters whose owner is gone (killed before its
/// holder could clean up, or whose holder was killed).
fn sweep_stale_cgroups(dir: &Path) {
    let mut stale = std::collections::BTreeSet::new();
    for h in hierarchies() {
        let Ok(entries) = std::fs::read_dir(&h) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(CGROUP_PREFIX) else { continue };
            let owner = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                stale.insert(name);
            }
        }
    }
    for root in stale {
        sweep(dir, &root);
    }
}

/// Runs the holder's teardown for `root` (no namespaces needed).
fn sweep(dir: &Path, root: &str) {
    let script = dir.join("holder.sh");
    if !script.exists() && std::fs::write(&script, HOLDER).is_err() {
        return;
    }
    let _ = Command::new("bash").arg(&script).args(["--sweep", root]).stdin(Stdio::null()).status();
}
