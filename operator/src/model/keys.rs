//! Key conventions of the values: the CR's camelCase keys become the engine's snake_case.

/// `lowerCamelCase` → `snake_case` (`maxBatchSize` → `max_batch_size`; keys already in
/// snake_case are unchanged).
pub fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (i, ch) in key.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_keys_become_snake_case() {
        assert_eq!(snake_case("maxBatchSize"), "max_batch_size");
        assert_eq!(snake_case("modelName"), "model_name");
        assert_eq!(snake_case("already_snake"), "already_snake");
        assert_eq!(snake_case("internalPort"), "internal_port");
    }
}
