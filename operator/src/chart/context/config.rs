//! Each pod's `config.yaml`: Takeoff's server and reader configuration, keys snake_cased,
//! within what a ConfigMap holds. The gateway's and every application's.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::InputError;
use crate::model::{snake_case, ContractRules};

/// The top-level keys of a serialised config, snake_cased; nested values kept as given.
pub(super) fn snake_keys(config: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map.into_iter().map(|(k, v)| (snake_case(&k), v)).collect(),
        _ => Map::new(),
    }
}

/// The most a ConfigMap holds (the API server refuses more).
const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// A config.yaml that fits its ConfigMap, or an error on the values that made it.
pub(super) fn fits(config: String, field: &str) -> Result<String, InputError> {
    if config.len() > MAX_CONFIG_MAP_BYTES {
        return Err(InputError::new(
            field,
            format!("config.yaml would be {} bytes; a ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}", config.len()),
        ));
    }
    Ok(config)
}

pub(super) fn config_yaml(
    rules: &ContractRules,
    server_config: Map<String, Value>,
    readers: Map<String, Value>,
) -> String {
    let mut server = Map::new();
    server.insert("server_config".into(), Value::Object(server_config));
    server.insert("readers_config".into(), Value::Object(readers));
    let mut doc = Map::new();
    doc.insert(rules.config_root.into(), Value::Object(server));
    crate::chart::config_yaml::to_yaml(&Value::Object(doc))
}
