//! House rules for the Iris Gateway source tree.
//!
//! `tests/tidy.rs` runs [`check_repo`] on the repository, so `cargo test --workspace` fails
//! when a rule is broken, listing every violation as `path:line` with a hint. The rules:
//!
//! 1. **Layers.** A directory with a layer table in ARCHITECTURE.md (`<!-- tidy:layers DIR -->`)
//!    places each of its top-level modules in one layer; a module uses only modules of its own
//!    layer or below, and enters a room of [`NARROW_ROOMS`] only through its `mod.rs`.
//! 2. **Circles.** In a layered directory, in the folders of [`CIRCLE_FREE_DIRS`] and among the
//!    web client's modules, no files import each other in a circle (the largest strongly
//!    connected set of files is [`checks::MAX_CIRCLE`], 1).
//! 3. **File size.** No source file over [`checks::MAX_FILE_LINES`] lines, except those listed in
//!    [`FILE_SIZE_EXCEPTIONS`]; test files (`crates/*/tests/**.rs`) included.
//! 4. **Function length.** No function over [`checks::MAX_FN_LINES`] lines, in Rust or in the
//!    web client's JavaScript (not in test files: a test reads as one story, or holds a table).
//! 5. **No `.unwrap()`** in non-test Rust code: `?`, or `.expect("why this cannot fail")`.
//! 6. **Test files say their subject.** Every file under `crates/*/tests` begins with a `//!`
//!    comment saying what it tests, so that a new test finds the file of its subject.
//! 7. **Nothing unbounded.** An unbounded queue (`unbounded_channel`, an `Unbounded*` type,
//!    `std::sync::mpsc`) only in the files listed in [`UNBOUNDED_CHANNELS`], each with the reason
//!    its queue cannot grow without limit.
//!
//! The scanners are not parsers: they work on the source with comments and literals blanked
//! out ([`lex`]), which is enough for the way this code base is written.

pub mod checks;
pub mod graph;
pub mod js;
pub mod layers;
pub mod lex;
pub mod modules;
pub mod report;
pub mod rust;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A file allowed to exceed the size limit, and why.
pub struct Exception {
    /// Path from the repository root: `crates/x/src/table.rs`.
    pub path: &'static str,
    pub reason: &'static str,
}

/// Files allowed over [`checks::MAX_FILE_LINES`] lines: only generated code or table data, each
/// with its reason. An entry that is no longer needed is itself reported.
pub const FILE_SIZE_EXCEPTIONS: &[Exception] = &[];

/// Files allowed to make or hold an unbounded queue, and why what it queues is bounded anyway. An
/// entry whose file no longer holds one is itself reported.
pub const UNBOUNDED_CHANNELS: &[Exception] = &[
    Exception {
        path: "crates/gateway/src/cron/mod.rs",
        reason: "due runs: the scheduler holds at most one run per job, and the bridge hands each to its lane's bounded mailbox at once",
    },
    Exception {
        path: "crates/client/src/conn.rs",
        reason: "the typed client used by tests and tools: what it queues is what its owner sent or asked for",
    },
    Exception {
        path: "crates/client/src/client.rs",
        reason: "the typed client's ends of the queues of crates/client/src/conn.rs",
    },
    Exception {
        path: "crates/store/src/store.rs",
        reason: "the store's write and read jobs: every caller awaits its job's answer, so each queue holds at most one job per waiting task",
    },
    Exception {
        path: "crates/store/src/writer.rs",
        reason: "the writer thread's end of the write queue of crates/store/src/store.rs",
    },
    Exception {
        path: "crates/bench/src/gateway.rs",
        reason: "the load tool's one-message signal that the gateway it started is ready",
    },
    Exception {
        path: "crates/client/src/relay.rs",
        reason: "the typed client's task through a relay, as conn.rs: what it queues is what its owner sent or asked for",
    },
    Exception {
        path: "crates/bench/src/raw.rs",
        reason: "the load tool's raw WebSocket baseline: a measuring fixture fed by the load tool itself",
    },
    Exception {
        path: "crates/bench/src/hermes/direct.rs",
        reason: "the load tool's reader of one scripted Hermes turn, bounded by the script",
    },
];

/// Folders inside a crate's source directory without a layer table whose files may not import
/// each other in a circle either.
pub const CIRCLE_FREE_DIRS: &[&str] = &["crates/acp/src/demo"];

/// Rooms (a layered directory and one of its top-level modules with a folder) that other rooms
/// enter only through their `mod.rs`: what the room offers is what it re-exports there.
pub const NARROW_ROOMS: &[(&str, &str)] = &[("crates/gateway/src", "agent")];

/// Directories that must have a layer table in ARCHITECTURE.md.
pub const LAYERED_DIRS: &[&str] = &["crates/gateway/src"];

/// Where the layer tables live, from the repository root.
pub const ARCHITECTURE: &str = "ARCHITECTURE.md";

/// Web client assets checked for size (`.js`, `.mjs`, `.css`) and function length (scripts).
pub const WEB_ASSETS: &str = "crates/gateway/web/assets";

/// Directories never scanned.
const SKIPPED_DIRS: &[&str] = &["vendor", "target", "node_modules"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    Layers,
    Circles,
    FileSize,
    FnLength,
    Unwrap,
    TestSubject,
    Unbounded,
}

impl Rule {
    pub const ALL: [Rule; 7] = [
        Rule::Layers,
        Rule::Circles,
        Rule::FileSize,
        Rule::FnLength,
        Rule::Unwrap,
        Rule::TestSubject,
        Rule::Unbounded,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Rule::Layers => "Layers",
            Rule::Circles => "Import circles",
            Rule::FileSize => "File size",
            Rule::FnLength => "Function length",
            Rule::Unwrap => "No unwrap",
            Rule::TestSubject => "Test files say their subject",
            Rule::Unbounded => "Unbounded queues",
        }
    }

    /// The rule in one sentence.
    pub fn statement(self) -> String {
        match self {
            Rule::Layers => "In a layered directory every top-level module is placed in exactly one layer, and a module uses only modules of its own layer or of the layers below it.".to_string(),
            Rule::Circles => "In a layered directory, in the folders of CIRCLE_FREE_DIRS and in the web client, no files may import each other in a circle (a parent module may use its children; they do not use it back).".to_string(),
            Rule::FileSize => format!("No file in crates/*/src, crates/*/tests or {WEB_ASSETS} is longer than {} lines (exceptions, with a reason, only in FILE_SIZE_EXCEPTIONS in crates/tidy/src/lib.rs).", checks::MAX_FILE_LINES),
            Rule::FnLength => format!("No function is longer than {} lines, counted from its first line to its closing brace (Rust outside #[cfg(test)] and crates/*/tests, and the web client's JavaScript).", checks::MAX_FN_LINES),
            Rule::Unwrap => "Non-test code never calls `.unwrap()`: data from outside never meets it; use `?`, or `.expect(\"why this cannot fail\")`.".to_string(),
            Rule::TestSubject => "Every file under crates/*/tests begins with a `//!` comment saying what it tests; tests go to the file of their subject, or to a new file named by it.".to_string(),
            Rule::Unbounded => "Nothing waits without bound: non-test code makes or holds an unbounded queue (`unbounded_channel`, an `Unbounded*` type, `std::sync::mpsc`) only in the files listed in UNBOUNDED_CHANNELS in crates/tidy/src/lib.rs, each with its reason.".to_string(),
        }
    }
}

/// One broken rule at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: Rule,
    /// From the repository root, with `/`.
    pub path: String,
    /// 1-based.
    pub line: usize,
    pub message: String,
    /// What to do about it, in one line.
    pub hint: String,
    /// Further lines (the references that make an import circle).
    pub details: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {} (hint: {})",
            self.path, self.line, self.message, self.hint
        )
    }
}

/// Checks the repository at `root` against every rule, with the layer tables of its
/// ARCHITECTURE.md.
pub fn check_repo(root: &Path) -> io::Result<Vec<Violation>> {
    let architecture = match std::fs::read_to_string(root.join(ARCHITECTURE)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    check_tree(root, &architecture)
}

/// The files and functions near the limits of rules 3 and 4 (see [`checks::near_limits`]).
pub fn near_limits(root: &Path) -> io::Result<Vec<String>> {
    let architecture = std::fs::read_to_string(root.join(ARCHITECTURE)).unwrap_or_default();
    Ok(scan(root, &architecture)?.1)
}

/// Checks the source tree at `root` against every rule, with the layer tables taken from
/// `architecture` (the text of ARCHITECTURE.md).
pub fn check_tree(root: &Path, architecture: &str) -> io::Result<Vec<Violation>> {
    Ok(scan(root, architecture)?.0)
}

/// The violations of every rule, and what is near the limits.
fn scan(root: &Path, architecture: &str) -> io::Result<(Vec<Violation>, Vec<String>)> {
    let mut out = Vec::new();
    // (path, name, line, lines) of every function checked for length.
    let mut fns: Vec<(String, String, usize, usize)> = Vec::new();
    let mut sizes = Vec::new();
    let mut unbounded: Vec<String> = Vec::new();
    let mut dirs: BTreeMap<String, Vec<modules::SourceFile>> = BTreeMap::new();
    let mut test_dirs = Vec::new();
    for krate in sorted_entries(&root.join("crates"))? {
        let src = krate.join("src");
        if src.is_dir() {
            dirs.insert(rel(root, &src), load_dir(&src)?);
        }
        let tests = krate.join("tests");
        if tests.is_dir() {
            test_dirs.push(tests);
        }
    }
    for dir in &test_dirs {
        for file in walk(dir, &["rs"])? {
            let path = rel(root, &file);
            let text = read_lossy(&file)?;
            sizes.push((path.clone(), lex::line_count(&text)));
            out.extend(checks::test_subject(&path, &text));
        }
    }
    for (dir, files) in &dirs {
        for f in files {
            let path = format!("{dir}/{}", f.rel);
            sizes.push((path.clone(), lex::line_count(&f.parsed.code)));
            if !f.test_only {
                out.extend(checks::rust_fn_lengths(&path, &f.parsed));
                let found = rust::functions(&f.parsed).into_iter();
                fns.extend(found.map(|g| (path.clone(), g.name, g.line, g.lines)));
                out.extend(checks::unwraps(&path, &f.parsed));
                let lines = checks::unbounded_lines(&f.parsed);
                if !lines.is_empty() {
                    out.extend(checks::unbounded(&path, &lines, UNBOUNDED_CHANNELS));
                    unbounded.push(path.clone());
                }
            }
        }
    }
    let assets = root.join(WEB_ASSETS);
    if assets.is_dir() {
        let mut modules = Vec::new();
        for file in walk(&assets, &["js", "mjs", "css"])? {
            let path = rel(root, &file);
            let text = read_lossy(&file)?;
            sizes.push((path.clone(), lex::line_count(&text)));
            if !path.ends_with(".css") {
                out.extend(checks::js_fn_lengths(&path, &text));
                let found = js::functions(&text).into_iter();
                fns.extend(found.map(|g| (path.clone(), g.name, g.line, g.lines)));
                modules.push((rel(&assets, &file), text));
            }
        }
        out.extend(checks::js_circles(WEB_ASSETS, &modules));
    }
    out.extend(checks::file_sizes(&sizes, FILE_SIZE_EXCEPTIONS));
    let near = checks::near_limits(&sizes, &fns);
    if root.join("crates/tidy").is_dir() {
        out.extend(checks::unused_unbounded(&unbounded, UNBOUNDED_CHANNELS));
    }
    out.extend(check_layered(root, architecture, &mut dirs)?);
    out.extend(check_circle_free(root, &dirs));
    out.sort_by(|a, b| (a.rule, &a.path, a.line).cmp(&(b.rule, &b.path, b.line)));
    Ok((out, near))
}

/// Rules 1 and 2, for every directory with a layer table and every one of [`LAYERED_DIRS`].
fn check_layered(
    root: &Path,
    architecture: &str,
    dirs: &mut BTreeMap<String, Vec<modules::SourceFile>>,
) -> io::Result<Vec<Violation>> {
    let mut out = Vec::new();
    let (tables, problems) = layers::parse(architecture);
    for p in problems {
        out.push(layer_violation(p.line, p.message, "fix the layer table"));
    }
    for dir in LAYERED_DIRS
        .iter()
        .filter(|d| !tables.iter().any(|t| t.dir == **d))
    {
        out.push(layer_violation(
            1,
            format!("there is no layer table for {dir}"),
            &format!("add a block `<!-- tidy:layers {dir} -->` … `<!-- /tidy:layers -->` with the table `| layer | modules |`, top layer first"),
        ));
    }
    let mut layered: Vec<&str> = tables.iter().map(|t| t.dir.as_str()).collect();
    layered.extend(LAYERED_DIRS.iter().copied());
    layered.sort_unstable();
    layered.dedup();
    for dir in layered {
        let path = root.join(dir);
        if !path.is_dir() {
            if let Some(t) = tables.iter().find(|t| t.dir == dir) {
                out.push(layer_violation(
                    t.line,
                    format!("{dir} is not a directory"),
                    "fix the directory in the marker",
                ));
            }
            continue;
        }
        if !path.join("lib.rs").is_file() && !path.join("main.rs").is_file() {
            if let Some(t) = tables.iter().find(|t| t.dir == dir) {
                out.push(layer_violation(
                    t.line,
                    format!("{dir} has no lib.rs or main.rs"),
                    "name a crate's source directory in the marker (`crates/x/src`)",
                ));
            }
            continue;
        }
        if !dirs.contains_key(dir) {
            dirs.insert(dir.to_string(), load_dir(&path)?);
        }
        let Some(files) = dirs.get(dir) else {
            continue;
        };
        let resolver = modules::Resolver::new(files, modules::lib_name(&path).as_deref());
        if let Some(table) = tables.iter().find(|t| t.dir == dir) {
            out.extend(checks::layers(table, ARCHITECTURE, dir, files, &resolver));
        }
        for (_, room) in NARROW_ROOMS.iter().filter(|(d, _)| *d == dir) {
            out.extend(checks::narrow_face(dir, room, files, &resolver));
        }
        out.extend(checks::circles(dir, files, &resolver, ""));
    }
    Ok(out)
}

/// Rule 2 for the folders of [`CIRCLE_FREE_DIRS`].
fn check_circle_free(
    root: &Path,
    dirs: &BTreeMap<String, Vec<modules::SourceFile>>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for folder in CIRCLE_FREE_DIRS {
        let Some((dir, files)) = dirs
            .iter()
            .find(|(dir, _)| folder.starts_with(&format!("{dir}/")))
        else {
            continue;
        };
        let within = format!("{}/", &folder[dir.len() + 1..]);
        let lib = modules::lib_name(&root.join(dir));
        let resolver = modules::Resolver::new(files, lib.as_deref());
        out.extend(checks::circles(dir, files, &resolver, &within));
    }
    out
}

fn layer_violation(line: usize, message: String, hint: &str) -> Violation {
    Violation {
        rule: Rule::Layers,
        path: ARCHITECTURE.to_string(),
        line,
        message,
        hint: hint.to_string(),
        details: Vec::new(),
    }
}

/// Reads and parses every `.rs` file under a source directory.
fn load_dir(dir: &Path) -> io::Result<Vec<modules::SourceFile>> {
    let mut sources = Vec::new();
    for file in walk(dir, &["rs"])? {
        sources.push((rel(dir, &file), read_lossy(&file)?));
    }
    Ok(modules::build(sources))
}

fn read_lossy(path: &Path) -> io::Result<String> {
    Ok(String::from_utf8_lossy(&std::fs::read(path)?).into_owned())
}

/// `path` relative to `base`, with `/`.
fn rel(base: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(base).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

fn sorted_entries(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        entries.push(entry?.path());
    }
    entries.sort();
    Ok(entries)
}

/// Files under `dir` with one of the extensions, sorted, skipping hidden and vendored folders.
pub fn walk(dir: &Path, extensions: &[&str]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in sorted_entries(dir)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                out.extend(walk(&path, extensions)?);
            }
        } else if path
            .extension()
            .is_some_and(|e| extensions.iter().any(|x| e == *x))
        {
            out.push(path);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A scratch directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(files: &[(&str, &str)]) -> Scratch {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir =
                std::env::temp_dir().join(format!("iris-tidy-{}-{nanos}", std::process::id()));
            for (path, text) in files {
                let path = dir.join(path);
                fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                fs::write(path, text).expect("write");
            }
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn long_body(lines: usize) -> String {
        "    x += 1;\n".repeat(lines)
    }

    #[test]
    fn a_small_tree() {
        let rust_fn = format!("pub fn long() {{\n{}}}\n", long_body(130));
        let js_fn = format!("export function draw() {{\n{}}}\n", long_body(125));
        let big = "// line\n".repeat(801);
        let tree = Scratch::new(&[
            (
                "crates/gateway/Cargo.toml",
                "[package]\nname = \"iris-gateway\"\n",
            ),
            ("crates/gateway/src/lib.rs", "pub mod conn;\npub mod hub;\n"),
            (
                "crates/gateway/src/main.rs",
                "use iris_gateway::conn::run;\n",
            ),
            (
                "crates/gateway/src/conn.rs",
                "use crate::hub::Hub;\npub fn run() {}\n",
            ),
            (
                "crates/gateway/src/hub.rs",
                "use crate::conn;\nfn f(x: Option<u8>) { x.unwrap(); }\n#[cfg(test)]\nmod tests;\n",
            ),
            (
                "crates/gateway/src/hub/tests.rs",
                "fn t() { Some(1).unwrap(); }\n",
            ),
            ("crates/store/src/lib.rs", &rust_fn),
            ("crates/store/src/big.rs", &big),
            ("crates/gateway/web/assets/app.js", &js_fn),
            ("crates/store/tests/big.rs", &format!("//! Big.\n{big}")),
            (
                "crates/store/tests/common/mod.rs",
                &format!("\n//! Helpers.\n{rust_fn}fn t() {{ Some(1).unwrap(); }}\n"),
            ),
            ("crates/store/tests/nameless.rs", "#[test]\nfn t() {}\n"),
            ("crates/gateway/web/assets/vendor/lib.js", &big),
        ]);
        let architecture = "# A\n<!-- tidy:layers crates/gateway/src -->\n| layer | modules |\n|---|---|\n| top | `lib`, `main`, `conn` |\n| ground | `hub` |\n<!-- /tidy:layers -->\n";
        let got: Vec<String> = check_tree(&tree.0, architecture)
            .expect("check")
            .iter()
            .map(|v| format!("{}:{}: {}", v.path, v.line, v.message))
            .collect();
        assert_eq!(
            got,
            [
                "crates/gateway/src/hub.rs:1: `hub` (layer ground) uses `conn` (layer top, above it) in `crate::conn`",
                "crates/gateway/src/conn.rs:1: 2 files import each other in a circle: conn.rs, hub.rs",
                "crates/store/src/big.rs:1: 801 lines, over the limit of 800",
                "crates/store/tests/big.rs:1: 802 lines, over the limit of 800",
                "crates/gateway/web/assets/app.js:1: function `draw` has 127 lines, over the limit of 120",
                "crates/store/src/lib.rs:1: fn `long` has 132 lines, over the limit of 120",
                "crates/gateway/src/hub.rs:2: `.unwrap()` in non-test code",
                "crates/store/tests/nameless.rs:1: the file does not begin with a `//!` comment saying what it tests",
            ]
        );
        let missing = check_tree(&tree.0, "no table").expect("check");
        assert_eq!(missing[0].path, "ARCHITECTURE.md");
        assert_eq!(
            missing[0].message,
            "there is no layer table for crates/gateway/src"
        );
    }
}
