//! No import circles: reads every crate's `src/` (not a compiler, a
//! reader of `use crate::…`, `use super::…`, `crate::…` paths and `mod`
//! declarations) and fails on a circle of modules that depend on each
//! other.
//!
//! A module depends on the modules whose items it names, and a module
//! depends on the children it declares; so a child that names its
//! parent's items (`super::Ctx`) is in a circle with it. Test modules
//! (`#[cfg(test)] mod tests`, `*_tests.rs`) and binaries are left out.
//!
//! No crate has one, and none may: `docs/architecture.md` describes the
//! server's layers, and how a module that needs something from above
//! takes it (an argument, a generic, a function given at start-up)
//! rather than naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' `src` directories, by crate name.
fn crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).expect("the crates directory") {
        let path = entry.expect("a crate").path();
        let src = path.join("src");
        if src.is_dir() {
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            found.push((name, src));
        }
    }
    found.sort();
    found
}

/// Every module file under `src` (binaries and test files left out), by
/// module path (`crate`, `commands`, `commands::strings`).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut modules = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            let rel = path.strip_prefix(src).expect("under src");
            if path.is_dir() {
                if rel != Path::new("bin") {
                    dirs.push(path);
                }
                continue;
            }
            let name = path.file_name().expect("a name").to_string_lossy();
            if !name.ends_with(".rs") || name.ends_with("tests.rs") {
                continue;
            }
            // A `main.rs` beside a `lib.rs` is the binary, not the crate
            // root (both would be `crate`, and whichever the directory
            // listing gave last would win).
            if rel == Path::new("main.rs") && src.join("lib.rs").is_file() {
                continue;
            }
            let mut parts: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let module = match parts.is_empty() {
                true => "crate".to_owned(),
                false => parts.join("::"),
            };
            modules.insert(module, path);
        }
    }
    modules
}

/// `source` without comments, string and character literals, and
/// without its test module.
fn code_of(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    without_test_modules(&out)
}

/// `code` without its `#[cfg(test)] mod … { … }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let open = after.find('{');
        let item = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .fold(after, |item, visibility| {
                item.strip_prefix(visibility).unwrap_or(item)
            });
        let is_module = item.starts_with("mod ") && open.is_some_and(|o| !after[..o].contains(';'));
        let Some(open) = open.filter(|_| is_module) else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
            continue;
        };
        out.push_str(&rest[..at]);
        let body = &after[open..];
        let mut depth = 0;
        let mut end = body.len();
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// What one module's code names.
#[derive(Default)]
struct Names {
    /// Paths from `crate`, `super` or `self` (`use` groups expanded).
    paths: Vec<Vec<String>>,
    /// The child modules it declares.
    children: Vec<String>,
    /// `pub use` re-exports: the name it gives, the path it stands for.
    reexports: BTreeMap<String, Vec<String>>,
}

/// What `code` names (see [`Names`]).
fn names_in(code: &str) -> Names {
    let tokens = tokenize(code);
    let mut paths = Vec::new();
    let mut children = Vec::new();
    let mut reexports = BTreeMap::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        if token == "mod"
            && tokens.get(i + 2).map(String::as_str) == Some(";")
            && tokens.get(i + 1).is_some_and(|t| is_ident(t))
        {
            children.push(tokens[i + 1].clone());
            i += 3;
        } else if token == "use" {
            let end = (i..tokens.len())
                .find(|&j| tokens[j] == ";")
                .unwrap_or(tokens.len());
            let mut used = Vec::new();
            expand_use(&tokens[i + 1..end], Vec::new(), &mut used);
            let public = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
            if public {
                for (path, alias) in &used {
                    reexports.insert(alias.clone(), path.clone());
                }
            }
            paths.extend(used.into_iter().map(|(path, _)| path));
            i = end + 1;
        } else if matches!(token, "crate" | "super")
            && tokens.get(i + 1).map(String::as_str) == Some("::")
            && (i == 0 || tokens[i - 1] != "::")
        {
            let mut path = vec![token.to_owned()];
            let mut j = i + 1;
            while tokens.get(j).map(String::as_str) == Some("::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            paths.push(path);
            i = j;
        } else {
            i += 1;
        }
    }
    Names {
        paths,
        children,
        reexports,
    }
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' || c == '$' {
            // `$name` is a macro's variable: one token, never a module.
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            tokens.push(c.to_string());
            i += 1;
        }
    }
    tokens
}

/// Expands one `use` tree (`a::{b, c::{d, e as f}}`) into its paths,
/// each with the name it is known by where it is used.
fn expand_use(tokens: &[String], prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    // What follows a group's trailing comma (`use super::{a, b,}`) names
    // nothing, not the group's prefix.
    if tokens.is_empty() {
        return;
    }
    let mut path = prefix;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "::" | "pub" => i += 1,
            "{" => {
                let mut depth = 0;
                let mut start = i + 1;
                for j in i..tokens.len() {
                    match tokens[j].as_str() {
                        "{" => depth += 1,
                        "}" => {
                            depth -= 1;
                            if depth == 0 {
                                expand_use(&tokens[start..j], path.clone(), out);
                                return;
                            }
                        }
                        "," if depth == 1 => {
                            expand_use(&tokens[start..j], path.clone(), out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            "as" => {
                if let Some(alias) = tokens.get(i + 1) {
                    out.push((path, alias.clone()));
                }
                return;
            }
            "*" => break,
            token if token.starts_with('$') => return,
            token => {
                path.push(token.to_owned());
                i += 1;
            }
        }
    }
    if let Some(last) = path.last().cloned() {
        out.push((path, last));
    }
}

/// The module a path names (its longest prefix that is a module, through
/// `pub use` re-exports), seen from `module`.
fn resolve(module: &str, path: &[String], crate_names: &BTreeMap<String, Names>) -> Option<String> {
    let (found, rest) = resolve_once(module, path, crate_names)?;
    // An item re-exported by the module found: the module it comes from.
    if let Some(reexported) = rest
        .first()
        .and_then(|name| crate_names[&found].reexports.get(name))
        && let Some(source) = resolve(&found, reexported, crate_names)
    {
        return Some(source);
    }
    Some(found)
}

/// The longest prefix of `path` that is a module, and what follows it.
fn resolve_once<'p>(
    module: &str,
    path: &'p [String],
    modules: &BTreeMap<String, Names>,
) -> Option<(String, &'p [String])> {
    let mut base: Vec<&str> = match module {
        "crate" => Vec::new(),
        m => m.split("::").collect(),
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // `use child::Item`: a path from a child module of this one.
        Some(first) => {
            let child = match module {
                "crate" => first.to_owned(),
                m => format!("{m}::{first}"),
            };
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    for take in (0..=rest.len()).rev() {
        let mut parts: Vec<&str> = base.clone();
        parts.extend(rest[..take].iter().map(String::as_str));
        let candidate = match parts.is_empty() {
            true => "crate".to_owned(),
            false => parts.join("::"),
        };
        if modules.contains_key(&candidate) {
            return Some((candidate, &rest[take..]));
        }
    }
    None
}

/// Each module's dependencies within its crate.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let names: BTreeMap<String, Names> = modules(src)
        .into_iter()
        .map(|(module, file)| {
            let source = std::fs::read_to_string(file).expect("a readable source file");
            (module, names_in(&code_of(&source)))
        })
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, named) in &names {
        let targets = edges.entry(module.clone()).or_default();
        for path in &named.paths {
            // An item of the crate root itself is an exported macro
            // (`crate::log_warning!`, `use crate::log_notice`): macros
            // live at the root whichever module defines them, and the
            // root only declares the modules and runs `main`.
            if let Some(target) = resolve(module, path, &names)
                && &target != module
                && target != "crate"
            {
                targets.insert(target);
            }
        }
        for child in &named.children {
            let child = match module.as_str() {
                "crate" => child.clone(),
                m => format!("{m}::{child}"),
            };
            if names.contains_key(&child) {
                targets.insert(child);
            }
        }
    }
    edges
}

/// The circles (strongly connected components of two or more modules).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.insert(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !tarjan.index.contains_key(v.as_str()) {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

/// `STRATA_IMPORT_GRAPH=<crate>` prints that crate's import graph (one
/// `module -> dependency` line each) for `docs/architecture.md`.
#[test]
fn print_the_import_graph_when_asked() {
    let Ok(wanted) = std::env::var("STRATA_IMPORT_GRAPH") else {
        return;
    };
    for (name, src) in crates().into_iter().filter(|(name, _)| *name == wanted) {
        for (from, targets) in graph(&src) {
            for to in targets {
                println!("{name}: {from} -> {to}");
            }
        }
    }
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut failures = Vec::new();
    let crates = crates();
    assert!(crates.len() >= 4, "found the crates: {crates:?}");
    for (name, src) in crates {
        let edges = graph(&src);
        assert!(edges.len() > 1, "{name}: read its modules");
        for circle in circles(&edges) {
            let inside: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    let targets = edges[from].iter().filter(|to| circle.contains(*to));
                    targets.map(move |to| format!("{from} -> {to}"))
                })
                .collect();
            failures.push(format!(
                "{name}: an import circle of {circle:?}; its edges: {}",
                inside.join(", ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The import graph of a scratch crate made of `files` (paths under
/// `src/`, texts), written under the temp directory and removed after.
fn scratch_graph(name: &str, files: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let dir = std::env::temp_dir().join(format!("strata-import-{name}-{}", std::process::id()));
    let src = dir.join("src");
    for (path, text) in files {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("under src")).expect("a scratch crate");
        std::fs::write(path, text).expect("a scratch file");
    }
    let edges = graph(&src);
    let _ = std::fs::remove_dir_all(&dir);
    edges
}

#[test]
fn the_reader_finds_a_circle_through_super_and_use_groups() {
    let files = [
        (
            "lib.rs",
            "mod family;\nmod table;\n// use crate::nothing;\n",
        ),
        (
            "table.rs",
            "use crate::{family::{one::get, two}};\nfn f() { let s = \"crate::x\"; }\n",
        ),
        ("family/mod.rs", "mod one;\nmod two;\npub struct Ctx;\n"),
        ("family/one.rs", "use super::Ctx;\npub fn get() {}\n"),
        (
            "family/two.rs",
            "pub fn set() { crate::table::lookup(); }\n#[cfg(test)]\nmod tests { use crate::lib; }\n",
        ),
    ];
    let edges = scratch_graph("circles", &files);
    let found = circles(&edges);
    let modules = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // one <-> family (child names its parent), and two -> table -> two.
    assert!(
        found.contains(&modules(&["family", "family::one", "family::two", "table"])),
        "{found:?}\n{edges:?}"
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        !edges["table"].contains("crate"),
        "a string is not a path: {edges:?}"
    );
}

/// A child that takes items its parent re-exports from a sibling depends
/// on the sibling, not on the parent, also through a group with a
/// trailing comma (as rustfmt writes long ones).
#[test]
fn a_re_exported_item_and_a_trailing_comma_name_no_parent() {
    let files = [
        ("lib.rs", "mod family;\n"),
        (
            "family/mod.rs",
            "mod ctx;\nmod one;\npub use ctx::{Ctx, ERR};\nfn dispatch() { one::get(); }\n",
        ),
        (
            "family/ctx.rs",
            "pub struct Ctx;\npub const ERR: &str = \"\";\n",
        ),
        (
            "family/one.rs",
            "use super::{\n    Ctx,\n    ERR,\n};\npub fn get() {}\n",
        ),
    ];
    let edges = scratch_graph("reexports", &files);
    let found = circles(&edges);
    assert!(found.is_empty(), "{found:?}\n{edges:?}");
    assert!(edges["family::one"].contains("family::ctx"), "{edges:?}");
}

#[test]
fn the_reader_takes_lib_rs_for_the_root_and_exported_macros_for_no_module() {
    let files = [
        ("lib.rs", "pub mod log;\npub mod work;\n"),
        ("main.rs", "fn main() { scratch::work::run(); }\n"),
        (
            "log.rs",
            "#[macro_export]\nmacro_rules! note { () => {} }\n",
        ),
        (
            "work.rs",
            "use crate::note;\npub fn run() { crate::note!(); }\n",
        ),
    ];
    let edges = scratch_graph("root", &files);
    assert!(
        edges["crate"].contains("work") && edges["crate"].contains("log"),
        "the root is lib.rs, whatever the listing's order: {edges:?}"
    );
    assert!(!edges["work"].contains("crate"), "{edges:?}");
    assert!(circles(&edges).is_empty(), "{edges:?}");
}
