//! schemathesis, an OpenAPI fuzzer written by others, reads the document `serve-api` serves
//! and sends what it generates from it — valid requests and invalid ones — to the real server
//! on the real control plane, then checks every answer against the same document: no 5xx,
//! only the status codes, content types and bodies the document gives for that operation,
//! schema-valid requests accepted. Zero findings means a client generated from the document
//! meets no surprise.
//!
//! schemathesis is installed by `scripts/install-test-deps.sh` (pinned, in its own venv under
//! `target/tools/`, linked as `target/tools/bin/schemathesis`); `SCHEMATHESIS=/path/to/it`
//! runs another copy.

use std::path::PathBuf;
use std::process::Command;

use crate::http_support::*;
use crate::support::*;

/// The ModelOrchestras the run finds in the key's namespace (and names from the document's
/// examples half of the time, so reads, writes and actions reach real objects).
const NAMES: [&str; 3] = ["chat", "embedder", "summariser"];

fn schemathesis() -> PathBuf {
    let path = std::env::var_os("SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| local_cluster::tools::bin_dir().join("schemathesis"));
    assert!(path.is_file(), "{} is missing: run scripts/install-test-deps.sh (or set SCHEMATHESIS)", path.display());
    path
}

/// The run's settings, beside the command line: the key's namespace and the objects'
/// names as dictionaries the generator draws from half of the time (it makes up the rest);
/// a watch is read for one event or two seconds.
fn config(namespace: &str) -> String {
    let names: Vec<String> = NAMES.iter().map(|n| format!("{n:?}")).collect();
    format!(
        r#"max-stream-events = 1

[dictionaries.namespaces]
values = ["{namespace}"]

[dictionaries.names]
values = [{names}]

[parameters]
"path.namespace" = {{ dictionary = "namespaces", probability = 0.5 }}
"path.name" = {{ dictionary = "names", probability = 0.5 }}
"query.name" = {{ dictionary = "names", probability = 0.5 }}

# The operator's own validation (parse and render) goes further than a JSON Schema can say:
# a schema-valid body it refuses is a 422 naming each field at fault, as the document says.
[[operations]]
include-operation-id-regex = "^(create|replace|refresh)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429"]

# The coverage phase walks every keyword of a schema: over the CRD's, some 70 000 bodies and
# minutes. Fuzzing sends these operations valid and invalid bodies all the same.
[[operations]]
include-operation-id-regex = "^(create|replace)$"
phases.coverage.enabled = false
"#,
        names = names.join(", ")
    )
}

#[tokio::test]
async fn schemathesis_finds_no_answer_the_openapi_document_does_not_describe() {
    let schemathesis = schemathesis();
    let cluster = Cluster::start("api_schemathesis").await;
    install_api_rbac(&cluster).await;
    let key = create_key(&cluster, &key_name(&cluster, "st"), &[&cluster.namespace], "edit");
    // Its requests are many and quick: a limit the run does not reach (429 is documented).
    let server = ApiServer::start(&cluster, &["--rate-limit", "1000", "--rate-burst", "1000"]).await;
    let client = server.client();
    let collection = format!("/api/v1/namespaces/{}/modelorchestras", cluster.namespace);
    for name in NAMES {
        let created = client.send_json("POST", &collection, &key, &cr(name, "chat")).await;
        assert_eq!(created.status, 201, "{}", created.text());
    }

    let dir = cluster.dir.0.join("schemathesis");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), &server.ca_pem).unwrap();
    std::fs::write(dir.join("schemathesis.toml"), config(&cluster.namespace)).unwrap();
    let output = Command::new(&schemathesis)
        .current_dir(&dir)
        .args(["--config-file", "schemathesis.toml", "run"])
        .arg(format!("{}/api/v1/openapi.json", server.url()))
        .args(["--tls-verify", "ca.crt", "--header", &format!("Authorization: Bearer {key}")])
        .args(["--checks", "all", "--phases", "examples,coverage,fuzzing"])
        // A bounded run, the same every time. One worker: in worker threads, Python 3.11's
        // `ast` fails deep in the CRD's schema ("AST constructor recursion depth mismatch").
        .args(["--max-examples", "50", "--seed", "20240611", "--workers", "1"])
        // A watch without events is cut after 2 s (a stream cut short is no finding).
        .args(["--request-timeout", "2", "--generation-database", "none", "--no-color"])
        .args(["--report", "junit", "--report-dir", "report"])
        .output()
        .expect("run schemathesis");
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // Shown with --nocapture, or on failure.
    println!("{report}");
    assert!(output.status.success(), "schemathesis found what the document does not say:\n{report}");
    // It ran every operation of the document ("Operations: 9 selected / 9 total").
    let operations = report.lines().find_map(|l| l.trim().strip_prefix("Operations:")).expect("the operations line");
    let counts: Vec<&str> = operations.split_whitespace().filter(|w| w.parse::<u32>().is_ok()).collect();
    assert!(counts.len() == 2 && counts[0] == counts[1] && counts[0] != "0", "{report}");
}
