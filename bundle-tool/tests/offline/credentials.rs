//! Registry credentials from the Docker config file, including real credential-helper
//! processes (`docker-credential-<name>` on PATH, speaking the helper protocol).

use std::path::{Path, PathBuf};
use std::sync::Once;

use bundle_tool::image::auth::{auth_for, Credentials};
use oci_client::secrets::RegistryAuth;

/// Writes the helpers once and puts them first on PATH (one value for every test here,
/// so the tests may run in parallel).
fn helpers() -> PathBuf {
    static ONCE: Once = Once::new();
    let dir = std::env::temp_dir().join(format!("bt-cred-helpers-{}", std::process::id()));
    ONCE.call_once(|| {
        std::fs::create_dir_all(&dir).unwrap();
        // "pass": answers for registry.example.com only; "fails": always errors.
        let pass = "#!/bin/sh\nread reg\n[ \"$1\" = get ] || exit 2\nif [ \"$reg\" = registry.example.com ]; then echo '{\"ServerURL\":\"registry.example.com\",\"Username\":\"robot\",\"Secret\":\"s3cret\"}'; else echo 'credentials not found in native keychain'; exit 1; fi\n";
        let fails = "#!/bin/sh\necho 'keychain locked' >&2\nexit 1\n";
        for (name, body) in [("pass", pass), ("fails", fails)] {
            let p = dir.join(format!("docker-credential-{name}"));
            std::fs::write(&p, body).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::var("PATH").unwrap_or_default();
        // SAFETY: set once, before any helper runs, to the same value for every test.
        unsafe { std::env::set_var("PATH", format!("{}:{path}", dir.display())) };
    });
    dir
}

fn config(dir: &Path, name: &str, json: &str) -> Credentials {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, json).unwrap();
    Credentials { docker_config: Some(file), ..Default::default() }
}

fn basic(auth: RegistryAuth) -> Option<(String, String)> {
    match auth {
        RegistryAuth::Basic(u, p) => Some((u, p)),
        _ => None,
    }
}

#[test]
fn a_per_registry_credential_helper_is_asked_first() {
    let dir = helpers();
    let creds = config(
        &dir,
        "helpers",
        r#"{"credHelpers": {"registry.example.com": "pass"}, "auths": {"registry.example.com": {"auth": "aW5saW5lOnVzZXI="}}}"#,
    );
    assert_eq!(basic(auth_for("registry.example.com", &creds).unwrap()), Some(("robot".into(), "s3cret".into())));
}

#[test]
fn inline_auths_are_used_when_no_helper_names_the_registry() {
    let dir = helpers();
    let creds = config(
        &dir,
        "inline",
        r#"{"credHelpers": {"other.example.com": "fails"}, "auths": {"https://registry.example.com/v1/": {"auth": "aW5saW5lOnVzZXI="}}}"#,
    );
    assert_eq!(basic(auth_for("registry.example.com", &creds).unwrap()), Some(("inline".into(), "user".into())));
}

#[test]
fn the_default_credential_store_answers_and_unknown_registries_stay_anonymous() {
    let dir = helpers();
    let creds = config(&dir, "store", r#"{"credsStore": "pass"}"#);
    assert_eq!(basic(auth_for("registry.example.com", &creds).unwrap()), Some(("robot".into(), "s3cret".into())));
    assert!(matches!(auth_for("127.0.0.1:5000", &creds).unwrap(), RegistryAuth::Anonymous));
}

#[test]
fn a_failing_helper_is_an_error_naming_the_helper_and_the_fix() {
    let dir = helpers();
    let creds = config(&dir, "failing", r#"{"credHelpers": {"registry.example.com": "fails"}}"#);
    let err = auth_for("registry.example.com", &creds).unwrap_err().to_string();
    assert!(
        err.contains("docker-credential-fails") && err.contains("keychain locked") && err.contains("fix:"),
        "{err}"
    );
}

#[test]
fn flags_win_over_the_docker_config() {
    let dir = helpers();
    let mut creds = config(&dir, "flags", r#"{"credsStore": "fails"}"#);
    creds.username = Some("me".into());
    creds.password = Some("pw".into());
    assert_eq!(basic(auth_for("registry.example.com", &creds).unwrap()), Some(("me".into(), "pw".into())));
}
