//! Which application serves which model, from the ModelOrchestra itself: its spec resolved
//! and rendered by the same code as the operator's (the application's Service, its
//! Deployment, its models, its sleep settings), and its status (whether an application
//! sleeps, and why one does not serve). Pure: the gateway's watch feeds it CRs.

use std::collections::BTreeMap;

use model_orchestra_api::kinds::Kind;
use model_orchestra_api::v1alpha2::SleepPhase;
use serde_json::Value;

use crate::chart::Component;
use crate::model::{EngineModel, SleepSettings};

/// One application the gateway routes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub name: String,
    /// `host:port` of the application's Service.
    pub upstream: String,
    /// Its Deployment (the one scaled to zero and back).
    pub deployment: String,
    /// The models it serves, as listed.
    pub models: Vec<String>,
    pub sleep: Option<SleepSettings>,
    /// Replicas a wake-up scales it to.
    pub wake_replicas: i32,
    /// What the status says of it.
    pub phase: Option<SleepPhase>,
    /// Whether it serves (or sleeps), as the status says.
    pub ready: bool,
    /// Why it does not serve, when the status says.
    pub message: String,
    /// Listed models no replica holds because the models registry does not have them (a
    /// typo), normalised, each with the status's message: refused here naming why, while
    /// the application serves the others.
    pub absent: BTreeMap<String, String>,
}

/// The routes of one ModelOrchestra.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub apps: BTreeMap<String, App>,
    /// Each model (normalised: with its tag) to its application.
    by_model: BTreeMap<String, String>,
}

/// A model name as Ollama reads it: `:latest` when no tag is given.
pub fn normalise(model: &str) -> String {
    let name = model.rsplit('/').next().unwrap_or(model);
    if name.contains(':') {
        model.to_string()
    } else {
        format!("{model}:latest")
    }
}

impl Table {
    /// The routes of a ModelOrchestra (as JSON); an error says why it cannot be served
    /// (its spec does not render).
    pub fn of(cr: &Value) -> Result<Table, String> {
        let doc = model_orchestra_api::parse::document(cr).map_err(|e| e.to_string())?;
        let namespace = doc.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let chart = crate::embedded_chart(doc.api_version).map_err(|e| e.to_string())?;
        let values = crate::versions::served(doc.api_version).values(&doc.spec).map_err(|e| e.to_string())?;
        let model = chart.model(&values, &Default::default()).map_err(|e| e.to_string())?;
        let rendered = chart.render_model(doc.name(), &namespace, &model).map_err(|e| e.to_string())?;
        let status = cr.pointer("/status/applications");
        let mut table = Table::default();
        for app in &model.applications {
            let EngineModel::Ollama(o) = &app.engine else { continue };
            let component = Component::Application(app.key.clone());
            let of_kind = |kind: Kind| rendered.objects.iter().find(|r| r.kind == kind && r.component == component);
            let (Some(service), Some(deployment)) = (of_kind(Kind::Service), of_kind(Kind::Deployment)) else {
                continue;
            };
            let port = service.object.pointer("/spec/ports/0/port").and_then(Value::as_i64).unwrap_or(80);
            let app_status = status.and_then(|s| s.get(&app.key));
            let phase = app_status
                .and_then(|s| s.get("sleep"))
                .and_then(|p| serde_json::from_value::<SleepPhase>(p.clone()).ok());
            let message = app_status.and_then(|s| s["message"].as_str()).unwrap_or_default().to_string();
            let ready = app_status.and_then(|s| s["ready"].as_bool()).unwrap_or(false);
            let absent =
                app_status.and_then(|s| s["models"].as_array()).map_or_else(BTreeMap::new, |models| absent(models));
            for m in &o.models {
                table.by_model.insert(normalise(m), app.key.clone());
            }
            table.apps.insert(
                app.key.clone(),
                App {
                    name: app.key.clone(),
                    upstream: format!("{}.{namespace}.svc:{port}", service.name),
                    deployment: deployment.name.clone(),
                    models: o.models.clone(),
                    sleep: app.sleep,
                    wake_replicas: app.pod.replica_count.max(1),
                    phase,
                    ready,
                    message,
                    absent,
                },
            );
        }
        Ok(table)
    }

    /// The application serving `model`.
    pub fn route(&self, model: &str) -> Option<&App> {
        self.apps.get(self.by_model.get(&normalise(model))?)
    }

    /// Every model served, as listed, with its application (not those the registry lacks).
    pub fn models(&self) -> Vec<(&str, &str)> {
        let mut all: Vec<(&str, &str)> = self
            .apps
            .values()
            .flat_map(|a| {
                a.models
                    .iter()
                    .filter(|m| !a.absent.contains_key(&normalise(m)))
                    .map(move |m| (m.as_str(), a.name.as_str()))
            })
            .collect();
        all.sort();
        all
    }
}

/// The models of an application's status that no replica holds because the registry does
/// not have them: `Failed`, held by none (`0/N`), and the pull's error says so.
fn absent(models: &[Value]) -> BTreeMap<String, String> {
    models
        .iter()
        .filter(|m| m["phase"] == "Failed" && m["replicas"].as_str().is_some_and(|r| r.starts_with("0/")))
        .filter_map(|m| {
            let (name, message) = (m["name"].as_str()?, m["message"].as_str()?);
            crate::reconcile::pulls::is_missing(message).then(|| (normalise(name), message.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cr(status: Value) -> Value {
        json!({
            "apiVersion": "models.titanml.co/v1alpha2",
            "kind": "ModelOrchestra",
            "metadata": {"name": "chat", "namespace": "models"},
            "spec": {"applications": {
                "small": {"engine": {"ollama": {"models": [{"name": "smollm2:135m"}, {"name": "qwen2"}]}},
                          "sleep": {"enabled": true, "idleSeconds": 30}},
                "big": {"engine": {"ollama": {"models": [{"name": "gemma3:270m"}]}}, "replicaCount": 2}
            }},
            "status": status
        })
    }

    #[test]
    fn each_model_routes_to_the_service_of_the_application_listing_it() {
        let table = Table::of(&cr(json!({}))).unwrap();
        let small = table.route("smollm2:135m").unwrap();
        assert_eq!(small.upstream, "chat-model-orchestra-small.models.svc:11434");
        assert_eq!(small.deployment, "chat-model-orchestra-small");
        assert_eq!(table.route("gemma3:270m").unwrap().name, "big");
        assert!(table.route("llama3").is_none());
    }

    #[test]
    fn a_model_without_a_tag_is_its_latest_tag_as_ollama_reads_it() {
        let table = Table::of(&cr(json!({}))).unwrap();
        assert_eq!(table.route("qwen2:latest").unwrap().name, "small");
        assert_eq!(table.route("qwen2").unwrap().name, "small");
        assert!(table.route("smollm2").is_none(), "smollm2 is smollm2:latest, not smollm2:135m");
    }

    #[test]
    fn the_sleep_settings_and_the_wake_replicas_come_from_the_spec() {
        let table = Table::of(&cr(json!({}))).unwrap();
        let small = &table.apps["small"];
        assert_eq!(small.sleep.map(|s| s.idle_seconds), Some(30));
        assert_eq!(small.wake_replicas, 1);
        assert_eq!(table.apps["big"].sleep, None);
        assert_eq!(table.apps["big"].wake_replicas, 2);
    }

    #[test]
    fn the_phase_and_the_reason_come_from_the_status() {
        let status = json!({"applications": {"small": {"readyReplicas": 0, "desiredReplicas": 1, "ready": false,
            "sleep": "Waking", "message": "Back-off pulling image"}}});
        let table = Table::of(&cr(status)).unwrap();
        assert_eq!(table.apps["small"].phase, Some(SleepPhase::Waking));
        assert_eq!(table.apps["small"].message, "Back-off pulling image");
    }

    #[test]
    fn the_models_list_names_each_served_model_with_its_application() {
        let table = Table::of(&cr(json!({}))).unwrap();
        assert_eq!(table.models(), vec![("gemma3:270m", "big"), ("qwen2", "small"), ("smollm2:135m", "small")]);
    }

    #[test]
    fn a_model_the_registry_does_not_have_is_known_with_why_and_not_listed_as_served() {
        let status = json!({"applications": {"small": {"ready": true, "models": [
            {"name": "smollm2:135m", "phase": "Ready", "replicas": "1/1"},
            {"name": "qwen2", "phase": "Failed", "replicas": "0/1",
             "message": "small-0: pull model manifest: file does not exist; retried in 60s"}
        ]}}});
        let table = Table::of(&cr(status)).unwrap();
        let small = &table.apps["small"];
        assert_eq!(small.absent.keys().collect::<Vec<_>>(), ["qwen2:latest"]);
        assert!(small.absent["qwen2:latest"].contains("file does not exist"));
        assert_eq!(table.models(), vec![("gemma3:270m", "big"), ("smollm2:135m", "small")]);
    }

    #[test]
    fn a_model_whose_pull_failed_for_another_reason_or_that_a_replica_holds_is_not_absent() {
        let status = json!({"applications": {"small": {"models": [
            {"name": "smollm2:135m", "phase": "Failed", "replicas": "0/1", "message": "p: unexpected EOF; retried in 10s"},
            {"name": "qwen2", "phase": "Failed", "replicas": "1/2", "message": "q: file does not exist; retried in 60s"}
        ]}}});
        assert!(Table::of(&cr(status)).unwrap().apps["small"].absent.is_empty());
    }

    #[test]
    fn a_spec_that_does_not_render_is_an_error() {
        let mut bad = cr(json!({}));
        bad["spec"]["applications"]["small"]["engine"]["ollama"]["port"] = json!("eleven");
        assert!(Table::of(&bad).is_err());
    }
}
