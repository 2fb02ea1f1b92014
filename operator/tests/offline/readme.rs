//! The README's offline examples run as written: every `model-orchestra-operator render …`
//! and `make render …` line of its shell blocks renders (exit 0, YAML on stdout), and its
//! `values-schema` and `crd` lines print what is checked in.

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The lines of the README's ```sh blocks, comments dropped.
fn shell_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut lines = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        match line.trim_start() {
            l if l.starts_with("```sh") => in_sh = true,
            l if l.starts_with("```") => in_sh = false,
            l if in_sh => lines.push(l.split(" #").next().unwrap_or_default().trim().to_string()),
            _ => {}
        }
    }
    lines
}

/// Runs the operator binary with `args`, in the repository, `stdin` from a file.
fn operator(args: &[&str], stdin: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_model-orchestra-operator"));
    cmd.args(args).current_dir(repo());
    if let Some(file) = stdin {
        cmd.stdin(std::fs::File::open(repo().join(file)).unwrap());
    }
    cmd.output().unwrap()
}

fn assert_renders(line: &str, out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "`{line}` failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("---\n"), "`{line}` printed no YAML stream: {stdout:.200}");
    for doc in stdout.split("---\n").filter(|d| !d.trim().is_empty()) {
        serde_yaml::from_str::<serde_yaml::Value>(doc).unwrap_or_else(|e| panic!("`{line}`: not YAML: {e}"));
    }
}

/// The arguments of a README `model-orchestra-operator render …` line: its optional `[…]`
/// arguments left out, its placeholder file standing for a CR of the user's (`sample`),
/// and the file it reads on standard input (`< FILE`).
fn render_args<'a>(words: &[&'a str], line: &'a str, sample: &'a str) -> (Vec<&'a str>, Option<&'a str>) {
    let mut args = vec!["render"];
    let mut optional = false;
    for word in words.iter().take_while(|w| **w != "<") {
        optional |= word.starts_with('[');
        if !optional {
            args.push(if *word == "my-cr.yaml" { sample } else { word });
        }
        optional &= !word.ends_with(']');
    }
    let stdin = line.split_once(" < ").map(|(_, f)| f.trim()).map(|f| if f == "my-cr.yaml" { sample } else { f });
    (args, stdin)
}

#[test]
fn the_readmes_render_examples_run_as_written() {
    let sample = "config/samples/modelorchestra.yaml";
    let mut ran = 0;
    for line in shell_lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // `make render [SAMPLE=…]` renders SAMPLE with the binary make builds.
            ["make", "render", rest @ ..] => {
                let file = rest.iter().find_map(|w| w.strip_prefix("SAMPLE=")).unwrap_or(sample);
                assert_renders(&line, &operator(&["render", "-f", file], None));
                ran += 1;
            }
            ["model-orchestra-operator", "render", rest @ ..] => {
                let (args, stdin) = render_args(rest, &line, sample);
                assert_renders(&line, &operator(&args, stdin.map(Path::new)));
                ran += 1;
            }
            _ => {}
        }
    }
    assert!(ran >= 4, "the README shows at least four render examples; ran {ran}");
}

#[test]
fn the_readmes_generator_examples_print_the_checked_in_files() {
    let checked_in = [
        ("model-orchestra-operator crd", "config/crd/models.titanml.co_modelorchestras.yaml"),
        ("model-orchestra-operator values-schema", "charts/model-orchestra/values.schema.json"),
        (
            "model-orchestra-operator values-schema --api-version v1alpha2",
            "charts/model-orchestra-1.0/values.schema.json",
        ),
    ];
    let lines = shell_lines();
    for (command, file) in checked_in {
        assert!(lines.iter().any(|l| l == command), "the README shows `{command}`");
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let out = operator(&args, None);
        assert!(out.status.success());
        let want = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(String::from_utf8_lossy(&out.stdout) == want, "`{command}` differs from {file}");
    }
}
