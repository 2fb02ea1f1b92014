//! A ModelOrchestra's status as people read it: ready or not and why, each application's
//! replicas, model and promotion — the fields the API's status endpoint, its watch and the
//! status page show.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusSummary {
    pub name: String,
    pub namespace: String,
    pub generation: Option<i64>,
    /// The generation its operator line last reconciled: lower than `generation` means the
    /// latest change is not reconciled yet.
    pub observed_generation: Option<i64>,
    /// The `Ready` condition's status (false when there is none yet).
    pub ready: bool,
    /// The `Ready` condition's reason: `Ready`, `ApplicationsNotReady`, `Unschedulable`,
    /// `RolloutStuck`, `ModelDownloadFailed`, `PromotionFailed`, `Verifying`, `RenderFailed`, …
    pub reason: Option<String>,
    /// The `Ready` condition's message (the scheduler's, a download's or a promotion's).
    pub message: Option<String>,
    /// Every condition as stored (`Ready`, `Progressing`, `Degraded`).
    #[schema(value_type = Vec<Object>)]
    pub conditions: Vec<Value>,
    /// The operator line serving it (`status.line`) and the version it is served as.
    pub line: Option<String>,
    pub served_as: Option<String>,
    pub gateway_address: Option<String>,
    /// `status.applications`, by application.
    pub applications: BTreeMap<String, ApplicationSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSummary {
    pub ready: bool,
    pub ready_replicas: i64,
    pub desired_replicas: i64,
    /// `{phase, message, …}` of its model cache (`v1alpha2`), when it has one.
    #[schema(value_type = Option<Object>)]
    pub model: Option<Value>,
    /// `{phase, revision, answer, message, …}` of its verified promotion, when enabled.
    #[schema(value_type = Option<Object>)]
    pub promotion: Option<Value>,
    /// `{nodes, ready, root, workers, message}` of a distributed-llama group.
    #[schema(value_type = Option<Object>)]
    pub group: Option<Value>,
    /// Where clients reach a distributed-llama application (its root's Service, `host:port`).
    pub address: Option<String>,
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

impl StatusSummary {
    pub fn of(cr: &DynamicObject) -> StatusSummary {
        let status = cr.data.get("status").cloned().unwrap_or(Value::Null);
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        let ready_condition = conditions.iter().find(|c| c["type"] == "Ready");
        let applications = status["applications"]
            .as_object()
            .map(|apps| {
                apps.iter()
                    .map(|(name, a)| {
                        let present = |k: &str| a.get(k).filter(|v| !v.is_null()).cloned();
                        (
                            name.clone(),
                            ApplicationSummary {
                                ready: a["ready"].as_bool().unwrap_or(false),
                                ready_replicas: a["readyReplicas"].as_i64().unwrap_or(0),
                                desired_replicas: a["desiredReplicas"].as_i64().unwrap_or(0),
                                model: present("model"),
                                promotion: present("promotion"),
                                group: present("group"),
                                address: text(&a["address"]),
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        StatusSummary {
            name: cr.name_any(),
            namespace: cr.namespace().unwrap_or_default(),
            generation: cr.metadata.generation,
            observed_generation: status["observedGeneration"].as_i64(),
            ready: ready_condition.is_some_and(|c| c["status"] == "True"),
            reason: ready_condition.and_then(|c| text(&c["reason"])),
            message: ready_condition.and_then(|c| text(&c["message"])).filter(|m| !m.is_empty()),
            conditions,
            line: text(&status["line"]),
            served_as: text(&status["servedAs"]),
            gateway_address: text(&status["gatewayAddress"]),
            applications,
        }
    }
}
