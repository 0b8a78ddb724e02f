//! The module tree of one source directory, and resolution of the paths its files mention to
//! modules and files.

use std::collections::BTreeMap;
use std::path::Path;

use crate::rust::{self, RawPath, RustFile};

/// One `.rs` file of a source directory.
pub struct SourceFile {
    /// Path relative to the source directory, with `/`: `agent/lane.rs`.
    pub rel: String,
    /// Module path from the crate root: `["agent", "lane"]`; empty for `lib.rs` and `main.rs`.
    pub module: Vec<String>,
    /// The top-level module it belongs to: `agent`, or `lib` / `main` for the crate roots.
    pub top: String,
    /// `main.rs` or a file under `bin/`: a separate crate that reaches the library by name.
    pub is_bin: bool,
    /// Only compiled for tests (`#[cfg(test)] mod tests;` somewhere above it).
    pub test_only: bool,
    pub parsed: RustFile,
}

/// Where a file sits in the module tree, from its path relative to the source directory.
pub fn module_of(rel: &str) -> (Vec<String>, String) {
    if rel == "lib.rs" || rel == "main.rs" {
        return (Vec::new(), rel.trim_end_matches(".rs").to_string());
    }
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if let Some(last) = parts.last_mut() {
        *last = last.trim_end_matches(".rs").to_string();
    }
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    let top = parts[0].clone();
    (parts, top)
}

/// Builds the files of a source directory from `(relative path, source)` pairs, and marks the
/// files that are only compiled for tests.
pub fn build(sources: Vec<(String, String)>) -> Vec<SourceFile> {
    let mut files: Vec<SourceFile> = sources
        .into_iter()
        .map(|(rel, src)| {
            let (module, top) = module_of(&rel);
            let parsed = RustFile::parse(&src);
            SourceFile {
                is_bin: rel == "main.rs" || rel.starts_with("bin/"),
                test_only: parsed.test_only,
                rel,
                module,
                top,
                parsed,
            }
        })
        .collect();
    let test_roots: Vec<Vec<String>> = files
        .iter()
        .flat_map(|f| {
            f.parsed.test_modules.iter().map(|m| {
                let mut path = f.module.clone();
                path.push(m.clone());
                path
            })
        })
        .collect();
    for f in &mut files {
        if test_roots.iter().any(|root| f.module.starts_with(root)) {
            f.test_only = true;
        }
    }
    files
}

/// A reference from one file to a module path of its own crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub line: usize,
    /// As written: `crate::hub::Hub`.
    pub written: String,
    /// Absolute, from the crate root, re-exports of the root followed: `["hub", "Hub"]`.
    pub target: Vec<String>,
    /// Starts with a name brought in by a `use` of the file, which is itself a reference.
    pub through_use: bool,
}

/// Resolves paths to modules and files, for the files of one source directory.
pub struct Resolver {
    /// Every module (file or inline) to the index of the file that holds it.
    modules: BTreeMap<Vec<String>, usize>,
    /// Names the crate root brings into scope with `use`, to the absolute path they stand for.
    root_uses: BTreeMap<String, Vec<String>>,
    /// The library's name as other crates write it (`iris_gateway`).
    lib_name: Option<String>,
}

impl Resolver {
    pub fn new(files: &[SourceFile], lib_name: Option<&str>) -> Resolver {
        let mut resolver = Resolver {
            modules: BTreeMap::new(),
            root_uses: BTreeMap::new(),
            lib_name: lib_name.map(str::to_string),
        };
        for (i, f) in files.iter().enumerate() {
            if f.test_only || f.is_bin {
                continue;
            }
            resolver.modules.insert(f.module.clone(), i);
            for inline in rust::scan(&f.parsed).inline_modules {
                let mut path = f.module.clone();
                path.extend(inline);
                resolver.modules.entry(path).or_insert(i);
            }
        }
        if let Some(root) = files.iter().find(|f| f.rel == "lib.rs") {
            let mut uses = BTreeMap::new();
            for p in rust::scan(&root.parsed).paths {
                if !p.from_use || !p.scope.is_empty() {
                    continue;
                }
                let Some(target) = resolver.absolute(&p, root) else {
                    continue;
                };
                let name = p.alias.clone().or_else(|| target.last().cloned());
                if let Some(name) = name.filter(|n| n != "*" && n != "_") {
                    uses.insert(name, target);
                }
            }
            resolver.root_uses = uses;
        }
        resolver
    }

    /// The references of a file to modules of its own crate. A path that starts with a name
    /// the file imported (`use crate::agent;` then `agent::lane::run()`) is a reference too,
    /// marked `through_use`.
    pub fn references(&self, file: &SourceFile) -> Vec<Reference> {
        let paths = rust::scan(&file.parsed).paths;
        let mut imported: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in paths.iter().filter(|p| p.from_use) {
            if let Some(target) = self.absolute(p, file) {
                let name = p.alias.clone().or_else(|| target.last().cloned());
                if let Some(name) = name.filter(|n| n != "*" && n != "_") {
                    imported.insert(name, target);
                }
            }
        }
        paths
            .iter()
            .filter(|p| !p.is_macro)
            .filter_map(|p| {
                let (target, through_use) = match self.absolute(p, file) {
                    Some(target) => (target, false),
                    None if p.from_use => return None,
                    None => {
                        let start = imported.get(p.segments.first()?)?;
                        ([start.as_slice(), &p.segments[1..]].concat(), true)
                    }
                };
                Some(Reference {
                    line: p.line,
                    written: p.segments.join("::"),
                    target: self.follow_root_uses(target),
                    through_use,
                })
            })
            .collect()
    }

    /// The absolute module path a written path stands for, or `None` if it leaves the crate
    /// (another crate, a local item, a variant).
    pub fn absolute(&self, p: &RawPath, file: &SourceFile) -> Option<Vec<String>> {
        let first = p.segments.first()?;
        let rest = || p.segments[1..].to_vec();
        if self.lib_name.as_deref() == Some(first.as_str()) {
            return Some(rest());
        }
        if file.is_bin {
            // `crate::`, `self::` and `super::` in a binary name the binary, not the library.
            return None;
        }
        let mut here = file.module.clone();
        here.extend(p.scope.iter().cloned());
        match first.as_str() {
            "crate" => Some(rest()),
            "self" => Some([here, rest()].concat()),
            "super" => {
                let ups = p.segments.iter().take_while(|s| *s == "super").count();
                let keep = here.len().checked_sub(ups)?;
                Some([&here[..keep], &p.segments[ups..]].concat())
            }
            _ => {
                let mut child = here.clone();
                child.push(first.clone());
                self.modules
                    .contains_key(&child)
                    .then(|| [here, p.segments.clone()].concat())
            }
        }
    }

    /// `crate::Config` where the root says `pub use config::Config;` is `config::Config`.
    fn follow_root_uses(&self, mut target: Vec<String>) -> Vec<String> {
        for _ in 0..4 {
            let Some(first) = target.first() else {
                break;
            };
            if self.modules.contains_key(&target[..1]) {
                break;
            }
            let Some(to) = self.root_uses.get(first) else {
                break;
            };
            target = [to.as_slice(), &target[1..]].concat();
        }
        target
    }

    /// The top-level module an absolute path lies in; items of the crate root are in `lib`.
    pub fn top_module(&self, target: &[String]) -> String {
        match target.first() {
            Some(first) if self.modules.contains_key(&target[..1]) => first.clone(),
            _ => "lib".to_string(),
        }
    }

    /// The file holding the longest module prefix of an absolute path.
    pub fn file_of(&self, target: &[String]) -> Option<usize> {
        (0..=target.len())
            .rev()
            .find_map(|n| self.modules.get(&target[..n]).copied())
    }
}

/// The library name of the crate whose source directory is `src_dir`, from its Cargo.toml
/// (`name = "iris-gateway"` gives `iris_gateway`).
pub fn lib_name(src_dir: &Path) -> Option<String> {
    let manifest = std::fs::read_to_string(src_dir.parent()?.join("Cargo.toml")).ok()?;
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(value) = line.strip_prefix("name") {
                let value = value.trim_start().strip_prefix('=')?.trim();
                return Some(value.trim_matches('"').replace('-', "_"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> Vec<SourceFile> {
        build(
            files
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        )
    }

    fn refs(files: &[SourceFile], resolver: &Resolver, rel: &str) -> Vec<String> {
        let file = files.iter().find(|f| f.rel == rel).expect("fixture file");
        resolver
            .references(file)
            .into_iter()
            .map(|r| r.target.join("::"))
            .collect()
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_of("lib.rs"), (vec![], "lib".to_string()));
        assert_eq!(module_of("hub.rs").0, ["hub"]);
        assert_eq!(module_of("agent/mod.rs").0, ["agent"]);
        assert_eq!(
            module_of("agent/lane/drive.rs"),
            (
                vec!["agent".into(), "lane".into(), "drive".into()],
                "agent".to_string()
            )
        );
    }

    #[test]
    fn super_self_crate_child_and_root_reexports() {
        let files = fixture(&[
            ("lib.rs", "pub mod agent; pub mod config; pub use config::Config as Settings;"),
            ("config.rs", "pub struct Config;"),
            ("agent/mod.rs", "mod lane; mod host; use host::Host; fn f() { lane::run(); other::x(); }"),
            ("agent/host.rs", "pub struct Host;"),
            ("agent/lane.rs", "mod drive; use super::host::Host; use crate::Settings; use crate::agent as a; fn f() { self::drive::go(); a::host::x(); Settings::new(); }"),
            ("agent/lane/drive.rs", "use super::super::Host; use super::*; fn g() { super::super::super::config::x(); }"),
            ("main.rs", "use iris_gateway::{agent, Settings}; fn main() { crate::cli::run(); }"),
        ]);
        let r = Resolver::new(&files, Some("iris_gateway"));
        assert_eq!(
            refs(&files, &r, "agent/mod.rs"),
            ["agent::host::Host", "agent::lane::run"]
        );
        assert_eq!(
            refs(&files, &r, "agent/lane.rs"),
            [
                "agent::host::Host",
                "config::Config",
                "agent",
                "agent::lane::drive::go",
                "agent::host::x",
                "config::Config::new"
            ]
        );
        assert_eq!(
            refs(&files, &r, "agent/lane/drive.rs"),
            ["agent::Host", "agent::lane::*", "config::x"]
        );
        assert_eq!(refs(&files, &r, "main.rs"), ["agent", "config::Config"]);
        let idx = |rel: &str| files.iter().position(|f| f.rel == rel);
        let target = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            r.file_of(&target("agent::lane::drive::go")),
            idx("agent/lane/drive.rs")
        );
        assert_eq!(
            r.file_of(&target("agent::lane::LaneCmd")),
            idx("agent/lane.rs")
        );
        assert_eq!(r.file_of(&target("agent::Host")), idx("agent/mod.rs"));
        assert_eq!(r.file_of(&target("Unknown")), idx("lib.rs"));
        assert_eq!(r.top_module(&target("agent::x")), "agent");
        assert_eq!(r.top_module(&target("Unknown")), "lib");
    }

    #[test]
    fn test_only_files() {
        let files = fixture(&[
            ("lib.rs", "pub mod hub; #[cfg(test)] mod tests;"),
            ("hub.rs", "#[cfg(test)]\nmod tests;"),
            ("hub/tests.rs", "fn f() { x.unwrap() }"),
            ("tests.rs", "mod more;"),
            ("tests/more.rs", ""),
        ]);
        let flags: Vec<(&str, bool)> = files
            .iter()
            .map(|f| (f.rel.as_str(), f.test_only))
            .collect();
        assert_eq!(
            flags,
            [
                ("lib.rs", false),
                ("hub.rs", false),
                ("hub/tests.rs", true),
                ("tests.rs", true),
                ("tests/more.rs", true),
            ]
        );
    }
}
