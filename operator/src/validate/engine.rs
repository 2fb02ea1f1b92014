//! What an application's engine allows: a distributed-llama group is one group of `nodes`
//! members (a power of two) whose root alone serves and reads the model from the model
//! cache; Ollama pulls the models it lists itself and is reached through its own Service.
//! The settings of Takeoff's replicas that would be silently ignored are refused instead,
//! each naming its field and the fix.

use model_orchestra_api::values::{BufferFloatType, OLLAMA_MODEL_PATTERN};

use crate::error::InputError;
use crate::model::{ApplicationModel, EngineModel, OllamaSettings, Values};

/// The group sizes distributed-llama runs: its layers are split in powers of two.
const GROUP_SIZES: [i32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The errors of one application's engine.
pub(super) fn errors(app: &ApplicationModel, written: &Values, out: &mut Vec<InputError>) {
    if let EngineModel::Ollama(o) = &app.engine {
        return ollama_errors(app, o, written, out);
    }
    let EngineModel::DistributedLlama(d) = &app.engine else { return };
    let origin = &app.origin;
    if !GROUP_SIZES.contains(&d.nodes) {
        out.push(InputError::new(
            nodes_field(app, written),
            format!("{} is not a group size: nodes is the root and its workers, a power of two from 1 to 64", d.nodes),
        ));
    }
    // The chart's default model is a Takeoff one.
    if !model_named(app, written) {
        out.push(InputError::new(
            format!("{}.modelName", origin.path("readerConfig")),
            "a distributed-llama application needs its model's name in distributed-llama's list (e.g. \
             qwen3_0.6b_q40, llama3_2_1b_instruct_q40): set readerConfig.modelName",
        ));
    }
    if app.scaling.enabled {
        out.push(InputError::new(
            format!("{}.enabled", origin.path("scaling")),
            "a distributed-llama application is one group and does not autoscale: set scaling.enabled: false \
             (engine.distributedLlama.nodes sizes the group)",
        ));
    }
    if app.promotion.is_some() {
        out.push(InputError::new(
            format!("{}.enabled", origin.path("promotion")),
            "verified promotion asks the gateway, which routes only Takeoff readers: set promotion.enabled: false \
             for a distributed-llama application",
        ));
    }
    if app.pod.replica_count != 1 {
        out.push(InputError::new(
            origin.path("replicaCount"),
            format!(
                "{} replicas of a distributed-llama application: it runs one group (engine.distributedLlama.nodes \
                 sizes it); remove replicaCount",
                app.pod.replica_count
            ),
        ));
    }
    for (i, _) in app.pod.volume_mounts.iter().enumerate().filter(|(_, m)| m.name == "config") {
        out.push(InputError::new(
            format!("{}[{i}].name", origin.path("volumeMounts")),
            "a distributed-llama application has no Takeoff configuration volume `config`: mount a volume of your own",
        ));
    }
    // The template's modelsVolume is for its Takeoff applications.
    if origin.own_set.contains(&"modelsVolume") {
        out.push(InputError::new(
            origin.path("modelsVolume"),
            "a distributed-llama application keeps its model in its model cache (in distributed-llama's format): \
             remove modelsVolume and size modelCache instead",
        ));
    }
}

/// The errors of an Ollama application.
fn ollama_errors(app: &ApplicationModel, o: &OllamaSettings, written: &Values, out: &mut Vec<InputError>) {
    let origin = &app.origin;
    let models_at = format!("{}.ollama.models", origin.path("engine"));
    if o.models.is_empty() {
        out.push(InputError::new(
            &models_at,
            "an Ollama application serves the models it lists: list at least one, e.g. `models: [{name: smollm2:135m}]`",
        ));
    }
    let pattern = regex::Regex::new(OLLAMA_MODEL_PATTERN).expect("the model name pattern compiles");
    for (i, model) in o.models.iter().enumerate() {
        if model.len() > 250 || !pattern.is_match(model) {
            out.push(InputError::new(
                format!("{models_at}[{i}].name"),
                format!(
                    "`{}` is not an Ollama model name: `model`, `model:tag` or `namespace/model:tag`, of letters, digits, `.`, `_` and `-` (the registry goes in engine.ollama.registry.host)",
                    model.escape_debug()
                ),
            ));
        }
        if o.models[..i].contains(model) {
            out.push(InputError::new(format!("{models_at}[{i}].name"), format!("`{model}` is listed twice")));
        }
    }
    if written_cache_enabled(app, written) {
        out.push(InputError::new(
            format!("{}.enabled", origin.path("modelCache")),
            "an Ollama application pulls the models it lists itself: set modelCache.enabled: false (keep models \
             on a volume of your own with modelsVolume, e.g. a persistentVolumeClaim)",
        ));
    }
    if app.scaling.enabled {
        out.push(InputError::new(
            format!("{}.enabled", origin.path("scaling")),
            "scaling on the gateway's queue is Takeoff's: set scaling.enabled: false for an Ollama application \
             (replicaCount sizes it)",
        ));
    }
}

/// The errors of an application's `sleep`: only the model gateway wakes an application,
/// and it fronts Ollama applications of a ModelOrchestra that has nothing else.
pub(super) fn sleep_errors(app: &ApplicationModel, model_gateway: bool, out: &mut Vec<InputError>) {
    if app.sleep.is_none() {
        return;
    }
    let field = format!("{}.enabled", app.origin.path("sleep"));
    if !matches!(app.engine, EngineModel::Ollama(_)) {
        out.push(InputError::new(
            field,
            "only an open-engine (Ollama) application sleeps: the model gateway that wakes it routes only them; \
             set sleep.enabled: false",
        ));
    } else if !model_gateway {
        out.push(InputError::new(
            field,
            "the model gateway wakes a sleeping application, and a ModelOrchestra has one only when every \
             application is Ollama: move the Takeoff or distributed-llama applications to another ModelOrchestra, \
             or set sleep.enabled: false",
        ));
    }
}

/// Whether the user enabled the model cache (own or template's); the resolved model drops
/// it for an Ollama application.
fn written_cache_enabled(app: &ApplicationModel, written: &Values) -> bool {
    let own = written.applications.as_ref().and_then(|a| a.get(&app.key)).and_then(|a| a.model_cache.as_ref());
    let template = written.application_template.as_ref().and_then(|t| t.model_cache.as_ref());
    own.and_then(|c| c.enabled).or_else(|| template.and_then(|c| c.enabled)).unwrap_or(false)
}

/// An application that names neither an engine nor a model beside applications of an open
/// engine: it would run Takeoff with the chart's default model, and a stack that is not all
/// Ollama loses its model gateway (Takeoff's gateway, which routes none of the open engines,
/// takes its place). Almost always a misspelt key: a merge patch to
/// `spec.applications.<typo>` adds an application. Refused, so that nothing already serving
/// is replaced; the error names the application most likely meant.
pub(super) fn unnamed_beside_open_engines(m: &crate::model::Model, out: &mut Vec<InputError>) {
    let open: Vec<&str> =
        m.applications.iter().filter(|a| matches!(a.engine, EngineModel::Ollama(_))).map(|a| a.key.as_str()).collect();
    if open.is_empty() {
        return;
    }
    let unnamed = m.applications.iter().filter(|a| a.engine == EngineModel::Takeoff && !model_named(a, &m.written));
    for app in unnamed {
        let meant = open
            .iter()
            .map(|o| (strsim::levenshtein(o, &app.key), *o))
            .filter(|(distance, _)| *distance <= 3)
            .min()
            .map(|(_, o)| o);
        let fix = match meant {
            Some(o) => format!("did you mean `{o}`? Move these fields under spec.applications.{o} and remove this key"),
            None => "name its engine (engine.ollama.models) or its model (readerConfig.modelName)".to_string(),
        };
        out.push(InputError::new(
            app.origin.own.clone(),
            format!(
                "names neither an engine nor a model, so it would run Takeoff with the chart's default model and                  replace the model gateway of {} with Takeoff's gateway, which does not route them; {fix}",
                open.join(", ")
            ),
        ));
    }
}

/// What a group or an Ollama application is legal with but almost certainly wrong.
pub(super) fn warnings(app: &ApplicationModel, out: &mut Vec<InputError>) {
    if let EngineModel::Ollama(o) = &app.engine {
        if o.insecure {
            let registry = if o.registry.is_empty() { "Ollama's own registry" } else { o.registry.as_str() };
            out.push(InputError::new(
                format!("{}.ollama.registry.insecure", app.origin.path("engine")),
                format!(
                    "models are pulled from {registry} over plain HTTP, without a TLS certificate check: anyone on \
                     the way can change them. Only for a private or loopback registry"
                ),
            ));
        }
        return;
    }
    let EngineModel::DistributedLlama(d) = &app.engine else { return };
    let model = app.reader.model_name.as_deref().unwrap_or_default();
    if model.contains('/') {
        out.push(InputError::new(
            format!("{}.modelName", app.origin.path("readerConfig")),
            format!(
                "`{model}` looks like a Hugging Face repository; distributed-llama downloads models by its own \
                 names (e.g. qwen3_0.6b_q40; launch.py lists them), and its download will fail"
            ),
        ));
    }
    if model.ends_with("_q40") && d.buffer_float_type != BufferFloatType::Q80 {
        out.push(InputError::new(
            format!("{}.distributedLlama.bufferFloatType", app.origin.path("engine")),
            format!(
                "`{}` with the q40 model {model}: distributed-llama runs q40 weights only with q80 buffers \
                 (its root exits); set bufferFloatType: q80",
                d.buffer_float_type.as_str()
            ),
        ));
    }
}

/// Whether the user named the model: the application's own readerConfig, or its template's.
fn model_named(app: &ApplicationModel, written: &Values) -> bool {
    let own = written.applications.as_ref().and_then(|a| a.get(&app.key)).and_then(|a| a.reader_config.as_ref());
    let template = written.application_template.as_ref().and_then(|t| t.reader_config.as_ref());
    [own, template].into_iter().flatten().any(|r| r.model_name.is_some())
}

/// Where `nodes` was written: the application's own engine, else its template's.
fn nodes_field(app: &ApplicationModel, written: &Values) -> String {
    let own = written.applications.as_ref().and_then(|a| a.get(&app.key)).and_then(|a| a.engine.as_ref());
    let at = if own.and_then(|e| e.distributed_llama.as_ref()).is_some_and(|d| d.nodes.is_some()) {
        app.origin.own.clone()
    } else {
        "spec.applicationTemplate".into()
    };
    format!("{at}.engine.distributedLlama.nodes")
}
