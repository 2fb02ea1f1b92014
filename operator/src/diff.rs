//! `diff`: what the operator would change in the cluster for one ModelOrchestra. The same
//! render ([`crate::reconcile::render_cr`]), gates ([`gates::gate`], from the CR's Jobs,
//! Deployments and pods as read now), apply plan and prune rule the reconciler uses
//! decide what is applied and what is pruned; each apply is sent as a server-side dry run
//! with the operator's field manager, and its answer compared with the live object. Only
//! reads and dry runs: nothing is written.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use futures::stream::{self, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use model_orchestra_api::kinds::Kind;
use model_orchestra_api::parse::Document;
use model_orchestra_api::v1alpha2::ModelOrchestraStatus;
use model_orchestra_api::ApiVersion;
use serde_json::Value;

use crate::chart::{Chart, Component, COMPONENT_LABEL, INSTANCE_LABEL};
use crate::error::RenderError;
use crate::reconcile::gates;
use crate::reconcile::group::{self, Member};
use crate::reconcile::model::REFRESH_ANNOTATION;
use crate::reconcile::plan::{
    self, Existing, Owner, PlannedObject, FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL, OWNER_NAME_LABEL,
};
use crate::reconcile::pod_health::newness;
use crate::reconcile::promotion::{Ask, Progress, RETRY_ANNOTATION};
use crate::reconcile::routing::{self, Route, RoutingFacts};

/// Requests in flight at once.
const CONCURRENCY: usize = 8;
/// Unchanged lines shown around each change.
const CONTEXT: usize = 3;
/// The owner UID of a CR that does not exist yet (the dry runs need one).
const NEW_CR_UID: &str = "00000000-0000-0000-0000-000000000000";

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("{what}: {}", api_message(.source))]
    Request { what: String, source: kube::Error },
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

/// What applying (or pruning) would do to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Changed,
    Pruned,
    Unchanged,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Changed => "changed",
            Change::Pruned => "pruned",
            Change::Unchanged => "unchanged",
        }
    }
}

/// One object's change, with a unified diff (empty when unchanged).
#[derive(Debug, Clone)]
pub struct Entry {
    pub change: Change,
    pub kind: Kind,
    pub name: String,
    pub diff: String,
}

/// Every object the operator would apply, then every object it would prune.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub entries: Vec<Entry>,
    /// The render's warnings.
    pub warnings: Vec<String>,
}

impl Report {
    pub fn has_changes(&self) -> bool {
        self.entries.iter().any(|e| e.change != Change::Unchanged)
    }

    pub fn count(&self, change: Change) -> usize {
        self.entries.iter().filter(|e| e.change == change).count()
    }

    /// One line per object (`changed Deployment demo-chat`), each change's diff under it,
    /// and a summary line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            let _ = writeln!(out, "{} {} {}", e.change.as_str(), e.kind.kind(), e.name);
            out.push_str(&e.diff);
        }
        let _ = writeln!(
            out,
            "{} created, {} changed, {} pruned, {} unchanged",
            self.count(Change::Created),
            self.count(Change::Changed),
            self.count(Change::Pruned),
            self.count(Change::Unchanged)
        );
        out
    }
}

/// The CR to compare with the cluster: its spec as it would be, and the live CR of the
/// same name, if there is one (its UID owns the children; its status and annotations are
/// what the reconciler reads too).
pub struct Target {
    pub doc: Document,
    pub namespace: String,
    /// The version the spec is read as (the line that serves it).
    pub serves: ApiVersion,
    pub live: Option<DynamicObject>,
}

/// The live CR `name` in `namespace`, read at the storage version (every version's fields).
pub async fn live_cr(client: &Client, namespace: &str, name: &str) -> Result<Option<DynamicObject>, DiffError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ApiVersion::STORAGE.resource());
    api.get_opt(name)
        .await
        .map_err(|source| DiffError::Request { what: format!("reading ModelOrchestra {namespace}/{name}"), source })
}

/// The version a live CR is served as: its route (see [`routing::route`]); for a CR routed
/// to a line by label, the version it was created with.
pub fn served_as(cr: &DynamicObject) -> ApiVersion {
    let creation = routing::creation_write(
        cr.metadata.managed_fields.as_deref().unwrap_or_default(),
        FIELD_MANAGER,
        cr.metadata.creation_timestamp.as_ref(),
    );
    let facts = RoutingFacts {
        labels: cr.metadata.labels.as_ref(),
        annotations: cr.metadata.annotations.as_ref(),
        recorded: cr.data.get("status").and_then(|s| s.get("servedAs")).and_then(Value::as_str),
        creation,
    };
    match routing::route(&facts) {
        Route::Version(version, _) => version,
        Route::Line(_) | Route::Invalid(_) => routing::created_with(creation),
    }
}

/// What the operator would change for `target`: render, gate and plan as the reconciler does,
/// dry-run every apply, and list what its prune rule would delete.
pub async fn diff(client: &Client, target: &Target, chart: Option<&Chart>) -> Result<Report, DiffError> {
    let chart = match chart {
        Some(chart) => chart,
        None => crate::embedded_chart(target.serves)?,
    };
    if chart.api_version() != target.serves {
        return Err(RenderError::chart(
            "Chart.yaml",
            format!("this chart renders {} ModelOrchestras, not {}", chart.api_version(), target.serves),
        )
        .into());
    }
    let live = target.live.as_ref();
    let previous: ModelOrchestraStatus = live
        .and_then(|cr| cr.data.get("status"))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    let name = target.doc.name();
    let namespace = target.namespace.as_str();
    let refresh = target.doc.metadata.annotations.as_ref().and_then(|a| a.get(REFRESH_ANNOTATION));
    let rendered = crate::reconcile::render_cr(
        chart,
        target.serves,
        &target.doc.spec,
        name,
        namespace,
        refresh.map(String::as_str),
        &previous,
    )?;
    let warnings = rendered.rendered.warnings.iter().map(ToString::to_string).collect();
    let owner = Owner {
        api_version: target.serves.api_version(),
        name: name.to_string(),
        uid: live.and_then(|cr| cr.uid()).unwrap_or_else(|| NEW_CR_UID.to_string()),
    };
    // Shaped by the reconciler's own gates, from what the cluster shows now.
    let children = children(client, namespace, name).await?;
    let live_facts = Snapshot::new(&children, pods(client, namespace, name).await?);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let cr = gates::Cr {
        namespace,
        model: &rendered.model,
        previous: &previous,
        refresh: &rendered.refresh,
        retry: target.doc.metadata.annotations.as_ref().and_then(|a| a.get(RETRY_ANNOTATION)).map(String::as_str),
        now: &now,
    };
    let mut objects = rendered.rendered.objects;
    let gated = gates::gate(&mut objects, &cr, &live_facts);
    let plan = plan::plan(&owner, objects);
    let mut entries: Vec<Entry> =
        stream::iter(&plan.objects).map(|o| compare(client, namespace, o)).buffered(CONCURRENCY).try_collect().await?;
    let existing: Vec<Existing> = children.iter().map(|(kind, o)| Existing::of(*kind, &o.metadata)).collect();
    // What a verification holds back stays as it is, as the reconciler leaves it.
    let held = |e: &&Existing| gated.promotions.held.iter().any(|h| h.kind == e.kind && h.name == e.name);
    for gone in plan::prune(&owner, &plan, &existing).into_iter().filter(|e| !held(e)) {
        let Some((_, object)) = children.iter().find(|(k, o)| *k == gone.kind && o.name_any() == gone.name) else {
            continue;
        };
        let mut before = Some(clean(serde_json::to_value(object).expect("objects serialise")));
        redact(gone.kind, &mut before, &mut None);
        let diff = unified(&yaml(before.as_ref()), "", &header("live", gone.kind, &gone.name), "/dev/null");
        entries.push(Entry { change: Change::Pruned, kind: gone.kind, name: gone.name.clone(), diff });
    }
    Ok(Report { entries, warnings })
}

/// The live object and the API server's answer to a dry-run apply of the planned one.
async fn compare(client: &Client, namespace: &str, o: &PlannedObject) -> Result<Entry, DiffError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &o.kind.resource());
    let failed = |what: &str| {
        let what = format!("{what} {} {}", o.kind.kind(), o.name);
        move |source| DiffError::Request { what, source }
    };
    let live = api.get_opt(&o.name).await.map_err(failed("reading"))?;
    let params = PatchParams { dry_run: true, ..PatchParams::apply(FIELD_MANAGER).force() };
    let applied = match api.patch(&o.name, &params, &Patch::Apply(&o.body)).await {
        Ok(applied) => serde_json::to_value(applied).expect("objects serialise"),
        // Binding a Role that is not created yet: the API server cannot check the binding
        // until it is (the reconciler applies it after the Role); it is shown as rendered.
        Err(kube::Error::Api(e)) if o.kind == Kind::RoleBinding && e.code == 404 && live.is_none() => o.body.clone(),
        Err(e) => return Err(failed("the API server refuses")(e)),
    };
    let mut before = live.map(|l| clean(serde_json::to_value(l).expect("objects serialise")));
    let mut after = Some(clean(applied));
    let change = match &before {
        None => Change::Created,
        Some(b) if Some(b) == after.as_ref() => Change::Unchanged,
        Some(_) => Change::Changed,
    };
    redact(o.kind, &mut before, &mut after);
    let diff = match change {
        Change::Unchanged => String::new(),
        Change::Created => unified("", &yaml(after.as_ref()), "/dev/null", &header("applied", o.kind, &o.name)),
        _ => unified(
            &yaml(before.as_ref()),
            &yaml(after.as_ref()),
            &header("live", o.kind, &o.name),
            &header("applied", o.kind, &o.name),
        ),
    };
    Ok(Entry { change, kind: o.kind, name: o.name.clone(), diff })
}

/// Every object of a kind the chart renders that carries this CR's identity labels (the
/// prune rule checks them, and the owner reference, again). A kind the cluster does not
/// serve has none.
async fn children(client: &Client, namespace: &str, name: &str) -> Result<Vec<(Kind, DynamicObject)>, DiffError> {
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{OWNER_NAME_LABEL}={name}");
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind.resource());
        match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => out.extend(list.items.into_iter().map(|o| (kind, o))),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(DiffError::Request { what: format!("listing {}s", kind.kind()), source });
            }
        }
    }
    Ok(out)
}

/// The pods of the release `name` (its Deployments' and Jobs' pods carry its instance label).
async fn pods(client: &Client, namespace: &str, name: &str) -> Result<Vec<Pod>, DiffError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL}={name}");
    api.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .map_err(|source| DiffError::Request { what: "listing Pods".into(), source })
}

/// What the gates look at, as read: the CR's Deployments and Jobs, and its pods.
struct Snapshot {
    jobs: BTreeMap<String, Arc<Job>>,
    deployments: BTreeMap<String, Arc<Deployment>>,
    pods: Vec<Pod>,
}

impl Snapshot {
    fn new(children: &[(Kind, DynamicObject)], pods: Vec<Pod>) -> Snapshot {
        fn typed<T: serde::de::DeserializeOwned>(o: &DynamicObject) -> Option<(String, Arc<T>)> {
            let value = serde_json::to_value(o).ok()?;
            Some((o.name_any(), Arc::new(serde_json::from_value(value).ok()?)))
        }
        let of = |kind: Kind| children.iter().filter(move |(k, _)| *k == kind).map(|(_, o)| o);
        Snapshot {
            jobs: of(Kind::Job).filter_map(typed).collect(),
            deployments: of(Kind::Deployment).filter_map(typed).collect(),
            pods,
        }
    }

    fn labelled<'a>(&'a self, component: &'a str) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods.iter().filter(move |p| {
            p.metadata.labels.as_ref().and_then(|l| l.get(COMPONENT_LABEL)).map(String::as_str) == Some(component)
        })
    }
}

impl gates::Live for Snapshot {
    fn job(&self, name: &str) -> Option<Arc<Job>> {
        self.jobs.get(name).cloned()
    }

    fn deployment(&self, name: &str) -> Option<Arc<Deployment>> {
        self.deployments.get(name).cloned()
    }

    fn download_pod(&self, application: &str) -> Option<Pod> {
        self.labelled(&format!("model-{application}")).max_by_key(|p| newness(p)).cloned()
    }

    fn members(&self, component: &Component) -> Vec<Member> {
        let Some(label) = component.label_value() else { return Vec::new() };
        self.labelled(&label).filter_map(group::member).collect()
    }

    /// Nothing probes for diff: a verification shows as far as the status has it.
    fn progress(&self, _: &str, _: &str, _: Ask, _: bool) -> Option<Progress> {
        None
    }
}

fn header(side: &str, kind: Kind, name: &str) -> String {
    format!("{side}/{}/{name}", kind.kind())
}

/// The object without what the API server keeps for itself and what changes without
/// anyone applying (bookkeeping, status).
fn clean(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for noise in ["managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"] {
            meta.remove(noise);
        }
    }
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    object
}

/// A Secret's values are never printed: each shows as `<redacted>`, or, where the two sides
/// differ, `<redacted: before>` and `<redacted: after>`.
fn redact(kind: Kind, before: &mut Option<Value>, after: &mut Option<Value>) {
    let secret = |o: &Option<Value>| o.as_ref().is_some_and(|o| o["kind"] == "Secret");
    if kind.kind() != "Secret" && !secret(before) && !secret(after) {
        return;
    }
    for field in ["data", "stringData"] {
        let b = before.as_ref().and_then(|o| o.get(field)).cloned().unwrap_or(Value::Null);
        let a = after.as_ref().and_then(|o| o.get(field)).cloned().unwrap_or(Value::Null);
        let mask = |side: &mut Option<Value>, other: &Value, tag: &str| {
            let Some(map) = side.as_mut().and_then(|o| o.get_mut(field)).and_then(Value::as_object_mut) else {
                return;
            };
            for (k, v) in map.iter_mut() {
                let same = other.get(k) == Some(&*v);
                *v = Value::from(if same { "<redacted>".to_string() } else { format!("<redacted: {tag}>") });
            }
        };
        mask(before, &a, "before");
        mask(after, &b, "after");
    }
}

fn yaml(object: Option<&Value>) -> String {
    object.map(|o| serde_yaml::to_string(o).expect("JSON values serialise as YAML")).unwrap_or_default()
}

/// A unified diff of two texts (`CONTEXT` lines around each change); empty when equal.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = edit_script(&a, &b);
    let changes: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].0 != ' ').collect();
    if changes.is_empty() {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let mut i = 0;
    while i < changes.len() {
        let start = changes[i].saturating_sub(CONTEXT);
        let mut last = changes[i];
        while i + 1 < changes.len() && changes[i + 1] <= last + 2 * CONTEXT + 1 {
            i += 1;
            last = changes[i];
        }
        let end = (last + CONTEXT + 1).min(ops.len());
        let old_before = ops[..start].iter().filter(|o| o.0 != '+').count();
        let new_before = ops[..start].iter().filter(|o| o.0 != '-').count();
        let old_len = ops[start..end].iter().filter(|o| o.0 != '+').count();
        let new_len = ops[start..end].iter().filter(|o| o.0 != '-').count();
        let at = |before: usize, len: usize| if len == 0 { before } else { before + 1 };
        let _ = writeln!(out, "@@ -{},{old_len} +{},{new_len} @@", at(old_before, old_len), at(new_before, new_len));
        for (tag, line) in &ops[start..end] {
            let _ = writeln!(out, "{tag}{line}");
        }
        i += 1;
    }
    out
}

/// The lines of `a` and `b` as kept (' '), deleted ('-') and inserted ('+'), from a longest
/// common subsequence (objects are a few hundred lines: the quadratic table is small).
fn edit_script<'t>(a: &[&'t str], b: &[&'t str]) -> Vec<(char, &'t str)> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (ma.len(), mb.len());
    // lcs[i][j]: the longest common subsequence of ma[i..] and mb[j..].
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * (m + 1) + j] = if ma[i] == mb[j] {
                lcs[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                lcs[(i + 1) * (m + 1) + j].max(lcs[i * (m + 1) + j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = a[..prefix].iter().map(|l| (' ', *l)).collect();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && ma[i] == mb[j] {
            ops.push((' ', ma[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) {
            // Deletions first, as diff(1) prints them.
            ops.push(('-', ma[i]));
            i += 1;
        } else {
            ops.push(('+', mb[j]));
            j += 1;
        }
    }
    ops.extend(a[a.len() - suffix..].iter().map(|l| (' ', *l)));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "x", "y"), "");
    }

    #[test]
    fn a_changed_line_shows_with_three_lines_of_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(unified(old, new, "a", "b"), "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    }

    #[test]
    fn a_new_object_is_all_insertions() {
        assert_eq!(unified("", "x\ny\n", "/dev/null", "b"), "--- /dev/null\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n");
    }

    #[test]
    fn distant_changes_make_separate_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replacen("19\n", "nineteen\n", 1);
        let diff = unified(&old, &new, "a", "b");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
    }

    #[test]
    fn bookkeeping_and_status_are_not_compared() {
        let live = json!({"metadata": {"name": "a", "uid": "u", "resourceVersion": "7", "generation": 3,
            "managedFields": [], "creationTimestamp": "t", "labels": {"l": "v"}}, "spec": {"x": 1}, "status": {"r": 1}});
        assert_eq!(clean(live), json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}}));
    }

    #[test]
    fn a_secrets_values_never_show_only_whether_they_changed() {
        let mut before = Some(json!({"kind": "Secret", "data": {"same": "czE=", "new": "b2xk"}}));
        let mut after = Some(json!({"kind": "Secret", "data": {"same": "czE=", "new": "bmV3"}}));
        redact(Kind::ConfigMap, &mut before, &mut after);
        assert_eq!(before.unwrap()["data"], json!({"same": "<redacted>", "new": "<redacted: before>"}));
        assert_eq!(after.unwrap()["data"], json!({"same": "<redacted>", "new": "<redacted: after>"}));
    }
}
