//! `drain-helper`: the small container beside Ollama in each replica that holds the replica's
//! stop until no connection to it carries an answer. Ollama's `preStop` hook is an HTTP GET
//! of `/wait-idle` here, answered once the engine's port is idle (what counts as idle is
//! `model_orchestra::drain`'s, from the kernel's socket diagnostics); Ollama is told to stop
//! only then.
//!
//! A container of its own, started after Ollama's: an init container copying a program into
//! Ollama's image (which may have no shell) would hold up every start, a wake-up's
//! included, by a container's lifecycle.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use model_orchestra::drain::{carries_an_answer, open_connections, Drain, DrainBounds, Verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

#[derive(Args)]
pub(crate) struct DrainHelperArgs {
    /// The engine's port, whose accepted connections a drain waits for.
    #[arg(long)]
    engine_port: u16,
    /// The port `/wait-idle` is served on (every address of the pod: the kubelet calls it).
    #[arg(long)]
    port: u16,
    /// Seconds a drain waits however idle (the pod leaving its Service's endpoints).
    #[arg(long, default_value_t = 5)]
    at_least: u64,
    /// Seconds after which a drain gives up, connections open or not.
    #[arg(long)]
    at_most: u64,
}

/// How often the kernel's tables are read.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// How long nothing may be open for the engine to count as idle.
const QUIET: Duration = Duration::from_secs(1);
/// How long Ollama may be silent mid-stream: it sends a streamed answer's tokens as they
/// come (many a second, even with every sequence of a busy replica decoding at once), and
/// nothing before the first, when the client has spoken last anyway.
const STREAM_GAP: Duration = Duration::from_secs(15);
/// The kernel's tables of the TCP connections of this network (the pod's): where its socket
/// diagnostics cannot be read, every open connection counts.
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];
/// The longest a request's head may be.
const MAX_HEAD: usize = 8 * 1024;

pub(crate) fn drain_helper(args: DrainHelperArgs) -> anyhow::Result<()> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: DrainHelperArgs) -> anyhow::Result<()> {
    let bounds = DrainBounds {
        at_least: Duration::from_secs(args.at_least),
        at_most: Duration::from_secs(args.at_most),
        quiet: QUIET,
        stream_gap: STREAM_GAP,
    };
    // First: the kubelet may stop the pod the moment the process starts.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM")?;
    let listen = SocketAddr::from(([0, 0, 0, 0], args.port));
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
    let waiting = Arc::new(AtomicUsize::new(0));
    // Served until the process ends: Ollama's hook may come just after this container's
    // SIGTERM.
    tokio::spawn(accept(listener, waiting.clone(), args.engine_port, bounds));
    term.recv().await;
    // The pod stops: the kubelet told every container at once, and Ollama's hook is waiting
    // here. Stay for as long as its drain (the same rule, from now), and until it has its
    // answer.
    let outcome = wait_idle(args.engine_port, bounds).await;
    while waiting.load(Ordering::SeqCst) > 0 {
        tokio::time::sleep(LOOK_EVERY).await;
    }
    println!("drain-helper: stopping: {outcome}");
    Ok(())
}

/// Answers each connection on `listener`, counting those still waiting for their answer.
async fn accept(listener: tokio::net::TcpListener, waiting: Arc<AtomicUsize>, engine_port: u16, bounds: DrainBounds) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let waiting = waiting.clone();
        waiting.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let _ = answer(stream, engine_port, bounds).await;
            waiting.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Answers one request: `GET /wait-idle` once the engine's port is idle; anything else 404.
async fn answer(mut stream: tokio::net::TcpStream, engine_port: u16, bounds: DrainBounds) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(head.split(|&b| b == b'\n').next().unwrap_or_default()).to_string();
    let (status, body) = if line.starts_with("GET /wait-idle ") {
        ("200 OK", wait_idle(engine_port, bounds).await)
    } else {
        ("404 Not Found", "only GET /wait-idle\n".to_string())
    };
    let response = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Waits until the drain's rule says stop; what it saw, in a line.
async fn wait_idle(engine_port: u16, bounds: DrainBounds) -> String {
    let mut drain = Drain::new(bounds);
    let began = Instant::now();
    let mut said = Said::default();
    loop {
        let Look { carrying, idle } = look(engine_port, bounds.stream_gap, &mut said);
        let elapsed = began.elapsed();
        let secs = elapsed.as_secs_f64();
        match drain.observe(elapsed, carrying) {
            Verdict::Wait => tokio::time::sleep(LOOK_EVERY).await,
            Verdict::Idle => {
                return format!(
                    "no connection to port {engine_port} carries an answer after {secs:.1} s ({idle} idle one(s) left open)\n"
                )
            }
            Verdict::GaveUp { open } => {
                return format!("{open} connection(s) to port {engine_port} may still carry an answer after {secs:.1} s\n")
            }
        }
    }
}

/// The connections to the engine's port now: how many may carry an answer, how many are
/// idle (left open by a client's pool).
struct Look {
    carrying: usize,
    idle: usize,
}

/// What the helper has said once already.
#[derive(Default)]
struct Said {
    no_diagnostics: bool,
    no_tables: bool,
}

fn look(engine_port: u16, stream_gap: Duration, said: &mut Said) -> Look {
    match crate::sock_diag::established_to(engine_port) {
        Ok(connections) => {
            let carrying = connections.iter().filter(|c| carries_an_answer(**c, stream_gap)).count();
            Look { carrying, idle: connections.len() - carrying }
        }
        Err(e) => {
            if !said.no_diagnostics {
                eprintln!("drain-helper: {e}; every open connection counts");
                said.no_diagnostics = true;
            }
            // Tables that cannot be read either say nothing: wait as if an answer were in
            // flight (the grace period still bounds it), rather than cut one.
            let open = open_now(engine_port).unwrap_or_else(|e| {
                if !said.no_tables {
                    eprintln!("drain-helper: {e:#}; waiting as long as the drain may");
                    said.no_tables = true;
                }
                1
            });
            Look { carrying: open, idle: 0 }
        }
    }
}

/// The connections established to `port` in this network now, from the kernel's tables
/// (IPv4 and IPv6; a kernel without IPv6 has no second table).
fn open_now(port: u16) -> anyhow::Result<usize> {
    let mut open = 0;
    for table in TABLES {
        match std::fs::read_to_string(table) {
            Ok(text) => open += open_connections(&text, port),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && table.ends_with('6') => {}
            Err(e) => return Err(e).with_context(|| format!("reading {table}")),
        }
    }
    Ok(open)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sock_diag::loopback::{accepted, ANSWER, REQUEST};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    const SHORT: DrainBounds = DrainBounds {
        at_least: Duration::ZERO,
        at_most: Duration::from_secs(30),
        quiet: Duration::from_millis(300),
        stream_gap: Duration::from_millis(500),
    };

    #[test]
    fn a_connection_a_server_accepted_is_open_until_it_is_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(open_now(port).unwrap(), 0, "a listener alone");
        let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        assert_eq!(open_now(port).unwrap(), 1, "the server's end; the client's is another port's");
        client.write_all(b"x").unwrap();
        served.read_exact(&mut [0; 1]).unwrap();
        drop(served);
        assert_eq!(open_now(port).unwrap(), 0, "closed by the server (the client's end is not the port's)");
    }

    #[tokio::test]
    async fn wait_idle_is_answered_only_once_the_engines_last_connection_has_closed() {
        let (engine_port, _client, served) = accepted();

        let helper = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = helper.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = helper.accept().await.unwrap();
            answer(stream, engine_port, SHORT).await.unwrap();
        });
        let asked = Instant::now();
        let hook = tokio::spawn(async move {
            let mut kubelet = tokio::net::TcpStream::connect(at).await.unwrap();
            kubelet.write_all(b"GET /wait-idle HTTP/1.1\r\nhost: pod\r\n\r\n").await.unwrap();
            let mut said = String::new();
            kubelet.read_to_string(&mut said).await.unwrap();
            (said, asked.elapsed())
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!hook.is_finished(), "answered while the engine still had a connection");
        drop(served);
        let (said, took) = hook.await.unwrap();
        assert!(said.starts_with("HTTP/1.1 200 OK"), "{said}");
        assert!(said.contains("no connection to port"), "{said}");
        assert!(took >= Duration::from_secs(1), "{took:?}");
    }

    #[tokio::test]
    async fn wait_idle_is_answered_while_an_answered_connection_stays_open_idle() {
        // A client's pool: asked once, answered, kept open.
        let (engine_port, mut pool, mut served) = accepted();
        pool.write_all(REQUEST).unwrap();
        served.read_exact(&mut vec![0; REQUEST.len()]).unwrap();
        served.write_all(ANSWER).unwrap();
        pool.read_exact(&mut vec![0; ANSWER.len()]).unwrap();

        let said = tokio::time::timeout(Duration::from_secs(10), wait_idle(engine_port, SHORT)).await;
        let said = said.expect("answered while the idle connection is open");
        assert!(said.contains("no connection to port"), "{said}");
        assert!(said.contains("(1 idle one(s) left open)"), "{said}");
        drop((pool, served));
    }

    #[tokio::test]
    async fn wait_idle_waits_for_a_request_the_engine_has_read_and_not_answered() {
        let (engine_port, mut client, mut served) = accepted();
        client.write_all(REQUEST).unwrap();
        served.read_exact(&mut vec![0; REQUEST.len()]).unwrap();

        let waiting = tokio::spawn(wait_idle(engine_port, SHORT));
        // Past the stream gap and the quiet time: the answer is still owed.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!waiting.is_finished(), "answered while a request was owed its answer");
        served.write_all(ANSWER).unwrap();
        let said = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("answered").unwrap();
        assert!(said.contains("(1 idle one(s) left open)"), "{said}");
        drop((client, served));
    }

    #[tokio::test]
    async fn another_path_is_not_found_and_waits_for_nothing() {
        let helper = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = helper.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _) = helper.accept().await.unwrap();
            answer(stream, 1, SHORT).await.unwrap();
        });
        let mut client = tokio::net::TcpStream::connect(at).await.unwrap();
        client.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut said = String::new();
        client.read_to_string(&mut said).await.unwrap();
        assert!(said.starts_with("HTTP/1.1 404"), "{said}");
    }
}
