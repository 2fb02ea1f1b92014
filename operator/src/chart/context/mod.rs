//! The template context, built from the resolved values: Helm's `Release` and `Chart`, plus
//! what Helm charts compute in `_helpers.tpl` — names, labels, env precedence, GPU rules,
//! each pod's `config.yaml` and its checksum. Computing these in Rust keeps the templates
//! about structure only, and every value they print is data that the `json` helper
//! serialises. The context is typed until it is handed to Handlebars.
//!
//! This file holds the release level (the root of the context, built once per render) and
//! the label and annotation keys; `component` what the gateway and applications share,
//! `config` each pod's `config.yaml`, `gateway` and `application` their own rules.

mod application;
mod component;
mod config;
mod gateway;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use serde::Serialize;
use serde_json::Value;

use super::names::{self, check_generated};
use super::{Chart, Component};
use crate::error::{InputError, RenderError};
use crate::model::{ApplicationModel, EngineModel, Model};
use application::{application_components, AppContext};
use component::ComponentContext;
use gateway::gateway_component;
use model_orchestra_api::names::{is_dns_label, is_dns_subdomain, is_label_value};

/// The label naming who manages an object; the operator prunes only objects carrying it.
pub use model_orchestra_api::keys::MANAGED_BY_LABEL;
/// Value of [`MANAGED_BY_LABEL`] (Helm's `.Release.Service`).
pub const MANAGED_BY: &str = "model-orchestra-operator";
/// The label naming an object's component (`gateway`, `application-<app>`, `model-<app>`).
pub use model_orchestra_api::keys::COMPONENT_LABEL;
/// The label naming an object's release (the CR).
pub use model_orchestra_api::keys::INSTANCE_LABEL;
/// Pod-template annotation holding the checksum of the pod's configuration.
const CONFIG_CHECKSUM_ANNOTATION: &str = "checksum/config";
/// The label (on the download Job) and pod-template annotation (on the Deployment) naming
/// the revision of an application's model: its name, the downloader and the refresh value,
/// hashed. A new revision is a new Job, and rolls the application's pods.
pub use model_orchestra_api::keys::MODEL_REVISION_LABEL;
/// The pod-template annotation naming an application's revision (verified promotion): a
/// hash of what its pods run — image, env, configuration, volumes, pod settings.
pub use model_orchestra_api::keys::REVISION_ANNOTATION;

/// The root of the template context.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Root<'a> {
    #[serde(rename = "Release")]
    release: ReleaseInfo<'a>,
    #[serde(rename = "Chart")]
    chart: ChartInfo<'a>,
    fullname: &'a str,
    labels: &'a BTreeMap<String, String>,
    image_pull_secrets: &'a [LocalObjectReference],
    service_account: ServiceAccountContext<'a>,
    /// Render the gateway's ServiceMonitor.
    service_monitor: bool,
    gateway: &'a ComponentContext<'a>,
    /// Whether the Takeoff gateway is rendered: not when every application is Ollama (it
    /// routes only to Takeoff readers).
    takeoff_gateway: bool,
    /// The model gateway, in the gateway's place (first shard only).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_gateway: Option<&'a super::model_gateway::ModelGatewayContext>,
    components: Components<'a, 'a>,
}

#[derive(Serialize)]
struct ReleaseInfo<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Namespace")]
    namespace: &'a str,
    #[serde(rename = "Service")]
    service: &'a str,
}

#[derive(Serialize)]
struct ChartInfo<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Version")]
    version: &'a str,
    #[serde(rename = "AppVersion")]
    app_version: &'a str,
}

#[derive(Serialize)]
struct ServiceAccountContext<'a> {
    create: bool,
    automount: bool,
    name: &'a str,
    annotations: &'a BTreeMap<String, String>,
}

/// What every shard of a render shares: the release's names and labels, the ServiceAccount
/// and the gateway. Built once per render, before any application.
pub(super) struct Release<'a> {
    release: &'a str,
    namespace: &'a str,
    chart: &'a Chart,
    fullname: String,
    common: BTreeMap<String, String>,
    sa_name: String,
    values: &'a Model,
    gateway: ComponentContext<'a>,
    /// Whether the Takeoff gateway is rendered: unless every application is Ollama.
    takeoff_gateway: bool,
    /// The model gateway, when every application is an open engine.
    model_gateway: Option<super::model_gateway::ModelGatewayContext>,
}

/// The applications of one shard, as the templates see them.
pub(super) struct Applications<'a> {
    contexts: Vec<ComponentContext<'a>>,
}

impl Applications<'_> {
    /// The name of each application's objects (its model cache's included), with its
    /// component.
    pub(super) fn components(&self) -> impl Iterator<Item = (&str, Component)> {
        self.contexts.iter().flat_map(|c| {
            let cache = c.model_cache.iter().flat_map(|m| [m.claim.name.as_str(), m.job.name.as_str()]);
            let workers = c.dllama.iter().flat_map(|g| g.workers_name());
            let cache = cache.chain(workers);
            let component = c.app.map(|app| match c.candidate {
                true => Component::Candidate(app.to_string()),
                false => Component::Application(app.to_string()),
            });
            std::iter::once(c.name.as_str()).chain(cache).filter_map(move |name| Some((name, component.clone()?)))
        })
    }
}

/// The components a context lists: the gateway (in the first shard only), then applications.
struct Components<'b, 'a> {
    gateway: Option<&'b ComponentContext<'a>>,
    applications: &'b [ComponentContext<'a>],
}

impl Serialize for Components<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.gateway.iter().count() + self.applications.len()))?;
        for c in self.gateway.into_iter().chain(self.applications) {
            seq.serialize_element(c)?;
        }
        seq.end()
    }
}

impl<'a> Release<'a> {
    /// Checks the release's names and builds the gateway's context.
    pub(super) fn new(
        chart: &'a Chart,
        release: &'a str,
        namespace: &'a str,
        values: &'a Model,
    ) -> Result<Release<'a>, RenderError> {
        check_release(release, namespace)?;
        let meta = &chart.metadata;
        let fullname = names::fullname(release, &meta.name, &values.name_override, &values.fullname_override);
        let chart_name =
            if values.name_override.is_empty() { meta.name.as_str() } else { values.name_override.as_str() };
        if !is_label_value(chart_name) {
            return Err(
                InputError::new("spec.nameOverride", "must be a valid label value (≤63 of A-Z a-z 0-9 - _ .)").into()
            );
        }
        let common = BTreeMap::from([
            (model_orchestra_api::keys::NAME_LABEL.to_string(), chart_name.to_string()),
            (INSTANCE_LABEL.to_string(), release.to_string()),
            (model_orchestra_api::keys::VERSION_LABEL.to_string(), meta.app_version.clone()),
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
            ("helm.sh/chart".to_string(), format!("{}-{}", meta.name, meta.version).replace('+', "_")),
        ]);

        let sa = &values.service_account;
        let sa_name = match (sa.create, sa.name.as_str()) {
            (_, name) if !name.is_empty() => name.to_string(),
            (true, _) => fullname.clone(),
            (false, _) => "default".to_string(),
        };
        if !is_dns_subdomain(&sa_name) {
            return Err(InputError::new(
                "spec.serviceAccount.name",
                format!("`{sa_name}` is not a valid ServiceAccount name (DNS subdomain)"),
            )
            .into());
        }

        let gateway_name = format!("{fullname}-gateway");
        check_generated(
            &gateway_name,
            if values.fullname_override.is_empty() { "metadata.name" } else { "spec.fullnameOverride" },
        )?;
        let gateway = gateway_component(values.rules, &values.gateway, &gateway_name, &common, &meta.app_version)?;
        let takeoff_gateway = values.applications.is_empty()
            || values.applications.iter().any(|a| !matches!(a.engine, EngineModel::Ollama(_)));
        let model_gateway = super::model_gateway::model_gateway(
            values,
            super::model_gateway::Base {
                meta: gateway.meta.clone(),
                selector_labels: &gateway.selector_labels,
                pod_labels: &gateway.pod_labels,
                release,
                namespace,
                fullname: &fullname,
            },
        );
        Ok(Release {
            release,
            namespace,
            chart,
            fullname,
            common,
            sa_name,
            values,
            gateway,
            takeoff_gateway,
            model_gateway,
        })
    }

    pub(super) fn namespace(&self) -> &str {
        self.namespace
    }

    /// The gateway's object name.
    pub(super) fn gateway_name(&self) -> &str {
        &self.gateway.name
    }

    /// The contexts of `applications` (a slice of the resolved values' applications).
    pub(super) fn applications(&self, applications: &'a [ApplicationModel]) -> Result<Applications<'a>, RenderError> {
        let mut contexts = Vec::with_capacity(applications.len());
        for app in applications {
            let field = format!("spec.applications.{}", app.key);
            let ctx = AppContext {
                rules: self.values.rules,
                field: &field,
                fullname: &self.fullname,
                gateway_name: &self.gateway.name,
                namespace: self.namespace,
                internal_port: self.values.gateway.internal_port,
                operator_image: self.chart.operator_image(),
            };
            contexts.extend(application_components(
                &ctx,
                app,
                &self.values.template_env,
                &self.common,
                &self.chart.metadata.app_version,
            )?);
        }
        Ok(Applications { contexts })
    }

    /// The template context of one shard: the release, the gateway at the root (and, when
    /// `with_gateway`, among the components) and the shard's applications.
    pub(super) fn context(&self, with_gateway: bool, applications: &Applications) -> Result<Value, RenderError> {
        let values = self.values;
        let sa = &values.service_account;
        let root = Root {
            release: ReleaseInfo { name: self.release, namespace: self.namespace, service: MANAGED_BY },
            chart: ChartInfo {
                name: &self.chart.metadata.name,
                version: &self.chart.metadata.version,
                app_version: &self.chart.metadata.app_version,
            },
            fullname: &self.fullname,
            labels: &self.common,
            image_pull_secrets: &values.image_pull_secrets,
            service_account: ServiceAccountContext {
                create: sa.create,
                automount: sa.automount,
                name: &self.sa_name,
                annotations: &sa.annotations,
            },
            service_monitor: values.gateway.export_prometheus_metrics,
            gateway: &self.gateway,
            takeoff_gateway: self.takeoff_gateway,
            model_gateway: self.model_gateway.as_ref().filter(|_| with_gateway),
            components: Components {
                gateway: (with_gateway && self.takeoff_gateway).then_some(&self.gateway),
                applications: &applications.contexts,
            },
        };
        serde_json::to_value(&root).map_err(|e| RenderError::chart("values", e))
    }
}

fn check_release(release: &str, namespace: &str) -> Result<(), InputError> {
    if !is_dns_label(release) {
        return Err(InputError::new(
            "metadata.name",
            format!("`{release}` must be a DNS label of at most 63 characters: it is the `app.kubernetes.io/instance` label of every object"),
        ));
    }
    if !is_dns_label(namespace) {
        return Err(InputError::new("metadata.namespace", format!("`{namespace}` is not a valid namespace name")));
    }
    Ok(())
}
