//! The API server's audit log (JSON lines, Metadata level): who did what to which object,
//! with which result. Tests count writes from it — an independent witness, unlike a
//! client's own metrics.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One audit event (the fields tests use).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub stage: String,
    pub verb: String,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub user: User,
    /// The user the request acted as, when `user` impersonated one (`Impersonate-User`).
    #[serde(default)]
    pub impersonated_user: Option<User>,
    #[serde(default)]
    pub user_agent: String,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<ResponseStatus>,
    /// When the API server reached this stage (RFC 3339, microseconds).
    #[serde(default)]
    pub stage_timestamp: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct User {
    pub username: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub subresource: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ResponseStatus {
    #[serde(default)]
    pub code: u16,
}

impl AuditEvent {
    /// When the API server reached this event's stage.
    pub fn at(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        self.stage_timestamp.parse().ok()
    }

    /// A request that changes state: create, update, patch, delete, deletecollection — not
    /// a dry run (which the server answers without persisting anything).
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
            && !self.is_dry_run()
    }

    pub fn is_dry_run(&self) -> bool {
        self.request_uri.contains("dryRun=All")
    }

    /// Whom the request acted as: the impersonated user, else the authenticated one.
    pub fn acting_user(&self) -> &str {
        self.impersonated_user.as_ref().unwrap_or(&self.user).username.as_str()
    }

    pub fn code(&self) -> u16 {
        self.response_status.as_ref().map_or(0, |s| s.code)
    }

    pub fn resource(&self) -> &str {
        self.object_ref.as_ref().map_or("", |o| o.resource.as_str())
    }

    pub fn namespace(&self) -> &str {
        self.object_ref.as_ref().map_or("", |o| o.namespace.as_str())
    }

    pub fn name(&self) -> &str {
        self.object_ref.as_ref().map_or("", |o| o.name.as_str())
    }

    pub fn subresource(&self) -> &str {
        self.object_ref.as_ref().map_or("", |o| o.subresource.as_str())
    }

    /// The field manager a patch or apply names (`?fieldManager=`), percent-decoded.
    pub fn field_manager(&self) -> Option<String> {
        let (_, query) = self.request_uri.split_once('?')?;
        query.split('&').find_map(|pair| pair.strip_prefix("fieldManager=")).map(percent_decode)
    }
}

/// `%XX` escapes (and `+`, a space in a query) decoded; a malformed escape is kept as is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The audit log file; read it whole or from a mark.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    pub fn new(path: &Path) -> AuditLog {
        AuditLog { path: path.to_path_buf() }
    }

    /// A mark: events after it are returned by [`AuditLog::since`].
    pub fn mark(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Completed requests logged after `mark` (watches appear when they end).
    pub fn since(&self, mark: u64) -> Vec<AuditEvent> {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.path) {
            let _ = f.seek(SeekFrom::Start(mark));
            let _ = f.read_to_string(&mut text);
        }
        // The last line may still be being written: only whole lines count.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .filter_map(|l| serde_json::from_str::<AuditEvent>(l).ok())
            .filter(|e| e.stage == "ResponseComplete")
            .collect()
    }

    pub fn all(&self) -> Vec<AuditEvent> {
        self.since(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(verb: &str, uri: &str) -> AuditEvent {
        serde_json::from_value(serde_json::json!({
            "stage": "ResponseComplete", "verb": verb, "requestURI": uri,
            "user": {"username": "u"}, "userAgent": "a",
            "objectRef": {"resource": "configmaps", "namespace": "ns", "name": "n"},
            "responseStatus": {"code": 200}
        }))
        .unwrap()
    }

    #[test]
    fn a_dry_run_patch_is_not_a_write() {
        assert!(event("patch", "/api/v1/namespaces/ns/configmaps/n?fieldManager=m").is_write());
        assert!(!event("patch", "/api/v1/namespaces/ns/configmaps/n?dryRun=All&fieldManager=m").is_write());
        assert!(!event("get", "/api/v1/namespaces/ns/configmaps/n").is_write());
    }

    #[test]
    fn the_field_manager_is_read_from_the_query() {
        let patch = event(
            "patch",
            "/api/v1/namespaces/ns/configmaps/n?dryRun=All&fieldManager=model-orchestra%2Fv1&force=true",
        );
        assert_eq!(patch.field_manager().as_deref(), Some("model-orchestra/v1"));
        assert_eq!(event("patch", "/api/v1/namespaces/ns/configmaps/n?force=true").field_manager(), None);
        assert_eq!(event("update", "/api/v1/namespaces/ns/configmaps/n").field_manager(), None);
    }

    #[test]
    fn only_whole_lines_after_the_mark_are_read() {
        let dir = std::env::temp_dir().join(format!("audit-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let line = |verb: &str| {
            serde_json::to_string(&serde_json::json!({"stage": "ResponseComplete", "verb": verb, "requestURI": "/x", "user": {"username": "u"}})).unwrap()
        };
        std::fs::write(&path, format!("{}\n", line("get"))).unwrap();
        let log = AuditLog::new(&path);
        let mark = log.mark();
        std::fs::write(&path, format!("{}\n{}\n{{\"partial", line("get"), line("create"))).unwrap();
        let events = log.since(mark);
        assert_eq!(events.iter().map(|e| e.verb.as_str()).collect::<Vec<_>>(), ["create"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
