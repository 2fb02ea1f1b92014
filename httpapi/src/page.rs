//! The status page at `/`: the ModelOrchestras a key can see, rendered on the server as
//! plain HTML (no script, nothing loaded from elsewhere). A person signs in with a key once;
//! the page keeps it in an HttpOnly, SameSite=Strict cookie that only reads accept.

use std::fmt::Write;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;
use kube::api::{DynamicObject, ListParams};
use kube::Api;
use model_orchestra_api::ApiVersion;
use serde::Deserialize;

use crate::auth::{Caller, COOKIE};
use crate::error::ApiError;
use crate::state::Shared;
use crate::status::{ApplicationSummary, StatusSummary};

/// `&`, `<`, `>`, `"` and `'` as entities: every value from the cluster goes through this.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn page(title: &str, refresh: bool, body: &str) -> Html<String> {
    let meta_refresh = if refresh { "<meta http-equiv=\"refresh\" content=\"10\">" } else { "" };
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{meta_refresh}<title>{}</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body>{body}</body></html>\n",
        escape(title)
    ))
}

fn sign_in(message: Option<&str>) -> Html<String> {
    let notice =
        message.map(|m| format!("<p class=\"notice bad\" id=\"sign-in-error\">{}</p>", escape(m))).unwrap_or_default();
    page(
        "model-orchestra: sign in",
        false,
        &format!(
            "<main class=\"sign-in\"><h1>model-orchestra</h1><p>Sign in with an API key to see your ModelOrchestras.</p>{notice}\
             <form method=\"post\" action=\"/login\"><label for=\"key\">API key</label>\
             <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"off\" required>\
             <button type=\"submit\">Sign in</button></form>\
             <p class=\"hint\">No key? An administrator creates one with <code>model-orchestra-operator api-key create</code>.</p></main>"
        ),
    )
}

/// `GET /`: the sign-in form, or the status of every ModelOrchestra in the key's namespaces.
pub(crate) async fn index(request: Request) -> Response {
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return sign_in(None).into_response();
    };
    let namespaces = caller.record.namespaces.clone();
    let lists = futures::future::join_all(namespaces.iter().map(|ns| {
        let api: Api<DynamicObject> = Api::namespaced_with(caller.client.clone(), ns, &ApiVersion::STORAGE.resource());
        async move { api.list(&ListParams::default()).await.map_err(ApiError::from) }
    }))
    .await;
    let mut body = String::new();
    let _ = write!(
        body,
        "<header><h1>model-orchestra</h1><div class=\"who\">key <strong id=\"key-name\">{}</strong> \
         (<code>{}</code>)<form method=\"post\" action=\"/logout\"><button type=\"submit\">Sign out</button></form></div></header><main>",
        escape(&caller.record.name),
        escape(&caller.record.user())
    );
    if namespaces.is_empty() {
        body.push_str("<p class=\"notice\">This key names no namespace.</p>");
    }
    for (ns, list) in namespaces.iter().zip(lists) {
        let _ = write!(body, "<section class=\"namespace\" data-namespace=\"{0}\"><h2>{0}</h2>", escape(ns));
        match list {
            Err(e) => {
                let _ = write!(body, "<p class=\"notice bad\">{}: {}</p>", escape(e.reason), escape(&e.message));
            }
            Ok(list) if list.items.is_empty() => body.push_str("<p class=\"notice\">No ModelOrchestras.</p>"),
            Ok(list) => {
                let mut items: Vec<StatusSummary> = list.items.iter().map(StatusSummary::of).collect();
                items.sort_by(|a, b| a.name.cmp(&b.name));
                for s in &items {
                    render_cr(&mut body, s);
                }
            }
        }
        body.push_str("</section>");
    }
    let _ = write!(
        body,
        "</main><footer>Updated {} (every 10 s) · <a href=\"/api/v1/openapi.json\">API</a></footer>",
        escape(&k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
    );
    page("model-orchestra", true, &body).into_response()
}

fn phase_class(phase: &str) -> &'static str {
    match phase {
        "Ready" | "Promoted" => "good",
        "Failed" => "bad",
        _ => "wait",
    }
}

fn render_cr(out: &mut String, s: &StatusSummary) {
    let (badge, class) = if s.ready {
        ("Ready".to_string(), "good")
    } else {
        let reason = s.reason.clone().unwrap_or_else(|| "Pending".into());
        let class = match reason.as_str() {
            "ApplicationsNotReady" | "Verifying" | "Pending" => "wait",
            _ => "bad",
        };
        (reason, class)
    };
    let _ = write!(
        out,
        "<article class=\"mo\" id=\"mo-{ns}-{name}\" data-name=\"{name}\" data-ready=\"{ready}\"><div class=\"mo-head\"><h3>{name}</h3>\
         <span class=\"badge {class}\" data-reason=\"{badge}\">{badge}</span></div>",
        ns = escape(&s.namespace),
        name = escape(&s.name),
        ready = s.ready,
        badge = escape(&badge),
    );
    let mut facts = Vec::new();
    if let Some(l) = &s.line {
        facts.push(format!("line <b>{}</b>", escape(l)));
    }
    if let Some(v) = &s.served_as {
        facts.push(format!("served as <b>{}</b>", escape(v)));
    }
    let generation = s.generation.map_or("-".into(), |g| g.to_string());
    let observed = s.observed_generation.map_or("-".into(), |g| g.to_string());
    let stale = if s.observed_generation < s.generation { " stale" } else { "" };
    facts.push(format!("<span class=\"gen{stale}\">generation {generation}, reconciled {observed}</span>"));
    if let Some(a) = &s.gateway_address {
        facts.push(format!("gateway <code>{}</code>", escape(a)));
    }
    let _ = write!(out, "<p class=\"facts\">{}</p>", facts.join(" · "));
    if let Some(m) = &s.message {
        if !s.ready {
            let _ = write!(out, "<p class=\"message {class}\" data-reason=\"{}\">{}</p>", escape(&badge), escape(m));
        }
    }
    for c in &s.conditions {
        let degraded = c["type"] == "Degraded" && c["status"] == "True";
        if degraded && c["message"].as_str() != s.message.as_deref() {
            let _ = write!(
                out,
                "<p class=\"message bad\" data-reason=\"{}\">Degraded: {}</p>",
                escape(c["reason"].as_str().unwrap_or_default()),
                escape(c["message"].as_str().unwrap_or_default())
            );
        }
    }
    if s.applications.is_empty() {
        out.push_str("<p class=\"notice\">No application status yet.</p></article>");
        return;
    }
    out.push_str(
        "<table><thead><tr><th>Application</th><th>Ready</th><th>Replicas</th><th>Model</th><th>Promotion</th></tr></thead><tbody>",
    );
    for (app, a) in &s.applications {
        render_app(out, app, a);
    }
    out.push_str("</tbody></table></article>");
}

fn render_app(out: &mut String, app: &str, a: &ApplicationSummary) {
    let ready =
        if a.ready { "<span class=\"dot good\">ready</span>" } else { "<span class=\"dot wait\">not ready</span>" };
    let phase_cell = |v: &Option<serde_json::Value>, extra: &dyn Fn(&serde_json::Value) -> String| match v {
        None => "<span class=\"muted\">—</span>".to_string(),
        Some(v) => {
            let phase = v["phase"].as_str().unwrap_or("Unknown");
            let message = v["message"].as_str().filter(|m| !m.is_empty());
            format!(
                "<span class=\"phase {}\">{}</span>{}{}",
                phase_class(phase),
                escape(phase),
                extra(v),
                message.map(|m| format!("<div class=\"small\">{}</div>", escape(m))).unwrap_or_default()
            )
        }
    };
    let model = phase_cell(&a.model, &|_| String::new());
    let promotion = phase_cell(&a.promotion, &|p| {
        let revision = p["revision"].as_str().unwrap_or_default();
        let answer = p["answer"].as_str().map(|a| format!(" answered “{}”", escape(a))).unwrap_or_default();
        format!(" <code>{}</code>{answer}", escape(&revision.chars().take(10).collect::<String>()))
    });
    // A group's members are its replicas: say so, with what it waits for and where it answers.
    let group = a
        .group
        .as_ref()
        .map(|g| {
            let message = g["message"].as_str().filter(|m| !m.is_empty());
            format!(
                " <span class=\"small\">nodes</span>{}",
                message.map(|m| format!("<div class=\"small group\">{}</div>", escape(m))).unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let address = a
        .address
        .as_deref()
        .map(|x| format!("<div class=\"small\"><code>{}</code></div>", escape(x)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<tr data-app=\"{app}\" data-ready=\"{r}\"><td>{app}{address}</td><td>{ready}</td><td>{}/{}{group}</td><td class=\"model\">{model}</td><td class=\"promotion\">{promotion}</td></tr>",
        a.ready_replicas,
        a.desired_replicas,
        app = escape(app),
        r = a.ready,
    );
}

#[derive(Deserialize)]
pub(crate) struct SignIn {
    key: String,
}

/// `POST /login`: a valid key becomes the page's cookie.
pub(crate) async fn login(
    State(state): State<Shared>,
    form: Result<Form<SignIn>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(SignIn { key })) = form else {
        return (StatusCode::BAD_REQUEST, sign_in(Some("Send the form with a key."))).into_response();
    };
    let key = key.trim();
    if state.keys.verify(key).is_none() {
        return (StatusCode::UNAUTHORIZED, sign_in(Some("That key is not valid (or was revoked)."))).into_response();
    }
    let secure = if state.secure_cookie { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={key}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// `POST /logout`: forgets the cookie.
pub(crate) async fn logout() -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("mo_api_key=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

pub(crate) async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=300")], STYLE).into_response()
}

const STYLE: &str = r#":root{--bg:#f6f7f9;--card:#fff;--ink:#1d2430;--muted:#6b7380;--good:#1a7f37;--wait:#9a6700;--bad:#cf222e;--line:#e3e6ea}
*{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--ink)}
header{display:flex;justify-content:space-between;align-items:center;padding:12px 24px;background:#1d2430;color:#fff}
header h1{font-size:18px;margin:0}header code{color:#c9d1d9}.who{display:flex;gap:12px;align-items:center}
main{max-width:1100px;margin:0 auto;padding:16px 24px}h2{font-size:16px;color:var(--muted);margin:24px 0 8px;text-transform:uppercase;letter-spacing:.05em}
.mo{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:12px 0}
.mo-head{display:flex;align-items:center;gap:12px}.mo-head h3{margin:0;font-size:18px}
.badge{border-radius:999px;padding:2px 10px;font-size:13px;font-weight:600;color:#fff}.badge.good{background:var(--good)}.badge.wait{background:var(--wait)}.badge.bad{background:var(--bad)}
.facts{color:var(--muted);margin:6px 0}.gen.stale{color:var(--wait)}
.message{border-left:4px solid var(--wait);background:#fff8e6;padding:8px 12px;margin:8px 0;white-space:pre-wrap}.message.bad{border-color:var(--bad);background:#ffebe9}
table{width:100%;border-collapse:collapse;margin-top:8px}th,td{text-align:left;padding:6px 8px;border-top:1px solid var(--line);vertical-align:top}th{font-size:13px;color:var(--muted)}
.phase,.dot{font-weight:600}.good{color:var(--good)}.wait{color:var(--wait)}.bad{color:var(--bad)}.badge.good,.badge.wait,.badge.bad{color:#fff}
.small{font-size:13px;color:var(--muted);white-space:pre-wrap}.muted{color:var(--muted)}.notice{color:var(--muted)}.notice.bad{color:var(--bad)}
footer{max-width:1100px;margin:0 auto;padding:8px 24px 24px;color:var(--muted);font-size:13px}
.sign-in{max-width:420px;margin:10vh auto;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:24px}
form{display:inline}label{display:block;font-weight:600;margin:12px 0 4px}input{width:100%;padding:8px;border:1px solid var(--line);border-radius:6px;font:inherit}
button{margin-top:12px;padding:6px 14px;border:1px solid var(--line);border-radius:6px;background:#f0f2f5;font:inherit;cursor:pointer}header button{margin:0}
.hint{color:var(--muted);font-size:13px}code{font-size:13px}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_from_the_cluster_is_shown_as_text() {
        assert_eq!(
            escape("<script>alert('x')</script> & \""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;"
        );
    }

    #[test]
    fn a_group_shows_what_it_waits_for_and_where_it_answers() {
        let cr: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "models.titanml.co/v1alpha2", "kind": "ModelOrchestra",
            "metadata": {"name": "big", "namespace": "team-a"},
            "status": {"applications": {"chat": {
                "ready": false, "readyReplicas": 3, "desiredReplicas": 4,
                "address": "big-model-orchestra-chat.team-a.svc:9999",
                "group": {"nodes": 4, "ready": 3, "message": "starting: the root runs only with every worker ready (<3/3>)"}
            }}}
        }))
        .unwrap();
        let summary = StatusSummary::of(&cr);
        assert_eq!(summary.applications["chat"].group.as_ref().unwrap()["nodes"], 4);
        let mut html = String::new();
        render_app(&mut html, "chat", &summary.applications["chat"]);
        assert!(html.contains("3/4"), "{html}");
        assert!(html.contains("starting: the root runs only with every worker ready (&lt;3/3&gt;)"), "{html}");
        assert!(html.contains("<code>big-model-orchestra-chat.team-a.svc:9999</code>"), "{html}");
    }
}
