//! The whole `render` process (`make bench`, after the in-process render benches): the
//! release binary rendering the sample CR, 50 and 1,000 applications, each run `RUNS`
//! times; prints the median wall time and the median peak RSS (the child's getrusage), and
//! the cost per application between 50 and 1,000.
//!
//! `BENCH_RENDER_RUNS` sets the number of runs (default 11).

#[path = "support/crs.rs"]
mod crs;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One run: wall time from spawn to exit, and the child's peak RSS in KiB.
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4, which also gives its rusage")]
fn run(binary: &str, file: &std::path::Path) -> (Duration, u64) {
    let start = Instant::now();
    let child = Command::new(binary)
        .args(["render", "-f"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the operator binary");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child just spawned (not yet reaped: `child` is never waited).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "render failed on {file:?}");
    (elapsed, usage.ru_maxrss as u64)
}

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; a filter that is not ours means another bench was asked for.
    if std::env::args().skip(1).any(|a| !a.starts_with('-') && !"render_process".contains(a.as_str())) {
        return;
    }
    let binary = env!("CARGO_BIN_EXE_model-orchestra-operator");
    let runs: usize = std::env::var("BENCH_RENDER_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(11);
    let dir = std::env::temp_dir().join(format!("mo-render-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cases =
        [("sample", crs::sample(), 0), ("apps_50", crs::many_apps(50), 50), ("apps_1000", crs::many_apps(1000), 1000)];
    println!("render process ({runs} runs each, median): wall time, peak RSS");
    let mut per_app = Vec::new();
    for (name, text, apps) in cases {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, text).expect("write the CR");
        run(binary, &file); // warm the page cache
        let (times, rss): (Vec<Duration>, Vec<u64>) = (0..runs).map(|_| run(binary, &file)).unzip();
        let (time, rss) = (median(times), median(rss));
        println!("render_process/{name:<10} {:>8.1} ms {:>8.1} MiB", time.as_secs_f64() * 1000.0, rss as f64 / 1024.0);
        if apps > 0 {
            per_app.push((apps, time, rss));
        }
    }
    if let [(a, ta, ra), (b, tb, rb)] = per_app[..] {
        let n = (b - a) as f64;
        println!(
            "render_process/per_application ({a} -> {b}): {:.3} ms, {:.1} KiB",
            (tb.as_secs_f64() - ta.as_secs_f64()) * 1000.0 / n,
            (rb as f64 - ra as f64) / n
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
