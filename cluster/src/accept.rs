//! A TCP accept loop on a thread and tokio runtime of its own, so it outlives any test's
//! runtime; stopped — its listener and every connection it accepted closed — by
//! [`AcceptLoop::stop`] or on drop. The forwarders and the blob server run on it.

use std::future::Future;
use std::sync::Mutex;

pub(crate) struct AcceptLoop {
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl AcceptLoop {
    /// Accepts on `listener` until stopped; each connection is handed to `on_accept`, whose
    /// future (if it returns one) serves it; a connection it returns no future for is closed.
    pub(crate) fn start<F, Fut>(
        name: String,
        listener: std::net::TcpListener,
        on_accept: F,
    ) -> std::io::Result<AcceptLoop>
    where
        F: Fn(tokio::net::TcpStream) -> Option<Fut> + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        listener.set_nonblocking(true)?;
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            if let Some(serve) = on_accept(stream) {
                                tokio::spawn(serve);
                            }
                        }
                    }
                }
            });
            // Dropping the runtime aborts every connection's task: the connections close.
        })?;
        Ok(AcceptLoop { stop: Mutex::new(Some(stop)), thread: Mutex::new(Some(thread)) })
    }

    pub(crate) fn stop(&self) {
        if let Some(stop) = self.stop.lock().expect("stop lock").take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.lock().expect("thread lock").take() {
            let _ = thread.join();
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.stop();
    }
}
