//! The real opm and operator-sdk as oracles: where the tests find them, the temp HOME
//! opm needs (its containers policy), a registry that outlives one test, a pool of
//! bundle images pushed once per test binary, and a small seeded RNG for generated cases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bundle_tool::bundle::generate::{bundle_files, write_bundle, GenerateOptions};
use bundle_tool::bundle::CrdMode;

/// An upstream program built by `scripts/build-go-tools.sh` (which `make test` runs
/// first): `target/tools/bin/NAME`, else NAME on PATH. Missing is a failure, never a skip.
pub fn go_tool(name: &str, module: &str) -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/bin").join(name);
    if built.is_file() {
        return built;
    }
    if let Some(found) = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
    {
        return found;
    }
    panic!("{name} is not built: run `scripts/build-go-tools.sh {module}` (make test does) — looked in target/tools/bin and PATH");
}

/// A HOME for the oracles: opm refuses to pull without a containers policy, which it
/// reads from `$HOME/.config/containers/policy.json`. Never the user's home. Removed on
/// drop unless it lives inside a directory that is removed for it ([`Home::inside`]).
pub struct Home(pub PathBuf, bool);

impl Home {
    pub fn new(tag: &str) -> Home {
        let dir = std::env::temp_dir().join(format!("bt-oracle-home-{tag}-{}", std::process::id()));
        Home::create(dir, true)
    }

    /// A HOME under `dir` (e.g. a [`SharedRegistry`]'s, removed with it): for statics,
    /// which are never dropped.
    pub fn inside(dir: &Path) -> Home {
        Home::create(dir.join("home"), false)
    }

    fn create(dir: PathBuf, remove_on_drop: bool) -> Home {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".config/containers")).unwrap();
        std::fs::write(
            dir.join(".config/containers/policy.json"),
            r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
        )
        .unwrap();
        Home(dir, remove_on_drop)
    }

    fn command(&self, program: PathBuf) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("HOME", &self.0)
            .env("XDG_CONFIG_HOME", self.0.join(".config"))
            .env("XDG_RUNTIME_DIR", &self.0)
            .env("TMPDIR", std::env::temp_dir())
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE")
            .current_dir(&self.0);
        cmd
    }

    pub fn opm(&self) -> Command {
        self.command(go_tool("opm", "opm"))
    }

    pub fn operator_sdk(&self) -> Command {
        self.command(go_tool("operator-sdk", "operator-sdk"))
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// stdout when the command succeeded, else its stderr as the error.
pub fn outcome(out: &Output) -> Result<String, String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A `docker-registry` on 127.0.0.1 (ephemeral port, temp storage) shared by the tests of
/// one binary. A watchdog shell stops it by PID and removes its directory once the test
/// process is gone, since a static is never dropped.
pub struct SharedRegistry {
    pub addr: String,
    /// Removed with the registry; a place for files that live as long as it.
    pub dir: PathBuf,
    /// The watchdog shell; it outlives the test process on purpose, to clean up after it.
    _watchdog: std::process::Child,
}

impl SharedRegistry {
    pub fn start(tag: &str) -> SharedRegistry {
        let dir = std::env::temp_dir().join(format!("bt-shared-registry-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n",
        )
        .unwrap();
        let script = r#"docker-registry serve "$0" >/dev/null 2>&1 & r=$!
while kill -0 "$1" 2>/dev/null && kill -0 "$r" 2>/dev/null; do sleep 0.5; done
kill "$r" 2>/dev/null; wait "$r" 2>/dev/null; rm -rf "$2""#;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&config)
            .arg(std::process::id().to_string())
            .arg(&dir)
            .env("REGISTRY_HTTP_ADDR", &addr)
            .env("REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY", dir.join("data"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sh");
        let start = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "docker-registry did not start on {addr} (is it installed? make test runs scripts/install-test-deps.sh)"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        SharedRegistry { addr, dir, _watchdog: watchdog }
    }
}

/// The image tag for a version: `v` + the version, `+` (not allowed in tags) as `_`.
pub fn tag(version: &str) -> String {
    format!("v{}", version.replace('+', "_"))
}

pub fn generate_options(version: &str, mode: CrdMode, claim_unlabeled: bool) -> GenerateOptions {
    GenerateOptions {
        version: semver::Version::parse(version).unwrap(),
        crd_version: "v1alpha1".into(),
        channels: vec!["stable".into()],
        default_channel: Some("stable".into()),
        image: "127.0.0.1/model-orchestra-operator".into(),
        crd_mode: mode,
        claim_unlabeled,
        http_api: false,
    }
}

pub fn metadata() -> bundle_tool::metadata::OperatorMetadata {
    bundle_tool::metadata::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../config/manifests/metadata.yaml")))
        .unwrap()
}

/// A generated bundle directory `dir/NAME`, with `edit` applied to its CSV (as YAML).
pub fn bundle_dir(
    dir: &Path,
    name: &str,
    version: &str,
    mode: CrdMode,
    claim_unlabeled: bool,
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let mut files =
        bundle_files(&generate_options(version, mode, claim_unlabeled), &metadata(), &bundle_tool::crds::crd())
            .unwrap();
    let csv_file = format!("manifests/{}", bundle_tool::bundle::CSV_FILE);
    let mut csv: serde_json::Value = serde_yaml::from_str(&files[&csv_file]).unwrap();
    edit(&mut csv);
    files.insert(csv_file, serde_yaml::to_string(&csv).unwrap());
    let out = dir.join(name);
    write_bundle(&out, &files).unwrap();
    out
}

/// Pushes the bundle directory as an image (in process: bundle-tool's image builder and
/// pusher, the same code as `bundle build --push`).
pub fn push_dir(rt: &tokio::runtime::Runtime, dir: &Path, reference: &str) {
    let image = bundle_tool::image::bundle_image(dir).unwrap();
    rt.block_on(bundle_tool::image::push::push(&image, reference, &Default::default()))
        .unwrap_or_else(|e| panic!("push {reference}: {e}"));
}

pub fn runtime() -> tokio::runtime::Runtime {
    // As bundle-tool's main does before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Images pushed once per test binary: `REGISTRY/pool/bundle:TAG` for each version.
pub struct Pool {
    pub registry: SharedRegistry,
    pub repo: String,
    /// Version -> image reference.
    pub images: BTreeMap<String, String>,
    /// Bundle directories by version (for `opm render DIR`).
    pub dirs: BTreeMap<String, PathBuf>,
}

impl Pool {
    pub fn image(&self, version: &str) -> &str {
        self.images.get(version).unwrap_or_else(|| panic!("version {version} is not in the pool"))
    }
}

/// Builds the pool: shared-mode bundles of `versions` (CSV name and spec.version set
/// to the version), pushed to a fresh shared registry.
pub fn pool(tag_name: &str, versions: &[String]) -> Pool {
    let registry = SharedRegistry::start(tag_name);
    let dir = registry.dir.join("bundles");
    let repo = format!("{}/pool/bundle", registry.addr);
    let rt = runtime();
    let mut images = BTreeMap::new();
    let mut dirs = BTreeMap::new();
    for v in versions {
        let d = bundle_dir(&dir, &tag(v), v, CrdMode::Shared, false, |_| {});
        let reference = format!("{repo}:{}", tag(v));
        push_dir(&rt, &d, &reference);
        images.insert(v.clone(), reference);
        dirs.insert(v.clone(), d);
    }
    Pool { registry, repo, images, dirs }
}

/// Lazily built, process-wide.
pub fn once<T>(cell: &'static OnceLock<T>, init: impl FnOnce() -> T) -> &'static T {
    cell.get_or_init(init)
}

/// SplitMix64: a small, seedable generator so a failing corpus can be replayed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// The first line where `a` and `b` differ, for failure messages.
pub fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            let cut = |s: &str| s.chars().take(300).collect::<String>();
            return format!("line {}:\n  opm:         {}\n  bundle-tool: {}", i + 1, cut(x), cut(y));
        }
    }
    format!(
        "one output is a prefix of the other ({} vs {} lines, {} vs {} bytes)",
        a.lines().count(),
        b.lines().count(),
        a.len(),
        b.len()
    )
}
