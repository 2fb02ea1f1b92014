//! The models registry's blob server: the registry's blob files, served with byte ranges.
//!
//! Ollama's puller insists that a blob GET be answered by a redirect to another host (as its
//! own registry redirects to a CDN), then fetches large blobs in ranges. The cluster's models
//! registry (the distribution registry with its `redirect` storage middleware) redirects
//! blob downloads here, to the storage path of the blob under the registry's root.
//!
//! Tests inject the faults pulls meet ([`BlobFaults`]): a registry that stops sending (a
//! pull that makes no progress), and one that is down.

use std::convert::Infallible;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};

/// Where the distribution registry's filesystem driver keeps blobs, under its root.
const BLOBS: &str = "/docker/registry/v2/blobs/";
/// Bytes read from disk per frame.
const CHUNK: usize = 256 * 1024;

type ServeBody = BoxBody<Bytes, std::io::Error>;

/// Faults a test turns on and off.
#[derive(Debug, Default)]
pub struct BlobFaults {
    stalled: AtomicBool,
    down: AtomicBool,
}

impl BlobFaults {
    /// Bodies in flight stop sending and new downloads send nothing: a pull makes no
    /// progress, its connection stays open.
    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }

    /// Downloads in flight break and new ones are refused (a registry that is down).
    pub fn go_down(&self, on: bool) {
        self.down.store(on, Ordering::SeqCst);
    }

    fn stalled(&self) -> bool {
        self.stalled.load(Ordering::SeqCst)
    }

    fn down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }
}

/// A running blob server; stopped on drop.
pub struct BlobServer {
    pub faults: Arc<BlobFaults>,
    accept: crate::accept::AcceptLoop,
}

impl BlobServer {
    /// Serves `root` (the registry's storage root) on `listener`, on a thread and runtime of
    /// its own.
    pub fn start(listener: std::net::TcpListener, root: PathBuf) -> std::io::Result<BlobServer> {
        let faults = Arc::new(BlobFaults::default());
        let (root, shared) = (Arc::new(root), faults.clone());
        let accept = crate::accept::AcceptLoop::start("blob-server".into(), listener, move |stream| {
            if shared.down() {
                return None; // dropped: the connection is reset
            }
            let (root, faults) = (root.clone(), shared.clone());
            Some(async move {
                let service = hyper::service::service_fn(move |req| {
                    let (root, faults) = (root.clone(), faults.clone());
                    async move { Ok::<_, Infallible>(serve(&root, faults, req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            })
        })?;
        Ok(BlobServer { faults, accept })
    }

    /// Stops serving; its listener (a socket in the cluster's namespace) closes.
    pub fn stop(&self) {
        self.accept.stop();
    }
}

fn status(code: StatusCode) -> Response<ServeBody> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = code;
    response
}

/// The file a request names: a blob's `data` under the root, never a path outside it.
fn file_of(root: &Path, path: &str) -> Option<PathBuf> {
    if !path.starts_with(BLOBS) || !path.ends_with("/data") {
        return None;
    }
    let relative = Path::new(path.trim_start_matches('/'));
    relative.components().all(|c| matches!(c, Component::Normal(_))).then(|| root.join(relative))
}

/// `bytes=A-B` or `bytes=A-` of a file of `len` bytes, as (start, end exclusive).
pub fn range(header: &str, len: u64) -> Option<(u64, u64)> {
    let spec = header.strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (start, end) = spec.split_once('-')?;
    let start: u64 = start.trim().parse().ok()?;
    let end: u64 = match end.trim() {
        "" => len,
        e => e.parse::<u64>().ok()?.checked_add(1)?.min(len),
    };
    (start < end).then_some((start, end))
}

fn serve(root: &Path, faults: Arc<BlobFaults>, req: Request<Incoming>) -> Response<ServeBody> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    let Some(path) = file_of(root, req.uri().path()) else {
        return status(StatusCode::NOT_FOUND);
    };
    let Ok(mut file) = std::fs::File::open(&path) else {
        return status(StatusCode::NOT_FOUND);
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let requested = req.headers().get(http::header::RANGE).and_then(|v| v.to_str().ok()).map(|h| range(h, len));
    let (start, end, code) = match requested {
        None => (0, len, StatusCode::OK),
        Some(Some((start, end))) => (start, end, StatusCode::PARTIAL_CONTENT),
        Some(None) => return status(StatusCode::RANGE_NOT_SATISFIABLE),
    };
    let head = req.method() == Method::HEAD;
    let body: ServeBody = if head {
        Full::new(Bytes::new()).map_err(|never| match never {}).boxed()
    } else {
        if file.seek(SeekFrom::Start(start)).is_err() {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        }
        FileBody { file, remaining: end - start, faults, recheck: None }.boxed()
    };
    let mut response = Response::new(body);
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_LENGTH, (end - start).into());
    headers.insert(http::header::ACCEPT_RANGES, http::HeaderValue::from_static("bytes"));
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/octet-stream"));
    if code == StatusCode::PARTIAL_CONTENT {
        if let Ok(v) = http::HeaderValue::from_str(&format!("bytes {start}-{}/{len}", end - 1)) {
            headers.insert(http::header::CONTENT_RANGE, v);
        }
    }
    response
}

/// A file's bytes, a chunk per frame (read from the page cache: microseconds).
struct FileBody {
    file: std::fs::File,
    remaining: u64,
    faults: Arc<BlobFaults>,
    /// While stalled: when to look at the faults again.
    recheck: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        if self.faults.down() {
            return Poll::Ready(Some(Err(std::io::Error::other("the registry went down"))));
        }
        while self.faults.stalled() {
            // Look again shortly: a stall that ends resumes the body.
            let recheck =
                self.recheck.get_or_insert_with(|| Box::pin(tokio::time::sleep(std::time::Duration::from_millis(200))));
            if recheck.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.recheck = None;
        }
        let want = (self.remaining as usize).min(CHUNK);
        let mut buf = vec![0u8; want];
        match self.file.read(&mut buf) {
            Ok(0) => Poll::Ready(Some(Err(std::io::Error::other("the blob is shorter than its length")))),
            Ok(n) => {
                buf.truncate(n);
                self.remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_clamped_to_the_file_and_open_ended_ranges_run_to_its_end() {
        assert_eq!(range("bytes=0-99", 50), Some((0, 50)));
        assert_eq!(range("bytes=10-", 50), Some((10, 50)));
        assert_eq!(range("bytes=10-19", 50), Some((10, 20)));
    }

    #[test]
    fn unsatisfiable_or_multiple_ranges_are_refused() {
        assert_eq!(range("bytes=50-", 50), None);
        assert_eq!(range("bytes=0-1,4-5", 50), None);
        assert_eq!(range("items=0-1", 50), None);
    }

    #[test]
    fn only_blob_files_under_the_root_are_served() {
        let root = Path::new("/r");
        assert_eq!(
            file_of(root, "/docker/registry/v2/blobs/sha256/ab/abc/data"),
            Some(PathBuf::from("/r/docker/registry/v2/blobs/sha256/ab/abc/data"))
        );
        assert_eq!(file_of(root, "/docker/registry/v2/blobs/../../../etc/passwd/data"), None);
        assert_eq!(file_of(root, "/docker/registry/v2/repositories/x/_manifests/data"), None);
        assert_eq!(file_of(root, "/etc/passwd"), None);
    }
}
