//! `mo-pod`: the programs of the project's own small images, one static binary.
//!
//! - `mo-pod pause`: the pod sandbox's process (the local cluster's containerd runs it as
//!   its `sandbox_image`): it holds the pod's namespaces, reaps the children it inherits as
//!   PID 1, and exits at once on SIGTERM or SIGINT.
//! - `mo-pod serve PORT [TEXT]`: an HTTP server for tests of what a real node does:
//!   `GET /healthz` answers `ok`; any other path answers the pod's hostname and TEXT.
//! - `mo-pod get URL`: an HTTP GET (`http://host:port/path`, the host resolved as any
//!   program in the pod resolves it: cluster DNS), printing the body; exit 1 on failure.
//!   A name that does not resolve yet, a connection refused or a host not yet reachable is
//!   retried for up to 20 s, as
//!   a client of a Service that has just become ready must (kube-proxy programs it within
//!   about a second of its endpoints).
//!
//! Only the standard library and libc: the image stays a few hundred KiB.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("pause") => pause(),
        Some("serve") => serve(&args[1..]),
        Some("get") => get(&args[1..]),
        _ => {
            eprintln!("usage: mo-pod pause | serve PORT [TEXT] | get URL");
            2
        }
    };
    std::process::exit(code);
}

extern "C" fn exit_now(_: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(0) }
}

extern "C" fn reap(_: libc::c_int) {
    // SAFETY: waitpid is async-signal-safe.
    unsafe { while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {} }
}

fn on_signal(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a plain handler is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

/// As PID 1 a process ignores the signals it has no handler for: handle the ones that stop it.
fn exit_on_termination() {
    on_signal(libc::SIGTERM, exit_now);
    on_signal(libc::SIGINT, exit_now);
}

fn pause() -> i32 {
    exit_on_termination();
    on_signal(libc::SIGCHLD, reap);
    loop {
        // SAFETY: pause has no preconditions; it returns after each handled signal.
        unsafe { libc::pause() };
    }
}

fn serve(args: &[String]) -> i32 {
    exit_on_termination();
    let Some(port) = args.first().and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("mo-pod serve: a port is expected");
        return 2;
    };
    let text = args.get(1).cloned().unwrap_or_default();
    let listener = match TcpListener::bind(("0.0.0.0", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mo-pod serve: 0.0.0.0:{port}: {e}");
            return 1;
        }
    };
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default().trim().to_string();
    println!("mo-pod: serving on 0.0.0.0:{port} as {hostname}");
    for stream in listener.incoming().flatten() {
        let (hostname, text) = (hostname.clone(), text.clone());
        std::thread::spawn(move || answer(stream, &hostname, &text));
    }
    0
}

fn answer(stream: TcpStream, hostname: &str, text: &str) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The headers, unread: a GET has no body.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let body = if path == "/healthz" { "ok\n".to_string() } else { format!("{hostname} {text}\n") };
    println!("mo-pod: {} {path}", request_line.split_whitespace().next().unwrap_or("?"));
    let _ = (&stream).write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

fn get(args: &[String]) -> i32 {
    let Some(url) = args.first() else {
        eprintln!("mo-pod get: a URL is expected");
        return 2;
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match fetch(url) {
            Ok(body) => {
                print!("{body}");
                return 0;
            }
            Err(Failure::Retryable(e)) if std::time::Instant::now() < deadline => {
                eprintln!("mo-pod get {url}: {e} (retrying)");
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(Failure::Retryable(e) | Failure::Final(e)) => {
                eprintln!("mo-pod get {url}: {e}");
                return 1;
            }
        }
    }
}

enum Failure {
    /// The name does not resolve, or nothing listens yet.
    Retryable(String),
    Final(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Final(e)
    }
}

impl From<&str> for Failure {
    fn from(e: &str) -> Self {
        Failure::Final(e.to_string())
    }
}

fn fetch(url: &str) -> Result<String, Failure> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let target = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    let addr = target
        .to_socket_addrs()
        .map_err(|e| Failure::Retryable(format!("resolving {target}: {e}")))?
        .next()
        .ok_or(Failure::Retryable(format!("{target} has no address")))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
        let message = format!("{addr}: {e}");
        if matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::HostUnreachable) {
            Failure::Retryable(message)
        } else {
            Failure::Final(message)
        }
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).map_err(|e| e.to_string())?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        return Err(Failure::Final(format!("HTTP {status}: {body}")));
    }
    Ok(body.to_string())
}
