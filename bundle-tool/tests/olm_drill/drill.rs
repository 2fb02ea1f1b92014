//! The drill's parts: the programs it runs, a scratch directory with a log per program, the
//! maintainer's bundle-tool commands against the cluster's registry, the cluster
//! (local-cluster, with a real node whose containerd pulls from that registry) with OLM v1,
//! and the questions it asks of them.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::future::Future;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, Once};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use kube::Client;
use local_cluster::Cluster;
use serde_json::Value;

use crate::olm_v1::OlmV1;
use crate::support::Temp;

/// The programs the drill runs, each checked to exist (`make olm-drill` builds them).
pub struct Programs {
    pub bundle_tool: PathBuf,
    /// This tree's operator as a static binary, for the operator image of the lines the
    /// drill releases itself (0.1.1).
    pub static_operator: PathBuf,
    /// Each release's operator, rebuilt (static) from the commit `bundles/releases.yaml`
    /// records for it, for the image its released bundle names; by version.
    pub released: BTreeMap<String, PathBuf>,
}

impl Programs {
    pub fn locate() -> Programs {
        let bundle_tool = PathBuf::from(env!("CARGO_BIN_EXE_bundle-tool"));
        let present = |path: PathBuf, how: &str| {
            assert!(path.is_file(), "{} is not built: {how} (`make olm-drill` does)", path.display());
            path
        };
        let static_operator =
            present(local_cluster::tools::static_dir().join("model-orchestra-operator"), "make static");
        let mut released = BTreeMap::new();
        for (version, recorded) in released_commits() {
            // scripts/released-operator.sh keeps it under the checkout's target/, with its commit.
            let dir = root().join("target/releases").join(&version);
            let how = format!("scripts/released-operator.sh {version}");
            let binary = present(dir.join("model-orchestra-operator"), &how);
            let built_from = std::fs::read_to_string(dir.join("commit")).unwrap_or_default();
            assert_eq!(
                built_from.trim(),
                recorded,
                "{} was built from another commit than bundles/releases.yaml records for {version}: run {how}",
                binary.display()
            );
            released.insert(version, binary);
        }
        Programs { bundle_tool, static_operator, released }
    }
}

/// The checkout (the drill reads bundles/, catalog/, config/samples/).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Every release `bundles/releases.yaml` records, with the commit it was cut from.
fn released_commits() -> Vec<(String, String)> {
    let path = root().join("bundles/releases.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let releases: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    releases["releases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let field = |f: &str| r[f].as_str().unwrap_or_else(|| panic!("{}: a release without {f}", path.display()));
            (field("version").to_string(), field("commit").to_string())
        })
        .collect()
}

/// The bundle image the released catalog (`catalog/configs`) names for `version`
/// (`ghcr.io/titanml/model-orchestra-operator-bundle:v1.0.0`).
pub fn released_bundle_image(version: &str) -> String {
    let path = root().join("catalog/configs/model-orchestra-operator/catalog.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = format!("model-orchestra-operator.v{version}");
    let bundle = serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| <Value as serde::Deserialize>::deserialize(d).ok())
        .find(|o| o["schema"] == "olm.bundle" && o["name"] == name);
    bundle
        .and_then(|o| o["image"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{}: the released catalog lists no bundle {name}", path.display()))
}

/// The path a mirrored image has in the cluster's registry: its name without the registry
/// host (`ghcr.io/titanml/x:v1` → `titanml/x:v1`).
fn mirrored_path(image: &str) -> &str {
    image.split_once('/').map_or(image, |(_, path)| path)
}

/// Runs `command` with stdout and stderr appended to `log`; on failure, says which command
/// failed and quotes the end of its log.
fn run_logged(log: &Path, command: &mut Command) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    writeln!(file, "$ {}", describe(command)).expect("write the log");
    let out = command
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("the log file"))
        .stderr(file)
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", describe(command)));
    if out.success() {
        return Ok(());
    }
    Err(format!("`{}` failed ({out}); end of {}:\n{}", describe(command), log.display(), local_cluster::tail(log, 15)))
}

fn describe(command: &Command) -> String {
    let program = Path::new(command.get_program()).file_name().unwrap_or(OsStr::new("?")).to_string_lossy();
    std::iter::once(program.into_owned())
        .chain(command.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A path as a command's argument (the drill's paths, temp dirs and the checkout, are UTF-8).
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", path.display()))
}

/// The maintainer: bundle-tool against the cluster's registry, in a scratch copy of bundles/.
/// Cloned into blocking tasks (the commands run while OLM starts).
#[derive(Clone)]
pub struct Maintainer {
    pub tool: PathBuf,
    static_operator: PathBuf,
    released: BTreeMap<String, PathBuf>,
    /// `127.0.0.1:<port>/model-orchestra-operator`: the images are `<base>`, `<base>-bundle`
    /// and `<base>-catalog`.
    pub base: String,
    registry: String,
    work: PathBuf,
    logs: PathBuf,
}

impl Maintainer {
    pub fn bundles(&self) -> PathBuf {
        self.work.join("bundles")
    }

    /// bundle-tool, run from the checkout as the maintainer does (it reads config/manifests).
    fn command(&self) -> Command {
        let mut command = Command::new(&self.tool);
        command.current_dir(root());
        command
    }

    /// Runs bundle-tool, its output appended to `logs/<log>.log`.
    pub fn bundle_tool(&self, log: &str, args: &[&str]) -> Result<(), String> {
        run_logged(&self.logs.join(format!("{log}.log")), self.command().args(args))
    }

    /// Runs bundle-tool and returns what it prints on stdout (manifests a user pipes to
    /// kubectl); a failure names the command and quotes stderr.
    pub fn output(&self, args: &[&str]) -> String {
        let mut command = self.command();
        command.args(args);
        let out = command.output().unwrap_or_else(|e| panic!("{}: {e}", describe(&command)));
        assert!(out.status.success(), "`{}` failed: {}", describe(&command), String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// What `logs/<log>.log` holds.
    pub fn log(&self, log: &str) -> String {
        std::fs::read_to_string(self.logs.join(format!("{log}.log"))).unwrap_or_default()
    }

    /// The release steps of the book's "Publishing a version": bundle generate (refused
    /// if it would change a released bundle or break the released CRD), bundle validate,
    /// the static operator's image, the bundle image.
    pub fn release(&self, version: &str, crd_version: &str, channel: &str) {
        let (bundles, bundle) = (self.bundles(), self.bundles().join(version));
        let image = format!("{}:v{version}", self.base);
        #[rustfmt::skip]
        let steps = [
            ("bundle generate", vec!["bundle", "generate", "--version", version, "--crd-version", crd_version,
                "--image", &self.base, "--claim-unlabeled", "--channels", channel, "--default-channel", channel,
                "--output", arg(&bundles)]),
            ("bundle validate", vec!["bundle", "validate", arg(&bundle)]),
            ("operator image", vec!["image", "build", "--binary", arg(&self.static_operator), "--push", &image]),
        ];
        for (what, args) in steps {
            self.bundle_tool(&format!("release-{version}"), &args)
                .unwrap_or_else(|e| panic!("the maintainer's {what} of {version}: {e}"));
        }
        self.push_bundle(version, &bundle);
    }

    /// `bundle-tool image build --binary <this tree's static operator> --push IMAGE`.
    pub fn push_operator_image(&self, version: &str, image: &str) {
        let binary = arg(&self.static_operator).to_string();
        self.bundle_tool(&format!("release-{version}"), &["image", "build", "--binary", &binary, "--push", image])
            .unwrap_or_else(|e| panic!("the operator image of {version}: {e}"));
    }

    /// A scratch copy of the checkout's bundles/ (the released bundles, their CRDs and
    /// records) named `name`, to generate bundles beside.
    pub fn scratch_bundles(&self, name: &str) -> PathBuf {
        let dir = self.work.join(name);
        let copied = Command::new("cp").arg("-r").arg(root().join("bundles")).arg(&dir).status();
        assert!(copied.is_ok_and(|s| s.success()), "copy bundles/ to {}", dir.display());
        dir
    }

    /// The versions `bundles/releases.yaml` records.
    pub fn released_versions(&self) -> Vec<String> {
        self.released.keys().cloned().collect()
    }

    /// A release as it was released, where a cluster mirroring ghcr.io pulls it from: the
    /// bundle (`bundles/VERSION`, verified against `bundles/releases.yaml` by `bundle build`)
    /// at the path of the image the released catalog names, and the operator image its CSV
    /// names (`ghcr.io/titanml/model-orchestra-operator:vVERSION`) built from the release's
    /// binary. Returns the operator image the CSV names.
    pub fn push_release(&self, version: &str) -> String {
        let bundle = format!("{}/{}", self.registry, mirrored_path(&released_bundle_image(version)));
        let dir = self.bundles().join(version);
        self.bundle_tool(&format!("release-{version}"), &["bundle", "build", arg(&dir), "--push", &bundle])
            .unwrap_or_else(|e| panic!("the bundle image of {version} as released: {e}"));
        let csv = dir.join("manifests/model-orchestra-operator.clusterserviceversion.yaml");
        let text = std::fs::read_to_string(&csv).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
        let csv: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
        let named =
            csv["metadata"]["annotations"]["containerImage"].as_str().expect("the CSV names its image").to_string();
        let mirrored = format!("{}/{}", self.registry, mirrored_path(&named));
        let binary =
            arg(self.released.get(version).unwrap_or_else(|| panic!("no released binary of {version}"))).to_string();
        self.bundle_tool(&format!("release-{version}"), &["image", "build", "--binary", &binary, "--push", &mirrored])
            .unwrap_or_else(|e| panic!("the operator image of {version} as released: {e}"));
        named
    }

    /// The released catalog, `catalog/configs` as checked in, validated, built and pushed as
    /// `<base>-catalog:<tag>` (`make catalog-build-push` from the checkout).
    pub fn publish_released_catalog(&self, tag: &str) {
        let image = self.catalog_image(tag);
        let configs = root().join("catalog/configs");
        let log = format!("catalog-{tag}");
        self.bundle_tool(&log, &["catalog", "validate", arg(&configs)])
            .and_then(|()| self.bundle_tool(&log, &["catalog", "build", arg(&configs), "--push", &image]))
            .unwrap_or_else(|e| panic!("the released catalog as {tag}: {e}"));
    }

    /// `bundle build DIR --push <base>-bundle:v<VERSION>`.
    pub fn push_bundle(&self, version: &str, dir: &Path) {
        let image = format!("{}-bundle:v{version}", self.base);
        self.bundle_tool(&format!("release-{version}"), &["bundle", "build", arg(dir), "--push", &image])
            .unwrap_or_else(|e| panic!("the bundle image of {version}: {e}"));
    }

    /// The semver template listing the bundle images of `versions`, rendered to
    /// `catalog-<tag>/model-orchestra-operator/catalog.yaml`; returns the catalog directory.
    pub fn render_catalog(&self, tag: &str, versions: &[&str]) -> PathBuf {
        let template = self.work.join(format!("template-{tag}.yaml"));
        let mut text = String::from("schema: olm.semver\ngenerateMajorChannels: true\ngenerateMinorChannels: false\n");
        text.push_str("stable:\n  bundles:\n");
        for v in versions {
            // A release by the name the released catalog gives it; the drill's own in its registry.
            let image = if self.released.contains_key(*v) {
                released_bundle_image(v)
            } else {
                format!("{}-bundle:v{v}", self.base)
            };
            text.push_str(&format!("  - image: {image}\n"));
        }
        std::fs::write(&template, text).expect("write the template");
        let dir = self.work.join(format!("catalog-{tag}"));
        let out = dir.join("model-orchestra-operator/catalog.yaml");
        std::fs::create_dir_all(out.parent().unwrap()).expect("the catalog directory");
        // The bundles of the scratch bundles/ are read from it, as `make catalog` reads the
        // checkout's (the released ones are named ghcr.io/…, which only the cluster mirrors);
        // any other from its pushed image.
        let (bundles, cache) = (self.bundles(), self.work.join("bundle-cache"));
        #[rustfmt::skip]
        let args = ["catalog", "render", arg(&template), "--bundles-dir", arg(&bundles), "--cache-dir", arg(&cache),
            "-o", arg(&out)];
        self.bundle_tool(&format!("catalog-{tag}"), &args).unwrap_or_else(|e| panic!("catalog render {tag}: {e}"));
        dir
    }

    /// Render, validate, build and push the catalog `<tag>` listing `versions`.
    pub fn publish_catalog(&self, tag: &str, versions: &[&str]) {
        let dir = self.render_catalog(tag, versions);
        let image = self.catalog_image(tag);
        let log = format!("catalog-{tag}");
        self.bundle_tool(&log, &["catalog", "validate", arg(&dir)])
            .and_then(|()| self.bundle_tool(&log, &["catalog", "build", arg(&dir), "--push", &image]))
            .unwrap_or_else(|e| panic!("the catalog {tag} listing {versions:?}: {e}"));
    }

    pub fn catalog_image(&self, tag: &str) -> String {
        format!("{}-catalog:{tag}", self.base)
    }

    /// The tags of a repository (`model-orchestra-operator-catalog`), from the registry's
    /// own API: an independent witness of what was pushed.
    pub fn tags(&self, repository: &str) -> Vec<String> {
        let mut stream = std::net::TcpStream::connect(&self.registry).expect("connect to the registry");
        write!(stream, "GET /v2/{repository}/tags/list HTTP/1.0\r\nHost: {}\r\n\r\n", self.registry).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("the registry's answer");
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let list: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("tags of {repository}: {e}: {body}"));
        list["tags"].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect()
    }
}

/// An operator's ServiceAccount: the user the API server names in the audit log.
pub fn line_user(line: &str) -> String {
    format!("system:serviceaccount:model-orchestra-{line}:model-orchestra-operator-{line}")
}

/// The whole drill: stops, in order, OLM and the cluster (its registry, its real node and the
/// operator pods OLM made), then removes the scratch directory. On a failure, prints the end
/// of every log first, then what the drill asked to be shown (OLM's objects and logs), then
/// the failure's message again: CI quotes the end of the output, and a timeout's message
/// would otherwise be above everything else.
pub struct Drill {
    pub maintainer: Maintainer,
    /// `olm-v1-drill` or `olm-v0-drill`: the prefix of its lines, its scratch directory.
    name: &'static str,
    started: Instant,
    /// OLM v1's processes (OLM v0 runs as pods of the cluster).
    olm_v1: Option<OlmV1>,
    cluster: Option<Cluster>,
    client: Option<Client>,
    work: Temp,
    /// kubectl commands whose output a failure prints ([`Drill::on_failure_show`]).
    on_failure: Vec<Vec<String>>,
}

impl Drill {
    /// The programs, a scratch directory and the cluster (whose registry the maintainer
    /// pushes to); OLM v1 comes with [`Drill::start_olm_v1`], OLM v0 is installed on it.
    pub async fn start(name: &'static str) -> Drill {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let started = Instant::now();
        let programs = Programs::locate();
        let work = Temp::new(name);
        let logs = work.0.join("logs");
        std::fs::create_dir_all(&logs).expect("the logs directory");
        let bundles = work.0.join("bundles");
        let copied = Command::new("cp").arg("-r").arg(root().join("bundles")).arg(&bundles).status();
        assert!(copied.is_ok_and(|s| s.success()), "copy bundles/ to {}", bundles.display());
        let cluster = Cluster::start(local_cluster::Options::default()).await.expect("the local cluster starts");
        let client = cluster.client().await.expect("an admin client");
        let registry = cluster.registry.clone().expect("the cluster's registry (it has a real node)");
        let maintainer = Maintainer {
            tool: programs.bundle_tool.clone(),
            static_operator: programs.static_operator.clone(),
            released: programs.released.clone(),
            base: format!("{registry}/model-orchestra-operator"),
            registry,
            work: work.0.clone(),
            logs,
        };
        record_panic_messages();
        let drill = Drill {
            maintainer,
            name,
            started,
            olm_v1: None,
            cluster: Some(cluster),
            client: Some(client),
            work,
            on_failure: Vec::new(),
        };
        drill.step(&format!(
            "cluster up with a real node; registry {}; audit log {}",
            drill.maintainer.registry,
            drill.cluster().audit_log.display()
        ));
        drill
    }

    /// OLM v1 on the cluster (catalogd, operator-controller, in its namespaces).
    pub async fn start_olm_v1(&mut self) {
        let olm = OlmV1::start(self).await;
        self.step(&format!(
            "OLM v1 up (catalogd serves on 127.0.0.1:{} in the cluster's namespace)",
            olm.catalogs_port
        ));
        self.olm_v1 = Some(olm);
    }

    pub fn cluster(&self) -> &Cluster {
        self.cluster.as_ref().expect("the cluster has started")
    }

    pub fn client(&self) -> Client {
        self.client.clone().expect("the cluster has started")
    }

    pub fn work(&self) -> &Path {
        &self.work.0
    }

    pub fn logs(&self) -> &Path {
        &self.maintainer.logs
    }

    /// On a failure, prints `kubectl ARGS` (as the admin, with a short request timeout) after
    /// the logs: the state of what the drill waited on.
    pub fn on_failure_show(&mut self, args: &[&str]) {
        self.on_failure.push(args.iter().map(|a| a.to_string()).collect());
    }

    /// Prints a step, with the seconds since the drill began.
    pub fn step(&self, what: &str) {
        eprintln!("{} [{} s]: {what}", self.name, self.started.elapsed().as_secs());
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The cluster's kubectl as the admin, as a user types it; `stdin` is piped in (`-f -`).
    /// Returns stdout; a failure names the command and quotes stderr.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut command = self.cluster().kubectl();
        command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")));
        let input = stdin.unwrap_or_default().to_string();
        let mut pipe = child.stdin.take().expect("kubectl's stdin");
        let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("kubectl's output");
        let _ = writer.join();
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Server-side applies every object of a YAML stream as the admin (field manager
    /// `olm-drill`): what the drill sets up beside the user's commands.
    pub async fn apply_yaml(&self, text: &str) {
        for document in serde_yaml::Deserializer::from_str(text) {
            let object: Value = serde::Deserialize::deserialize(document).expect("a YAML document");
            if !object.is_null() {
                self.apply(&object).await;
            }
        }
    }

    pub async fn apply(&self, object: &Value) {
        let api = self
            .api_for(
                object["apiVersion"].as_str().unwrap_or_default(),
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["namespace"].as_str(),
            )
            .await;
        let name = object["metadata"]["name"].as_str().expect("metadata.name");
        api.patch(name, &PatchParams::apply("olm-drill").force(), &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]));
    }

    async fn api_for(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client(), &gvk)
            .await
            .unwrap_or_else(|e| panic!("{api_version} {kind} is not served: {e}"));
        match (capabilities.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client(), ns, &resource),
            _ => Api::all_with(self.client(), &resource),
        }
    }

    /// A namespaced API of a resource this drill names (`group/version`, `plural`).
    pub fn namespaced(&self, api_version: &str, kind: &str, plural: &str, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client(), namespace, &resource(api_version, kind, plural))
    }

    pub fn cluster_scoped(&self, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        Api::all_with(self.client(), &resource(api_version, kind, plural))
    }

    /// Polls `probe` every half second until it answers `Ok`; after `limit` seconds, fails
    /// naming `what` and the probe's last answer. A program of the drill that exits
    /// meanwhile fails it at once, with its log.
    pub async fn wait_until<T, F, Fut>(&self, limit: u64, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let start = Instant::now();
        loop {
            let last = match probe().await {
                Ok(v) => return v,
                Err(seen) => seen,
            };
            self.check_alive(what);
            if start.elapsed() > Duration::from_secs(limit) {
                panic!("{what}: not within {limit} s (last seen: {last})");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn check_alive(&self, waiting_for: &str) {
        let mut exited = vec![];
        if let Some(olm) = &self.olm_v1 {
            exited.extend(olm.exited());
        }
        if let Some((name, status)) = exited.first() {
            let log = self.logs().join(format!("{name}.log"));
            panic!(
                "{name} exited ({status}) while waiting until {waiting_for}; end of {}:\n{}",
                log.display(),
                local_cluster::tail(&log, 25)
            );
        }
    }

    /// The Running pods of the `line` operator's Deployment (the one OLM made from its CSV).
    pub async fn line_pods(&self, line: &str) -> Vec<k8s_openapi::api::core::v1::Pod> {
        let namespace = format!("model-orchestra-{line}");
        let selector = format!("app.kubernetes.io/instance=model-orchestra-operator-{line}");
        let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(self.client(), &namespace);
        let list = pods.list(&kube::api::ListParams::default().labels(&selector)).await.expect("list the line's pods");
        list.items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect()
    }

    /// Whether the API server's authorizer lets the `line` operator's ServiceAccount do
    /// `verb` on `resource` (`plural.group`, `/subresource` optional) in `namespace`
    /// (None: in every namespace) — `kubectl auth can-i --as` as a SubjectAccessReview.
    pub async fn can(&self, line: &str, verb: &str, resource: &str, namespace: Option<&str>) -> bool {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        let namespace_of_account = format!("model-orchestra-{line}");
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(line_user(line)),
                // What the API server adds to every ServiceAccount's token.
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{namespace_of_account}"),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(plural.into()),
                    subresource: (!subresource.is_empty()).then(|| subresource.into()),
                    namespace: namespace.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client());
        let answer = api.create(&PostParams::default(), &review).await.expect("a SubjectAccessReview");
        answer.status.is_some_and(|s| s.allowed)
    }

    /// The users of write requests (create, update, patch, delete — dry runs too: a line
    /// that tries to write a CR's children has taken it) to objects in `namespace`, among
    /// the operator lines' ServiceAccounts, from the API server's audit log. Events are left
    /// out: a line tells about a CR that no line serves (`NotServed`) without serving it.
    pub fn writers(&self, namespace: &str) -> BTreeSet<String> {
        self.operator_writes(namespace).filter(|e| e.resource() != "events").map(|e| e.user.username).collect()
    }

    /// The operators' patches in `namespace`, from the audit log.
    pub fn operator_patches(&self, namespace: &str) -> Vec<local_cluster::audit::AuditEvent> {
        self.operator_writes(namespace).filter(|e| e.verb == "patch").collect()
    }

    fn operator_writes(&self, namespace: &str) -> impl Iterator<Item = local_cluster::audit::AuditEvent> + '_ {
        let namespace = namespace.to_string();
        self.cluster().audit().all().into_iter().filter(move |e| {
            matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
                && e.namespace() == namespace
                && e.user.username.starts_with("system:serviceaccount:model-orchestra-")
        })
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut logs: Vec<PathBuf> = std::fs::read_dir(self.logs())
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            logs.sort();
            for log in logs {
                eprintln!("--- {}\n{}", log.display(), local_cluster::tail(&log, 25));
            }
            if let Some(cluster) = &self.cluster {
                for args in &self.on_failure {
                    let out = cluster.kubectl().arg("--request-timeout=10s").args(args).output();
                    let shown = match out {
                        Ok(out) => {
                            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
                        }
                        Err(e) => e.to_string(),
                    };
                    eprintln!("--- kubectl {}\n{}", args.join(" "), shown.trim_end());
                }
            }
            eprintln!("--- {} failed: {}", self.name, panic_message().unwrap_or_else(|| "(see above)".into()));
        }
        self.olm_v1.take();
        self.cluster.take();
    }
}

/// Each thread's last panic message, kept by a panic hook installed once (beside the
/// default one, which still prints it where it happens).
static PANICS: Mutex<Vec<(ThreadId, String)>> = Mutex::new(Vec::new());

fn record_panic_messages() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let place = info.location().map(|l| format!(" ({l})")).unwrap_or_default();
            if let Ok(mut panics) = PANICS.lock() {
                panics.push((std::thread::current().id(), format!("{message}{place}")));
            }
            default(info);
        }));
    });
}

/// The message of this thread's last panic; else (a panic resumed from a blocking task) the
/// last one of any thread.
fn panic_message() -> Option<String> {
    let panics = PANICS.lock().ok()?;
    let me = std::thread::current().id();
    panics.iter().rev().find(|(t, _)| *t == me).or(panics.last()).map(|(_, m)| m.clone())
}

pub fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The condition `type` of an object's status (`{"status": "True", "message": …}`).
pub fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// `Type=Status: message` of a condition, for messages about what was seen.
pub fn describe_condition(object: &DynamicObject, type_: &str) -> String {
    match condition(object, type_) {
        Some(c) => {
            let field = |f: &str| c[f].as_str().unwrap_or_default().to_string();
            format!("{type_}={} ({}): {}", field("status"), field("reason"), field("message"))
        }
        None => format!("no {type_} condition"),
    }
}
