//! The numeric bounds the CRD schema declares (the `range` attributes of the API types), checked
//! on the typed spec, so that offline rendering rejects what the API server would. A test
//! walks the generated schema and proves every declared bound is checked here.

use model_orchestra_api::values::{ReaderConfig, Scaling};

use crate::error::InputError;
use crate::model::{ApplicationValues, Values};

fn at_least(value: Option<impl Into<i64>>, min: i64, field: &str) -> Result<(), InputError> {
    match value.map(Into::into) {
        Some(n) if n < min => Err(InputError::new(field, format!("{n} is less than the minimum {min}"))),
        _ => Ok(()),
    }
}

fn at_most(value: Option<impl Into<i64>>, max: i64, field: &str) -> Result<(), InputError> {
    match value.map(Into::into) {
        Some(n) if n > max => Err(InputError::new(field, format!("{n} is greater than the maximum {max}"))),
        _ => Ok(()),
    }
}

/// Every bound of the values as written, in each place it is written.
pub(super) fn spec(spec: &Values, out: &mut Vec<InputError>) {
    if let Some(g) = &spec.gateway {
        out.extend(at_least(g.replica_count, 0, "spec.gateway.replicaCount").err());
        let port = g.config.as_ref().and_then(|c| c.internal_port);
        out.extend(at_least(port, 1, "spec.gateway.config.internalPort").err());
        out.extend(at_most(port, 65535, "spec.gateway.config.internalPort").err());
    }
    if let Some(t) = &spec.application_template {
        out.extend(application(t, "spec.applicationTemplate").err());
    }
    for (key, app) in spec.applications.iter().flatten() {
        out.extend(application(app, &format!("spec.applications.{key}")).err());
    }
}

fn application(a: &ApplicationValues, field: &str) -> Result<(), InputError> {
    at_least(a.replica_count, 0, &format!("{field}.replicaCount"))?;
    at_least(a.progress_deadline_seconds, 1, &format!("{field}.progressDeadlineSeconds"))?;
    if let Some(r) = &a.reader_config {
        reader(r, &format!("{field}.readerConfig"))?;
    }
    if let Some(s) = &a.scaling {
        scaling(s, &format!("{field}.scaling"))?;
    }
    if let Some(d) = a.engine.as_ref().and_then(|e| e.distributed_llama.as_ref()) {
        let at = |name: &str| format!("{field}.engine.distributedLlama.{name}");
        at_least(d.nthreads, 1, &at("nthreads"))?;
        at_least(d.max_seq_len, 0, &at("maxSeqLen"))?;
        at_least(d.port, 1, &at("port"))?;
        at_most(d.port, 65535, &at("port"))?;
    }
    Ok(())
}

fn reader(r: &ReaderConfig, field: &str) -> Result<(), InputError> {
    at_least(r.max_batch_size, 1, &format!("{field}.maxBatchSize"))?;
    at_least(r.tensor_parallel, 1, &format!("{field}.tensorParallel"))?;
    at_least(r.max_sequence_length, 1, &format!("{field}.maxSequenceLength"))?;
    at_least(r.cuda_graph_cache_capacity, 0, &format!("{field}.cudaGraphCacheCapacity"))?;
    at_least(r.prefill_chunk_size, 1, &format!("{field}.prefillChunkSize"))?;
    at_least(r.quantize_cache_bits, 0, &format!("{field}.quantizeCacheBits"))?;
    at_least(r.lmfe_max_consecutive_whitespaces, 0, &format!("{field}.lmfeMaxConsecutiveWhitespaces"))
}

fn scaling(s: &Scaling, field: &str) -> Result<(), InputError> {
    at_least(s.metric_target.as_ref().and_then(|m| m.value), 0, &format!("{field}.metricTarget.value"))?;
    let Some(spec) = &s.spec else { return Ok(()) };
    let at = |name: &str| format!("{field}.spec.{name}");
    at_least(spec.polling_interval, 0, &at("pollingInterval"))?;
    at_least(spec.initial_cooldown_period, 0, &at("initialCooldownPeriod"))?;
    at_least(spec.cooldown_period, 0, &at("cooldownPeriod"))?;
    at_least(spec.idle_replica_count, 0, &at("idleReplicaCount"))?;
    at_least(spec.min_replica_count, 0, &at("minReplicaCount"))?;
    at_least(spec.max_replica_count, 0, &at("maxReplicaCount"))?;
    if let Some(f) = &spec.fallback {
        at_least(Some(f.failure_threshold), 0, &at("fallback.failureThreshold"))?;
        at_least(Some(f.replicas), 0, &at("fallback.replicas"))?;
    }
    Ok(())
}
