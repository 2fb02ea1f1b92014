//! The status page in a real browser: Debian's headless Chromium, driven over its DevTools
//! protocol, signs in with a key and shows one CR's application ready and another's
//! Unschedulable message (from the real scheduler, via the real operator). A screenshot is
//! kept at `target/http-api-status-page.png`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::http_support::*;
use crate::support::*;
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// Chromium, headless, on a loopback DevTools port; killed on drop with its profile dir.
struct Chromium {
    child: Child,
    _profile: TempDir,
    ws_url: String,
}

impl Chromium {
    fn start() -> Option<Chromium> {
        let program = ["chromium", "chromium-browser"]
            .into_iter()
            .find(|p| Command::new(p).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok())?;
        let profile = TempDir::new("chromium");
        let mut child = Command::new(program)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--ignore-certificate-errors",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1200,900",
            ])
            .arg(format!("--user-data-dir={}", profile.0.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split_whitespace().find(|w| w.starts_with("ws://127.0.0.1:")) {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        let ws_url = rx.recv_timeout(Duration::from_secs(30)).expect("chromium's DevTools address");
        Some(Chromium { child, _profile: profile, ws_url })
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A DevTools session on one page.
struct Page {
    socket: Socket,
    session: String,
    next_id: u64,
}

impl Page {
    async fn open(browser: &Chromium) -> Page {
        let (socket, _) = tokio_tungstenite::connect_async(&browser.ws_url).await.expect("DevTools websocket");
        let mut page = Page { socket, session: String::new(), next_id: 0 };
        let target = page.call("Target.createTarget", json!({"url": "about:blank"})).await;
        let attached =
            page.call("Target.attachToTarget", json!({"targetId": target["targetId"], "flatten": true})).await;
        page.session = attached["sessionId"].as_str().unwrap().to_string();
        page
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.socket.send(Message::text(message.to_string())).await.expect("send");
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .expect("a DevTools answer")
                .expect("open")
                .expect("a frame");
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    async fn eval(&mut self, expression: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true})).await;
        r["result"]["value"].clone()
    }

    async fn wait_for(&mut self, what: &str, expression: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.eval(expression).await;
            if !v.is_null() && v != json!(false) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the page never showed {what}: {}",
                self.eval("document.body && document.body.innerText").await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn unschedulable_cr(name: &str) -> Value {
    json!({
        "apiVersion": "models.titanml.co/v1alpha1",
        "kind": "ModelOrchestra",
        "metadata": {"name": name},
        "spec": {"applications": {"big": {
            "readerConfig": {"modelName": "org/huge", "device": "cuda"},
            "resources": {"limits": {"nvidia.com/gpu": 64}}
        }}}
    })
}

#[tokio::test]
async fn the_status_page_shows_a_ready_application_and_anothers_unschedulable_message_in_chromium() {
    let Some(browser) = Chromium::start() else {
        panic!("chromium is not installed: scripts/install-test-deps.sh installs it");
    };
    let cluster = Cluster::start("api_page").await;
    install_api_rbac(&cluster).await;
    let key = create_key(&cluster, &key_name(&cluster, "a"), &[&cluster.namespace], "view");
    let server = ApiServer::start(&cluster, &[]).await;
    let _operator = Operator::start(&cluster, OperatorOptions { identity: "op-page", ..Default::default() }).await;
    cluster
        .apply_value(
            &{
                let mut c = cr("served", "chat");
                c["metadata"]["namespace"] = json!(cluster.namespace);
                c
            },
            "modelorchestras",
            "models.titanml.co",
            "v1alpha1",
        )
        .await;
    let mut stuck = unschedulable_cr("stuck");
    stuck["metadata"]["namespace"] = json!(cluster.namespace);
    cluster.apply_value(&stuck, "modelorchestras", "models.titanml.co", "v1alpha1").await;
    cluster.wait_reason("served", "Ready").await;
    cluster.wait_reason("stuck", "Unschedulable").await;

    let mut page = Page::open(&browser).await;
    page.call("Page.enable", json!({})).await;
    page.call("Page.navigate", json!({"url": server.url()})).await;
    page.wait_for("the sign-in form", "document.getElementById('key') !== null").await;
    page.eval(&format!(
        "document.getElementById('key').value = {}; document.querySelector('form').submit(); true",
        serde_json::to_string(&key).unwrap()
    ))
    .await;
    page.wait_for("the ModelOrchestras", "document.querySelector('article.mo') !== null").await;

    let served = page
        .eval(
            "(() => { const a = document.querySelector('article[data-name=served]'); const row = a && a.querySelector('tr[data-app=chat]');
              return a && { ready: a.dataset.ready, badge: a.querySelector('.badge').textContent, row: row && row.dataset.ready, cell: row && row.cells[1].textContent }; })()",
        )
        .await;
    assert_eq!(served, json!({"ready": "true", "badge": "Ready", "row": "true", "cell": "ready"}));
    let stuck = page
        .eval(
            "(() => { const a = document.querySelector('article[data-name=stuck]'); const m = a && a.querySelector('p.message');
              return a && { ready: a.dataset.ready, badge: a.querySelector('.badge').textContent, reason: m && m.dataset.reason, message: m && m.textContent }; })()",
        )
        .await;
    assert_eq!(stuck["ready"], "false");
    assert_eq!(stuck["badge"], "Unschedulable");
    let message = stuck["message"].as_str().unwrap_or_default();
    assert!(message.contains("Insufficient nvidia.com/gpu"), "the scheduler's message: {stuck}");
    assert_eq!(page.eval("document.getElementById('key-name').textContent").await, json!(key_name(&cluster, "a")));

    let shot = page.call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true})).await;
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    let path = target_dir().join("http-api-status-page.png");
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}
