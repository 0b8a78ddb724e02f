//! The six rules, each on data already read from disk.

use std::collections::{BTreeMap, BTreeSet};

use crate::layers::LayerTable;
use crate::modules::{Resolver, SourceFile};
use crate::{graph, js, rust, Exception, Rule, Violation};

/// Rule 3: the longest a source file may be.
pub const MAX_FILE_LINES: usize = 800;
/// Rule 4: the longest a function may be, from its first line to its closing brace.
pub const MAX_FN_LINES: usize = 120;
/// Share of a limit (in percent) above which a file or function is listed as near it.
pub const NEAR_LIMIT_PERCENT: usize = 90;
/// Rule 2: the most files an import circle may have.
pub const MAX_CIRCLE: usize = 1;

fn violation(rule: Rule, path: &str, line: usize, message: String, hint: &str) -> Violation {
    Violation {
        rule,
        path: path.to_string(),
        line,
        message,
        hint: hint.to_string(),
        details: Vec::new(),
    }
}

/// Rule 3 for files given as (repository path, line count); also reports exceptions that are
/// no longer needed.
pub fn file_sizes(files: &[(String, usize)], exceptions: &[Exception]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (path, lines) in files {
        let excepted = exceptions.iter().any(|e| e.path == path);
        if *lines > MAX_FILE_LINES && !excepted {
            out.push(violation(
                Rule::FileSize,
                path,
                1,
                format!("{lines} lines, over the limit of {MAX_FILE_LINES}"),
                "split it by responsibility into child modules",
            ));
        }
    }
    for e in exceptions {
        match files.iter().find(|(p, _)| p == e.path) {
            Some((_, lines)) if *lines > MAX_FILE_LINES => {}
            found => out.push(violation(
                Rule::FileSize,
                e.path,
                1,
                match found {
                    Some((_, lines)) => {
                        format!("listed as an exception but has only {lines} lines")
                    }
                    None => "listed as an exception but the file does not exist".to_string(),
                },
                "remove it from FILE_SIZE_EXCEPTIONS in crates/tidy/src/lib.rs",
            )),
        }
    }
    out
}

/// Files and functions within [`NEAR_LIMIT_PERCENT`] of rules 3 and 4 (not over them: those are
/// violations), one line each, so that they are split before the limit forces it.
pub fn near_limits(
    files: &[(String, usize)],
    fns: &[(String, String, usize, usize)],
) -> Vec<String> {
    let near =
        |lines: usize, limit: usize| lines * 100 > limit * NEAR_LIMIT_PERCENT && lines <= limit;
    let mut out: Vec<String> = files
        .iter()
        .filter(|(_, lines)| near(*lines, MAX_FILE_LINES))
        .map(|(path, lines)| format!("{path}: {lines} of {MAX_FILE_LINES} lines"))
        .collect();
    out.extend(
        fns.iter()
            .filter(|(_, _, _, lines)| near(*lines, MAX_FN_LINES))
            .map(|(path, name, line, lines)| {
                format!("{path}:{line}: `{name}` has {lines} of {MAX_FN_LINES} lines")
            }),
    );
    out
}

/// Rule 4 for a Rust file.
pub fn rust_fn_lengths(path: &str, file: &rust::RustFile) -> Vec<Violation> {
    rust::functions(file)
        .into_iter()
        .filter(|f| f.lines > MAX_FN_LINES)
        .map(|f| {
            violation(
                Rule::FnLength,
                path,
                f.line,
                format!(
                    "fn `{}` has {} lines, over the limit of {MAX_FN_LINES}",
                    f.name, f.lines
                ),
                "extract well-named helper functions for its steps",
            )
        })
        .collect()
}

/// Rule 4 for a JavaScript file.
pub fn js_fn_lengths(path: &str, src: &str) -> Vec<Violation> {
    js::functions(src)
        .into_iter()
        .filter(|f| f.lines > MAX_FN_LINES)
        .map(|f| {
            violation(
                Rule::FnLength,
                path,
                f.line,
                format!(
                    "function `{}` has {} lines, over the limit of {MAX_FN_LINES}",
                    f.name, f.lines
                ),
                "extract well-named helper functions for its steps",
            )
        })
        .collect()
}

/// Rule 5 for a Rust file.
pub fn unwraps(path: &str, file: &rust::RustFile) -> Vec<Violation> {
    rust::unwraps(file)
        .into_iter()
        .map(|line| {
            violation(
                Rule::Unwrap,
                path,
                line,
                "`.unwrap()` in non-test code".to_string(),
                "propagate the error with `?`, or use `.expect(\"why this cannot fail\")`",
            )
        })
        .collect()
}

/// Rule 6 for a file under `crates/*/tests`: its first line that is not blank is a `//!` comment.
pub fn test_subject(path: &str, text: &str) -> Option<Violation> {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    (!first.trim_start().starts_with("//!")).then(|| {
        violation(
            Rule::TestSubject,
            path,
            1,
            "the file does not begin with a `//!` comment saying what it tests".to_string(),
            "begin it with `//! <subject>: what these tests show`",
        )
    })
}

/// What names an unbounded queue: tokio's `unbounded_channel` and its `Unbounded*` ends (and
/// any other `Unbounded…` type), and `std::sync::mpsc`, whose `channel` never says no.
const UNBOUNDED_MARKS: [&str; 2] = ["unbounded_channel", "std::sync::mpsc"];

/// Whether a line names an `Unbounded…` type (`UnboundedSender`, `UnboundedReceiver`, …).
fn names_unbounded_type(line: &str) -> bool {
    line.match_indices("Unbounded")
        .any(|(i, m)| line[i + m.len()..].starts_with(|c: char| c.is_ascii_uppercase()))
}

/// The lines of a file's non-test code that make or hold an unbounded queue.
pub fn unbounded_lines(file: &rust::RustFile) -> Vec<usize> {
    file.code
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            UNBOUNDED_MARKS.iter().any(|m| line.contains(m)) || names_unbounded_type(line)
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Rule 7 for one file, given its [`unbounded_lines`]: each is reported unless the file is
/// listed.
pub fn unbounded(path: &str, lines: &[usize], allowed: &[Exception]) -> Vec<Violation> {
    if allowed.iter().any(|e| e.path == path) {
        return Vec::new();
    }
    lines
        .iter()
        .map(|&line| {
            violation(
                Rule::Unbounded,
                path,
                line,
                "an unbounded queue (`unbounded_channel`, an `Unbounded*` type or `std::sync::mpsc`) in a file not listed in UNBOUNDED_CHANNELS".to_string(),
                "use a bounded `mpsc::channel` whose full queue stops the producer, or list the file in UNBOUNDED_CHANNELS in crates/tidy/src/lib.rs with the reason its queue is bounded anyway",
            )
        })
        .collect()
}

/// Rule 7's list: entries whose file holds no unbounded queue (any more).
pub fn unused_unbounded(files_using: &[String], allowed: &[Exception]) -> Vec<Violation> {
    allowed
        .iter()
        .filter(|e| !files_using.iter().any(|p| p == e.path))
        .map(|e| {
            violation(
                Rule::Unbounded,
                e.path,
                1,
                "listed in UNBOUNDED_CHANNELS but holds no unbounded queue".to_string(),
                "remove it from UNBOUNDED_CHANNELS in crates/tidy/src/lib.rs",
            )
        })
        .collect()
}

/// Rule 1's narrow faces: no file outside `room` (a top-level module with a folder of its own)
/// names anything inside it but what its `mod.rs` offers: `crate::room::Item`, never
/// `crate::room::child::Item`.
pub fn narrow_face(
    dir: &str,
    room: &str,
    files: &[SourceFile],
    resolver: &Resolver,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in files.iter().filter(|f| !f.test_only && f.top != room) {
        for r in resolver
            .references(file)
            .into_iter()
            .filter(|r| !r.through_use && r.target.first().is_some_and(|t| t == room))
        {
            let inner = resolver
                .file_of(&r.target)
                .is_some_and(|i| files[i].module.len() > 1);
            if inner {
                out.push(violation(
                    Rule::Layers,
                    &format!("{dir}/{}", file.rel),
                    r.line,
                    format!("`{}` reaches inside `{room}`", r.written),
                    &format!("use what {room}/mod.rs re-exports (`crate::{room}::…`), or re-export it there"),
                ));
            }
        }
    }
    out
}

/// The top-level modules of a directory's files, each with the file that defines it.
fn top_modules(files: &[SourceFile]) -> BTreeMap<String, &SourceFile> {
    let mut tops: BTreeMap<String, &SourceFile> = BTreeMap::new();
    for f in files.iter().filter(|f| !f.test_only) {
        let entry = tops.entry(f.top.clone()).or_insert(f);
        if f.module.len() < entry.module.len() {
            *entry = f;
        }
    }
    tops
}

/// Rule 1 for one layered directory (`dir` relative to the repository root).
pub fn layers(
    table: &LayerTable,
    architecture: &str,
    dir: &str,
    files: &[SourceFile],
    resolver: &Resolver,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let tops = top_modules(files);
    for (name, file) in &tops {
        if table.layer_of(name).is_none() {
            out.push(violation(
                Rule::Layers,
                &format!("{dir}/{}", file.rel),
                1,
                format!("module `{name}` is not placed in any layer"),
                &format!(
                    "add `{name}` to the row of its layer in {architecture}:{}",
                    table.line
                ),
            ));
        }
    }
    for layer in &table.layers {
        for module in layer.modules.iter().filter(|m| !tops.contains_key(*m)) {
            out.push(violation(
                Rule::Layers,
                architecture,
                layer.line,
                format!(
                    "`{module}` is listed in layer `{}` but {dir} has no such module",
                    layer.name
                ),
                "remove it from the table, or fix the name: `lib` is lib.rs, `main` is main.rs",
            ));
        }
    }
    for file in files.iter().filter(|f| !f.test_only) {
        let Some((rank, layer)) = table.layer_of(&file.top) else {
            continue;
        };
        let mut seen = BTreeSet::new();
        // The `use` item already names the module; its uses need not be reported again.
        for r in resolver
            .references(file)
            .into_iter()
            .filter(|r| !r.through_use)
        {
            let used = resolver.top_module(&r.target);
            let Some((used_rank, used_layer)) = table.layer_of(&used) else {
                continue;
            };
            if used_rank < rank && seen.insert((r.line, used.clone())) {
                out.push(violation(
                    Rule::Layers,
                    &format!("{dir}/{}", file.rel),
                    r.line,
                    format!(
                        "`{}` (layer {layer}) uses `{used}` (layer {used_layer}, above it) in `{}`",
                        file.top, r.written
                    ),
                    "depend downwards only: move what both need to a lower layer, or pass it in from above",
                ));
            }
        }
    }
    out
}

/// A reference from one file to another: the first one written, for the report.
struct Edge {
    from: usize,
    to: usize,
    line: usize,
    written: String,
}

/// Rule 2 for one source directory, among its files whose path starts with `within` (`""` for
/// all of them).
pub fn circles(
    dir: &str,
    files: &[SourceFile],
    resolver: &Resolver,
    within: &str,
) -> Vec<Violation> {
    let inside = |f: &SourceFile| f.rel.starts_with(within) && !f.test_only && !f.is_bin;
    let mut first_refs: BTreeMap<(usize, usize), (usize, String)> = BTreeMap::new();
    for (i, file) in files.iter().enumerate() {
        if !inside(file) {
            continue;
        }
        for r in resolver.references(file) {
            let target = resolver.file_of(&r.target);
            if let Some(j) = target.filter(|&j| j != i && inside(&files[j])) {
                first_refs.entry((i, j)).or_insert((r.line, r.written));
            }
        }
    }
    let pairs: Vec<(usize, usize)> = first_refs.keys().copied().collect();
    let edges: Vec<Edge> = first_refs
        .into_iter()
        .map(|((from, to), (line, written))| Edge {
            from,
            to,
            line,
            written,
        })
        .collect();
    let names: Vec<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    graph::components(files.len(), &pairs)
        .into_iter()
        .filter(|component| component.len() > MAX_CIRCLE)
        .map(|component| circle(dir, &names, &component, &edges))
        .collect()
}

/// Rule 2 for the web client: its modules (`(path relative to dir, source)`) and their static
/// imports of each other.
pub fn js_circles(dir: &str, modules: &[(String, String)]) -> Vec<Violation> {
    let names: Vec<&str> = modules.iter().map(|(rel, _)| rel.as_str()).collect();
    let mut first_refs: BTreeMap<(usize, usize), (usize, String)> = BTreeMap::new();
    for (i, (rel, src)) in modules.iter().enumerate() {
        for (line, spec) in js::imports(src) {
            let Some(target) = js::resolve(rel, &spec) else {
                continue;
            };
            if let Some(j) = names.iter().position(|n| *n == target).filter(|&j| j != i) {
                first_refs.entry((i, j)).or_insert((line, spec));
            }
        }
    }
    let pairs: Vec<(usize, usize)> = first_refs.keys().copied().collect();
    let edges: Vec<Edge> = first_refs
        .into_iter()
        .map(|((from, to), (line, written))| Edge {
            from,
            to,
            line,
            written,
        })
        .collect();
    graph::components(modules.len(), &pairs)
        .into_iter()
        .filter(|component| component.len() > MAX_CIRCLE)
        .map(|component| circle(dir, &names, &component, &edges))
        .collect()
}

/// The violation for one import circle: at its first file, with every reference inside it.
fn circle(dir: &str, names: &[&str], component: &[usize], edges: &[Edge]) -> Violation {
    let mut members: Vec<usize> = component.to_vec();
    members.sort_by_key(|&i| names[i]);
    let mut inside: Vec<&Edge> = edges
        .iter()
        .filter(|e| component.contains(&e.from) && component.contains(&e.to))
        .collect();
    inside.sort_by_key(|e| (names[e.from], e.line));
    let first = members[0];
    let line = inside
        .iter()
        .find(|e| e.from == first)
        .map_or(1, |e| e.line);
    let member_names: Vec<&str> = members.iter().map(|&i| names[i]).collect();
    let mut v = violation(
        Rule::Circles,
        &format!("{dir}/{}", names[first]),
        line,
        format!(
            "{} files import each other in a circle: {}",
            members.len(),
            member_names.join(", ")
        ),
        "break it: move what they share into a module they all import, or pass values in",
    );
    v.details = inside
        .iter()
        .map(|e| {
            format!(
                "{dir}/{}:{} uses {} (`{}`)",
                names[e.from], e.line, names[e.to], e.written
            )
        })
        .collect();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_channel_only_where_listed() {
        let src = "fn f() {\n    let (tx, rx) = mpsc::unbounded_channel();\n}\n// unbounded_channel in a comment\n#[cfg(test)]\nmod tests { fn t() { mpsc::unbounded_channel(); } }\n";
        let lines = unbounded_lines(&rust::RustFile::parse(src));
        let others = "use std::sync::mpsc::{self, Sender};\nstruct S { tx: mpsc::UnboundedSender<u8> }\nfn g() { let (a, b) = std::sync::mpsc::channel::<u8>(); }\n";
        assert_eq!(unbounded_lines(&rust::RustFile::parse(others)), [1, 2, 3]);
        assert_eq!(lines, [2], "code only, not comments or tests");
        let found = unbounded("crates/x/src/a.rs", &lines, &[]);
        assert_eq!((found[0].rule, found[0].line), (Rule::Unbounded, 2));
        let listed = [Exception {
            path: "crates/x/src/a.rs",
            reason: "test",
        }];
        assert!(unbounded("crates/x/src/a.rs", &lines, &listed).is_empty());
        assert!(unused_unbounded(&["crates/x/src/a.rs".into()], &listed).is_empty());
        assert_eq!(unused_unbounded(&[], &listed).len(), 1, "a stale entry");
    }
    use crate::modules::build;

    fn fixture(files: &[(&str, &str)]) -> Vec<SourceFile> {
        build(
            files
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        )
    }

    const TABLE: &str = "<!-- tidy:layers src -->\n| layer | modules |\n|---|---|\n| top | `lib`, `main`, `server` |\n| middle | `handlers`, `gone` |\n| ground | `hub` |\n<!-- /tidy:layers -->\n";

    #[test]
    fn upward_imports_and_unplaced_modules() {
        let files = fixture(&[
            ("lib.rs", "pub mod server; pub mod handlers; pub mod hub; pub mod extra; pub use hub::Hub;"),
            ("main.rs", "use iris_x::server::run; fn main() { iris_x::Hub::new(); }"),
            ("server.rs", "use crate::{handlers, hub::Hub};"),
            ("handlers.rs", "use crate::hub::Hub;\nfn f() { crate::server::run(); }\n#[cfg(test)] mod tests { use crate::server::x; }"),
            ("hub.rs", "use crate::{handlers::{a, b}, Hub};\n/* crate::server::x */ fn g() -> &'static str { \"crate::server::y\" }"),
            ("extra.rs", ""),
        ]);
        let resolver = Resolver::new(&files, Some("iris_x"));
        let (tables, _) = crate::layers::parse(TABLE);
        let got: Vec<String> = layers(&tables[0], "ARCH.md", "src", &files, &resolver)
            .into_iter()
            .map(|v| format!("{}:{}: {}", v.path, v.line, v.message))
            .collect();
        assert_eq!(
            got,
            [
                "src/extra.rs:1: module `extra` is not placed in any layer",
                "ARCH.md:5: `gone` is listed in layer `middle` but src has no such module",
                "src/handlers.rs:2: `handlers` (layer middle) uses `server` (layer top, above it) in `crate::server::run`",
                "src/hub.rs:1: `hub` (layer ground) uses `handlers` (layer middle, above it) in `crate::handlers::a`",
            ]
        );
    }

    #[test]
    fn every_circle_is_reported() {
        let files = fixture(&[
            ("lib.rs", "mod a; mod b; mod c; mod d; mod e;"),
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::c::X;"),
            ("c.rs", "use crate::d::X;"),
            ("d/mod.rs", "mod inner; fn f() { inner::go(); }"),
            ("d/inner.rs", "use crate::a::X;"),
            ("e.rs", "use crate::a::X;"),
        ]);
        let resolver = Resolver::new(&files, None);
        let got = circles("src", &files, &resolver, "");
        assert_eq!(got.len(), 1);
        // Within `d/` there is no circle: it runs through files outside.
        assert!(circles("src", &files, &resolver, "d/").is_empty());
        assert_eq!(got[0].path, "src/a.rs");
        assert_eq!(
            got[0].message,
            "5 files import each other in a circle: a.rs, b.rs, c.rs, d/inner.rs, d/mod.rs"
        );
        assert_eq!(got[0].details[0], "src/a.rs:1 uses b.rs (`crate::b::X`)");
        let two = fixture(&[
            ("lib.rs", ""),
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::a::X;"),
        ]);
        let got = circles("src", &two, &Resolver::new(&two, None), "");
        assert_eq!(
            got[0].message,
            "2 files import each other in a circle: a.rs, b.rs"
        );
        let parent_and_child = fixture(&[
            ("lib.rs", "mod a; mod b;"),
            ("a/mod.rs", "mod inner; pub use inner::go;"),
            ("a/inner.rs", "use crate::b::X;"),
            ("b.rs", "pub struct X;"),
        ]);
        let got = circles(
            "src",
            &parent_and_child,
            &Resolver::new(&parent_and_child, None),
            "",
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_narrow_room_is_entered_through_its_mod_rs_only() {
        let files = fixture(&[
            ("lib.rs", "mod agent; mod conn;"),
            ("agent/mod.rs", "mod turn; pub use turn::Turn;"),
            ("agent/turn.rs", "pub struct Turn; pub fn inner() {}"),
            (
                "conn.rs",
                "use crate::agent::Turn;\nuse crate::agent::turn::inner;\n",
            ),
        ]);
        let got = narrow_face("src", "agent", &files, &Resolver::new(&files, None));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].path.as_str(), got[0].line), ("src/conn.rs", 2));
        assert!(got[0].message.contains("crate::agent::turn::inner"));
    }

    #[test]
    fn web_modules_that_import_each_other() {
        let m = |rel: &str, src: &str| (rel.to_string(), src.to_string());
        let got = js_circles(
            "web",
            &[
                m("a.js", "import { b } from './b.js';\n"),
                m("b.js", "import { c } from './c.js';\n"),
                m(
                    "c.js",
                    "import { a } from './a.js';\nconst d = import('./d.js');\n",
                ),
                m("d.js", "import { a } from './a.js';\n"),
            ],
        );
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].message,
            "3 files import each other in a circle: a.js, b.js, c.js"
        );
        assert_eq!(got[0].details[0], "web/a.js:1 uses b.js (`./b.js`)");
    }

    #[test]
    fn file_size_exceptions() {
        let files = vec![
            ("big.rs".to_string(), 900),
            ("table.rs".to_string(), 1000),
            ("small.rs".to_string(), 10),
        ];
        let exceptions = [
            Exception {
                path: "table.rs",
                reason: "generated",
            },
            Exception {
                path: "small.rs",
                reason: "was big",
            },
            Exception {
                path: "gone.rs",
                reason: "deleted",
            },
        ];
        let got: Vec<String> = file_sizes(&files, &exceptions)
            .into_iter()
            .map(|v| format!("{}: {}", v.path, v.message))
            .collect();
        assert_eq!(
            got,
            [
                "big.rs: 900 lines, over the limit of 800",
                "small.rs: listed as an exception but has only 10 lines",
                "gone.rs: listed as an exception but the file does not exist",
            ]
        );
    }
}
