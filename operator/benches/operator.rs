//! Operator benchmark (`make bench-operator`): 1,000 ModelOrchestras × 4 applications
//! through the real operator binary against the loopback kube-testserver.
//!
//! Reports: time from creating all CRs until every one is applied and has status, API
//! requests per CR, the operator's peak RSS; then a steady state of resyncs: reconciles,
//! writes per no-op reconcile and CPU. Targets: converge ≤ 60 s, peak RSS ≤ 100 MiB,
//! 0 writes per no-op reconcile. Sizes: BENCH_CRS (1000), BENCH_APPS (4),
//! BENCH_STEADY_SECONDS (30), BENCH_RESYNC_SECONDS (10); BENCH_WRAP=heaptrack profiles it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_testserver::selector::{FieldSelector, LabelSelector};
use kube_testserver::TestServer;
use serde_json::{json, Value};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn proc_field(pid: u32, file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    fields.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + fields.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn operator_writes(server: &TestServer, since: usize) -> usize {
    server.requests()[since..]
        .iter()
        .filter(|r| r.is_write() && r.user_agent.starts_with("model-orchestra-operator"))
        .filter(|r| !r.path.contains("/leases/"))
        .count()
}

fn operator_requests(server: &TestServer, since: usize) -> usize {
    server.requests()[since..].iter().filter(|r| r.user_agent.starts_with("model-orchestra-operator")).count()
}

/// `model_orchestra_reconciles_total` from the operator's /metrics.
fn reconciles(addr: &str) -> f64 {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return 0.0;
    };
    let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.lines().filter(|l| l.starts_with("model_orchestra_reconciles_total")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("operator: benchmark");
        return;
    }
    let crs = env_num("BENCH_CRS", 1000);
    let apps = env_num("BENCH_APPS", 4);
    let steady = Duration::from_secs(env_num("BENCH_STEADY_SECONDS", 30));
    let resync = env_num("BENCH_RESYNC_SECONDS", 10);

    let server = TestServer::start().expect("kube-testserver");
    let dir = std::env::temp_dir().join(format!("mo-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, "default").unwrap();
    {
        let mut store = server.store();
        let crd_type = store.find_type("apiextensions.k8s.io", "v1", "customresourcedefinitions").unwrap().clone();
        let crd = serde_json::to_value(model_orchestra::crd::crd()).unwrap();
        store.create(&crd_type, "", crd, "bench").unwrap();
    }

    // BENCH_WRAP runs the operator under a profiler, e.g. BENCH_WRAP=heaptrack.
    let binary = env!("CARGO_BIN_EXE_model-orchestra-operator");
    let mut command = match std::env::var("BENCH_WRAP").ok().filter(|w| !w.is_empty()) {
        Some(wrapper) => {
            let mut c = Command::new(wrapper);
            c.arg(binary);
            c
        }
        None => Command::new(binary),
    };
    let mut child = command
        .args(["run", "--claim-unlabeled", "--metrics-addr", "127.0.0.1:0", "--log-format", "json"])
        .args(["--resync-seconds", &resync.to_string(), "--identity", "bench"])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn,model_orchestra_operator=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("operator binary");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    // Wait until it leads (its watches start right after).
    let mut metrics_addr = String::new();
    loop {
        let v = rx.recv_timeout(Duration::from_secs(30)).expect("operator starts");
        if v["message"] == "starting" {
            metrics_addr = v["metrics"].as_str().unwrap_or_default().to_string();
        }
        if v["message"] == "leading" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));

    let mark = server.requests().len();
    let mo_type = server.store().find_type("models.titanml.co", "v1alpha1", "modelorchestras").unwrap().clone();
    let started = Instant::now();
    {
        let mut store = server.store();
        for i in 0..crs {
            let applications: serde_json::Map<String, Value> =
                (0..apps).map(|a| (format!("app{a}"), json!({"readerConfig": {"modelName": format!("org/model-{a}"), "device": "cpu"}}))).collect();
            let cr = json!({"apiVersion": "models.titanml.co/v1alpha1", "kind": "ModelOrchestra", "metadata": {"name": format!("mo-{i:04}")}, "spec": {"applications": applications}});
            store.create(&mo_type, "default", cr, "bench").unwrap();
        }
    }
    let converged = loop {
        let done = {
            let store = server.store();
            let (items, _) = store.list(&mo_type, Some("default"), &LabelSelector::default(), &FieldSelector::default());
            items.iter().filter(|cr| cr["status"]["appliedHash"].is_string() && cr["status"]["observedGeneration"] == cr["metadata"]["generation"]).count()
                as u64
        };
        if done == crs {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(600) {
            panic!("not converged after 600 s: {done}/{crs}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let converge_requests = operator_requests(&server, mark);
    let converge_writes = operator_writes(&server, mark);
    let peak_converge = proc_field(pid, "status", "VmHWM:");

    // Steady state: no CR changes; every resync reconciles every CR.
    std::thread::sleep(Duration::from_secs(2));
    let mark = server.requests().len();
    let cpu_before = cpu_ticks(pid);
    let reconciles_before = reconciles(&metrics_addr);
    std::thread::sleep(steady);
    let cpu = (cpu_ticks(pid) - cpu_before) as f64 / 100.0;
    let steady_reconciles = (reconciles(&metrics_addr) - reconciles_before) as u64;
    let steady_writes = operator_writes(&server, mark);
    let steady_requests = operator_requests(&server, mark);
    let peak = proc_field(pid, "status", "VmHWM:");
    let rss = proc_field(pid, "status", "VmRSS:");

    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();

    println!("operator benchmark: {crs} CRs x {apps} applications (loopback kube-testserver)");
    println!("  converge all:             {:.2} s   (target <= 60 s)", converged.as_secs_f64());
    println!("  API requests per CR:      {:.1}  (writes per CR: {:.1})", converge_requests as f64 / crs as f64, converge_writes as f64 / crs as f64);
    println!("  peak RSS after converge:  {:.1} MiB", peak_converge as f64 / 1024.0);
    println!("  steady state {} s, resync {} s ({} no-op reconciles):", steady.as_secs(), resync, steady_reconciles);
    println!("    writes:                 {steady_writes}   (per no-op reconcile: {:.3}; target 0)", steady_writes as f64 / steady_reconciles.max(1) as f64);
    println!("    API requests:           {steady_requests} (leases and reads)");
    println!("    operator CPU:           {cpu:.2} s   ({:.2} ms per reconcile)", cpu * 1000.0 / steady_reconciles.max(1) as f64);
    println!("  peak RSS overall:         {:.1} MiB (current {:.1} MiB; target <= 100 MiB)", peak as f64 / 1024.0, rss as f64 / 1024.0);
}
