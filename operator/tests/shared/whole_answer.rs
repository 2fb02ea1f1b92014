//! One request of a steady load through the model gateway, read to its end: shared by the
//! e2e tests under faults and `make bench-faults`, so that both count a lost request alike.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// `POST path` at `at` with a JSON body.
pub fn json_post(at: SocketAddr, path: &str, body: &Value) -> http::Request<Full<Bytes>> {
    http::Request::post(format!("http://{at}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body).expect("JSON"))))
        .expect("a request")
}

/// A request without its whole answer.
#[derive(Debug)]
pub struct Lost {
    pub said: String,
    /// Its connection never opened: nothing was sent, and sending it again is always safe
    /// (what a client that retries connect failures does).
    pub unsent: bool,
}

impl Lost {
    fn sent(said: String) -> Lost {
        Lost { said, unsent: false }
    }
}

/// Asks `model` through the gateway at `at`, a streamed `/api/generate` (Ollama's API) or a
/// whole `/v1/chat/completions` (OpenAI's), and reads the answer to its end: a lost request
/// is a status other than 200, a failed connection, or an answer without its end (the
/// stream's `done` line, the completion's message), each said with what it was.
pub async fn ask_whole<C>(
    client: &hyper_util::client::legacy::Client<C, Full<Bytes>>,
    at: SocketAddr,
    model: &str,
    streamed: bool,
) -> Result<(), Lost>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let (path, body) = if streamed {
        let body = json!({"model": model, "prompt": "Once upon a time", "raw": true, "stream": true,
            "options": {"temperature": 0, "seed": 0, "num_predict": 16}});
        ("/api/generate", body)
    } else {
        let body = json!({"model": model, "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]});
        ("/v1/chat/completions", body)
    };
    let response = client
        .request(json_post(at, path, &body))
        .await
        .map_err(|e| Lost { said: format!("{path}: {}", chain(&e)), unsent: e.is_connect() })?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(|e| Lost::sent(format!("{path}: cut: {}", chain(&e))))?;
    let bytes = bytes.to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    if code != 200 {
        return Err(Lost::sent(format!("{path}: {code} {text}")));
    }
    let whole = if streamed {
        let last = text.trim_end().lines().last().and_then(|l| serde_json::from_str::<Value>(l).ok());
        last.is_some_and(|l| l["done"] == true)
    } else {
        serde_json::from_str::<Value>(&text).is_ok_and(|a| a["choices"][0]["message"]["content"].is_string())
    };
    if whole {
        Ok(())
    } else {
        Err(Lost::sent(format!("{path}: an answer without its end: {text}")))
    }
}

/// An error with its causes (hyper's own says only its kind, e.g. `SendRequest`).
fn chain(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        said.push_str(": ");
        said.push_str(&e.to_string());
        cause = e.source();
    }
    said
}
