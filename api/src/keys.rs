//! Every label, annotation and condition key the project writes or reads, in one place:
//! the operator, the chart's renderer, the HTTP API and bundle-tool take them from here (a
//! test of the `operator` crate, `keys_are_defined_once`, refuses a key written out anywhere
//! else in the sources).

// ---- models.titanml.co/*: on ModelOrchestras, set by users (or the HTTP API for them) ----

/// On a CR: the API version an unlabelled CR is served as (`v1alpha2`); without it, the
/// version it was created with.
pub const API_VERSION_ANNOTATION: &str = "models.titanml.co/api-version";
/// On a CR: pull (Ollama) or download (model cache) the models again; a value listing
/// application names, only theirs.
pub const REFRESH_ANNOTATION: &str = "models.titanml.co/refresh";
/// On a CR: verify a failed promotion again, once per value.
pub const RETRY_PROMOTION_ANNOTATION: &str = "models.titanml.co/retry-promotion";

// ---- models.titanml.co/*: on the objects the operator renders ----

/// On every child: the CR (release) it belongs to.
pub const OWNER_NAME_LABEL: &str = "models.titanml.co/modelorchestra";
/// On a distributed-llama group's pods: `root` or `worker`.
pub const ROLE_LABEL: &str = "models.titanml.co/role";
/// On a root's pod template: the workers it runs with.
pub const WORKERS_ANNOTATION: &str = "models.titanml.co/workers";
/// On a verified application's pod templates: the revision they run.
pub const REVISION_ANNOTATION: &str = "models.titanml.co/revision";
/// On a cached application's pod template: the model download it serves.
pub const MODEL_REVISION_LABEL: &str = "models.titanml.co/model-revision";
/// On a verified Ollama application's pod templates: the models their revision serves.
pub const MODELS_ANNOTATION: &str = "models.titanml.co/models";
/// The pod condition (and readiness gate) an Ollama replica's models set.
pub const MODELS_READY_CONDITION: &str = "models.titanml.co/models-ready";
/// On a sleep-enabled application's Deployment: its `sleep.idleSeconds`. The model gateway
/// owns the Deployment's `replicas` (the operator applies none).
pub const IDLE_SECONDS_ANNOTATION: &str = "models.titanml.co/idle-seconds";
/// The field manager of the model gateway's writes (a Deployment's `replicas`).
pub const GATEWAY_FIELD_MANAGER: &str = "model-orchestra-gateway";

// ---- models.titanml.co/*: elsewhere ----

/// On a chart's `Chart.yaml`: the ModelOrchestra version it serves (none: `v1alpha1`).
/// The same key as [`API_VERSION_ANNOTATION`], on another object, with another meaning.
pub const CHART_API_VERSION_ANNOTATION: &str = "models.titanml.co/api-version";
/// On a line's Lease: the API version the line serves.
pub const SERVES_ANNOTATION: &str = "models.titanml.co/serves";
/// On the HTTP API's objects made for a key (its value is the key's name); also the type
/// of the key's Secret.
pub const API_KEY_LABEL: &str = "models.titanml.co/api-key";
/// On a shared-CRD bundle's CSV: the CRD version it serves.
pub const CRD_VERSION_ANNOTATION: &str = "models.titanml.co/crd-version";
/// On a bundle's CSV: whether it carries the CRD.
pub const CRD_MODE_ANNOTATION: &str = "models.titanml.co/crd-mode";
/// On a bundle's CSV: the routing value of its line.
pub const ROUTING_ANNOTATION: &str = "models.titanml.co/routing";

// ---- app.kubernetes.io/*: the recommended labels ----

pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// An object's release (for children, the CR).
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// An object's component (`gateway`, `application-<app>`, `model-<app>`).
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// Who manages an object; the operator prunes only objects carrying its value.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
