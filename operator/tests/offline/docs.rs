//! The book (`docs/src`) and the README hold to what they show: the book's summary lists
//! exactly its pages, links between pages resolve, the offline shell examples run as written
//! (every `model-orchestra-operator render …` and `make render …` line renders; a line that
//! is one of `make generate`'s commands prints the file the Makefile writes it to), and the
//! YAML examples parse and, when they are ModelOrchestras, render — or, marked
//! ```` ```yaml,invalid ````, fail with the error their page shows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn book() -> PathBuf {
    repo().join("docs/src")
}

/// A page: the README or a file of the book, by its path in the repository.
struct Page {
    path: String,
    text: String,
}

/// The README, then every Markdown file under `docs/src` (`SUMMARY.md` included).
fn pages() -> Vec<Page> {
    let mut files = vec![repo().join("README.md")];
    markdown_files(&book(), &mut files);
    files
        .into_iter()
        .map(|file| Page {
            path: file.strip_prefix(repo()).unwrap().to_string_lossy().into_owned(),
            text: std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
        })
        .collect()
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// A fenced code block: its language (`sh`, `yaml`, `text`), the words after it in the
/// info string (`invalid`), and its content.
#[derive(Clone)]
struct Block {
    lang: String,
    attributes: Vec<String>,
    content: String,
}

/// The fenced code blocks of a page, in order (a fence may be indented, inside a list: its
/// lines lose the fence's indentation).
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Block)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```") && !trimmed.starts_with("````");
        match (&mut open, fence) {
            (None, true) => {
                let mut info = trimmed[3..].split([',', ' ']).filter(|w| !w.is_empty()).map(str::to_string);
                let lang = info.next().unwrap_or_default();
                let indent = line.len() - trimmed.len();
                open = Some((indent, Block { lang, attributes: info.collect(), content: String::new() }));
            }
            (Some(_), true) => out.push(open.take().unwrap().1),
            (Some((indent, block)), false) => {
                let outdented =
                    line.char_indices().find(|(i, c)| *i >= *indent || *c != ' ').map_or("", |(i, _)| &line[i..]);
                block.content.push_str(outdented);
                block.content.push('\n');
            }
            (None, false) => {}
        }
    }
    out
}

/// The lines of every page's ```sh blocks, comments dropped, with the page they are on.
fn shell_lines() -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for page in pages() {
        for block in blocks(&page.text).into_iter().filter(|b| b.lang == "sh") {
            for line in block.content.lines() {
                let line = line.split(" #").next().unwrap_or_default().trim();
                if !line.is_empty() && !line.starts_with('#') {
                    lines.push((page.path.clone(), line.to_string()));
                }
            }
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

/// The arguments of a `model-orchestra-operator render …` line: its optional `[…]`
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

/// `make generate`'s commands, as a user types them (`model-orchestra-operator crd`), each
/// with the file the Makefile writes its output to.
fn generator_commands() -> BTreeMap<String, String> {
    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let rule = makefile.split("\ngenerate:").nth(1).expect("the Makefile has a generate rule");
    rule.lines()
        .skip(1)
        .take_while(|l| l.starts_with('\t'))
        .filter_map(|l| l.trim().strip_prefix("$(OPERATOR) "))
        .filter_map(|l| l.split_once(" > "))
        .map(|(args, file)| (format!("model-orchestra-operator {}", args.trim()), file.trim().to_string()))
        .collect()
}

/// The pages `docs/src/SUMMARY.md` lists, relative to `docs/src`.
fn summary_pages() -> Vec<String> {
    let summary = std::fs::read_to_string(book().join("SUMMARY.md")).unwrap();
    summary.lines().flat_map(link_targets).filter(|t| !t.contains("://")).map(|t| without_anchor(&t)).collect()
}

/// The targets of the Markdown links `[text](target)` on a line (outside code spans).
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_code = false;
    let mut rest = line;
    while let Some(i) = rest.find(['`', ']']) {
        let (c, after) = (rest.as_bytes()[i], &rest[i + 1..]);
        if c == b'`' {
            in_code = !in_code;
        } else if !in_code && after.starts_with('(') {
            if let Some(end) = after.find(')') {
                targets.push(after[1..end].to_string());
            }
        }
        rest = after;
    }
    targets
}

fn without_anchor(target: &str) -> String {
    target.split('#').next().unwrap_or_default().to_string()
}

/// Every link from a page to another file of the repository: (page, target as written,
/// the target's path relative to the repository, its anchor).
fn page_links() -> Vec<(String, String, PathBuf, Option<String>)> {
    let mut links = Vec::new();
    for page in pages() {
        let dir = Path::new(&page.path).parent().unwrap().to_path_buf();
        let mut in_block = false;
        for line in page.text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") && !trimmed.starts_with("````") {
                in_block = !in_block;
            }
            if in_block {
                continue;
            }
            for target in link_targets(line).into_iter().filter(|t| !t.contains("://") && !t.starts_with("mailto:")) {
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file.to_string(), Some(anchor.to_string())),
                    None => (target.clone(), None),
                };
                let path = if file.is_empty() { PathBuf::from(&page.path) } else { normalize(&dir.join(&file)) };
                links.push((page.path.clone(), target, path, anchor));
            }
        }
    }
    links
}

/// `docs/src/user-guide/../values/x.md` → `docs/src/values/x.md`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The anchors of a page's headings, as mdBook makes them: the heading's text (code marks
/// dropped), lower case, spaces as `-`, only letters, digits, `-` and `_` kept.
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_block = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") && !trimmed.starts_with("````") {
            in_block = !in_block;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        anchors.insert(
            heading
                .chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_lowercase().next().unwrap()),
                    c if c.is_whitespace() => Some('-'),
                    _ => None,
                })
                .collect(),
        );
    }
    anchors
}

/// Every ```yaml block of every page, with the page and the next block after it (where a
/// page shows what rendering the block prints).
fn yaml_examples() -> Vec<(String, Block, Option<Block>)> {
    let mut out = Vec::new();
    for page in pages() {
        let mut blocks = blocks(&page.text).into_iter().peekable();
        while let Some(block) = blocks.next() {
            if block.lang == "yaml" {
                let next = blocks.peek().cloned();
                out.push((page.path.clone(), block, next));
            }
        }
    }
    out
}

fn is_model_orchestra(yaml: &str) -> bool {
    serde_yaml::from_str::<serde_yaml::Value>(yaml).is_ok_and(|v| v["kind"] == "ModelOrchestra")
}

/// What a page shows `render` printing after a block: the messages of its lines that start
/// with `prefix` (`error:`, `warning:`), the file name after the prefix dropped; an error's
/// numbered lines belong to it.
fn shown(block: Option<&Block>, prefix: &str) -> Vec<String> {
    let Some(block) = block.filter(|b| b.lang == "text") else { return vec![] };
    let mut messages: Vec<String> = Vec::new();
    for line in block.content.lines() {
        match line.strip_prefix(prefix) {
            Some(rest) => {
                let (_file, message) = rest.trim_start().split_once(": ").expect("`PREFIX FILE: message`");
                messages.push(message.to_string());
            }
            None => {
                if let Some(last) = messages.last_mut() {
                    last.push('\n');
                    last.push_str(line);
                }
            }
        }
    }
    messages
}

#[test]
fn every_page_the_summary_lists_exists() {
    let pages = summary_pages();
    assert!(pages.len() >= 10, "SUMMARY.md lists the book's pages; found {}", pages.len());
    for page in pages {
        assert!(book().join(&page).is_file(), "SUMMARY.md lists {page}, which is not in docs/src");
    }
}

#[test]
fn every_page_in_the_book_is_listed_in_the_summary() {
    let listed: BTreeSet<String> = summary_pages().into_iter().collect();
    let mut files = Vec::new();
    markdown_files(&book(), &mut files);
    for file in files {
        let page = file.strip_prefix(book()).unwrap().to_string_lossy().into_owned();
        assert!(page == "SUMMARY.md" || listed.contains(&page), "docs/src/{page} is not listed in SUMMARY.md");
    }
}

#[test]
fn every_link_to_a_file_of_the_repository_names_one_that_exists() {
    let links = page_links();
    assert!(links.len() >= 50, "the pages link to one another; found {} links", links.len());
    for (page, target, path, _) in links {
        assert!(
            repo().join(&path).exists(),
            "{page}: the link to `{target}` names {}, which does not exist",
            path.display()
        );
    }
}

#[test]
fn every_link_to_a_section_of_a_page_names_one_of_its_headings() {
    let mut checked = 0;
    for (page, target, path, anchor) in page_links() {
        let Some(anchor) = anchor.filter(|_| path.extension().is_some_and(|e| e == "md")) else { continue };
        let text = std::fs::read_to_string(repo().join(&path)).unwrap_or_default();
        let anchors = heading_anchors(&text);
        assert!(
            anchors.contains(&anchor),
            "{page}: `{target}`: {} has no heading `#{anchor}`: {anchors:?}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5, "the pages link to sections of pages; checked {checked}");
}

#[test]
fn the_render_examples_run_as_written() {
    let sample = "config/samples/modelorchestra.yaml";
    let mut ran = 0;
    for (page, line) in shell_lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let shown = format!("{page}: {line}");
        match words.as_slice() {
            // `make render [SAMPLE=…]` renders SAMPLE with the binary make builds.
            ["make", "render", rest @ ..] => {
                let file = rest.iter().find_map(|w| w.strip_prefix("SAMPLE=")).unwrap_or(sample);
                assert_renders(&shown, &operator(&["render", "-f", file], None));
                ran += 1;
            }
            ["model-orchestra-operator", "render", rest @ ..] => {
                let (args, stdin) = render_args(rest, &line, sample);
                assert_renders(&shown, &operator(&args, stdin.map(Path::new)));
                ran += 1;
            }
            _ => {}
        }
    }
    assert!(ran >= 10, "the README and the book show render examples; ran {ran}");
}

#[test]
fn the_generator_examples_print_the_files_make_generate_writes() {
    let generators = generator_commands();
    assert!(generators.len() >= 7, "the Makefile's generate rule: {generators:?}");
    let mut ran = BTreeSet::new();
    for (page, line) in shell_lines() {
        let Some(file) = generators.get(&line) else { continue };
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        let out = operator(&args, None);
        assert!(out.status.success(), "{page}: `{line}` failed");
        let want = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(String::from_utf8_lossy(&out.stdout) == want, "{page}: `{line}` differs from {file}");
        ran.insert(line);
    }
    for command in ["model-orchestra-operator crd", "model-orchestra-operator values-schema"] {
        assert!(ran.contains(command), "the book shows `{command}`; ran {ran:?}");
    }
}

#[test]
fn every_yaml_example_parses() {
    let examples = yaml_examples();
    assert!(examples.len() >= 8, "the book shows YAML examples; found {}", examples.len());
    for (page, block, _) in examples {
        for doc in serde_yaml::Deserializer::from_str(&block.content) {
            serde::Deserialize::deserialize(doc)
                .map(|_: serde_yaml::Value| ())
                .unwrap_or_else(|e| panic!("{page}: a YAML example does not parse: {e}\n{}", block.content));
        }
    }
}

#[test]
fn every_modelorchestra_example_renders_unless_marked_invalid() {
    let mut rendered = 0;
    for (page, block, _) in yaml_examples() {
        if block.attributes.iter().any(|a| a == "invalid") || !is_model_orchestra(&block.content) {
            continue;
        }
        if let Err(e) = model_orchestra::render_manifest(&block.content, "default") {
            panic!("{page}: a ModelOrchestra example does not render: {e}\n{}", block.content);
        }
        rendered += 1;
    }
    assert!(rendered >= 5, "the book shows ModelOrchestras that render; rendered {rendered}");
}

#[test]
fn every_example_marked_invalid_is_refused() {
    let mut refused = 0;
    for (page, block, _) in yaml_examples().into_iter().filter(|(_, b, _)| b.attributes.iter().any(|a| a == "invalid"))
    {
        assert!(is_model_orchestra(&block.content), "{page}: an example marked invalid is not a ModelOrchestra");
        assert!(
            model_orchestra::render_manifest(&block.content, "default").is_err(),
            "{page}: an example marked invalid renders:\n{}",
            block.content
        );
        refused += 1;
    }
    assert!(refused >= 3, "the book shows refused ModelOrchestras; found {refused}");
}

#[test]
fn the_errors_a_page_shows_are_the_errors_of_its_example() {
    let mut compared = 0;
    for (page, block, next) in
        yaml_examples().into_iter().filter(|(_, b, _)| b.attributes.iter().any(|a| a == "invalid"))
    {
        let shown = shown(next.as_ref(), "error:");
        if shown.is_empty() {
            continue;
        }
        let error = model_orchestra::render_manifest(&block.content, "default").err().map(|e| e.to_string());
        assert_eq!(shown, error.into_iter().collect::<Vec<_>>(), "{page}: the error shown after\n{}", block.content);
        compared += 1;
    }
    assert!(compared >= 2, "the book shows the errors of refused examples; compared {compared}");
}

#[test]
fn the_warnings_a_page_shows_are_the_warnings_of_its_example() {
    let mut compared = 0;
    for (page, block, next) in yaml_examples() {
        let shown = shown(next.as_ref(), "warning:");
        if shown.is_empty() {
            continue;
        }
        let rendered = model_orchestra::render_manifest(&block.content, "default")
            .unwrap_or_else(|e| panic!("{page}: an example with warnings does not render: {e}"));
        let warnings: Vec<String> = rendered.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(shown, warnings, "{page}: the warnings shown after\n{}", block.content);
        compared += 1;
    }
    assert!(compared >= 1, "the book shows the warnings of an example; compared {compared}");
}
