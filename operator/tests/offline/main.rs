//! The offline tier: everything about the operator that needs no cluster and no program
//! but this crate's (the CLI, the chart's contract, rendering, validation, the generated
//! files, the README's and the book's examples, the module graph). `make test-unit` runs it.

mod common;

mod cli;
mod contract;
mod contract_v1alpha2;
mod distributed_llama;
mod docs;
mod generated_files;
mod golden;
mod gpu_and_checksum;
mod hostile_values;
mod invalid_input;
mod keys;
mod model_gateway;
mod module_graph;
mod stopping;
mod yaml_emitter;
