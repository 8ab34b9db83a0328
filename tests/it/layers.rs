//! Architecture checks on the sources in `src/`: imports follow the pipeline, and no module
//! cycle.
//!
//! Every file of `src/` belongs to a stage of the pipeline by its top-level module (its folder,
//! or the file itself, e.g. `src/schedule.rs`); [`STAGES`] ranks them in pipeline order.
//! `src/lib.rs`, the crate root, is exempt. Two rules:
//!
//! 1. **Direction.** A file may refer to a `crate::` path only of a stage whose rank is at
//!    most its own. Every path in code counts: `use` lines (`use crate::{a, b::c}` groups
//!    expanded), inline paths such as `crate::record::registry::Untracked::enter()`,
//!    `$crate::` paths in macros, `super::` and `self::` paths (resolved from the file's
//!    module and the inline `mod` blocks around them, so `super::super::trace::X` is caught),
//!    and paths into a child module (`child::X` in a `mod.rs`). A path to an item of the crate
//!    root that the root re-exports (`crate::Callsite`) counts as the path it re-exports
//!    (`crate::record::callsite::Callsite`), as do re-exports by other modules. Comments (`//`,
//!    `///`, `//!`, `/* */`, so doc links too) and string and character literals are ignored.
//! 2. **No cycle.** The graph has a node per file (the crate root left out) and an edge from a
//!    file to the file of each module it refers to (`crate::record::registry::Foo` is
//!    `src/record/registry.rs` or `src/record/registry/mod.rs`, `crate::record::Foo` is
//!    `src/record/mod.rs`). `mod x;` declarations are not edges, `use` lines and inline paths
//!    are; but a `pub use` by which a module re-exports an item of one of its own descendants
//!    is the parent's facade, not an import, and is not an edge either. Each strongly
//!    connected component of more than one file (Tarjan) is a cycle and fails the test.
//!
//! A new top-level module (`src/foo/` or `src/foo.rs`) fails until it is given a rank in
//! [`STAGES`]. The `checker_*` tests feed small synthetic sources to the checker to show that
//! it catches what it should and nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

/// The pipeline stages by top-level module of `src/`, with their rank: a file may refer only
/// to stages of a rank at most its own.
const STAGES: &[(&str, u32)] = &[
    ("record", 0),   // src/record/**
    ("capture", 1),  // src/capture/**
    ("trace", 2),    // src/trace/**
    ("decode", 3),   // src/decode/**
    ("report", 4),   // src/report/**
    ("table", 5),    // src/table/**
    ("export", 5),   // src/export/**
    ("session", 6),  // src/session/**
    ("schedule", 6), // src/schedule.rs: what a scheduled session hands over, beside session
    ("thread", 6),   // src/thread.rs: threads that join their parent's sessions, beside session
    ("tracing", 6),  // src/tracing/**: the `tracing` bridge, a front end over record/ like session
    // src/collector/**: collectors and plug-ins that sessions run.
    ("collector", 6),
    // src/native.rs: the C functions of the `native` feature, a front end like session.
    ("native", 6),
    // src/attach/**: attaching to a running program, a front end over sessions (its server
    // serves a session through `Profiler`; the crate root opens it for a listening session).
    ("attach", 7),
    // src/macros.rs, src/__private.rs (what the macros expand to) and src/hooks.rs (the test
    // hooks): the crate root's, split out of `src/lib.rs`, above every stage like it.
    ("macros", 8),
    ("__private", 8),
    ("hooks", 8),
];

fn rank(stage: &str) -> Option<u32> {
    STAGES.iter().find(|(s, _)| *s == stage).map(|&(_, r)| r)
}

type Module = Vec<String>;

/// A source file: its path relative to the crate (`src/record/registry.rs`) and its module
/// path (`["record", "registry"]`; empty for the crate root).
struct SourceFile {
    rel: String,
    module: Module,
    text: String,
}

impl SourceFile {
    fn new(rel: &str, text: &str) -> Self {
        let inner = rel
            .strip_prefix("src/")
            .unwrap_or_else(|| panic!("{rel}: not under src/"));
        let inner = inner
            .strip_suffix(".rs")
            .unwrap_or_else(|| panic!("{rel}: not a .rs file"));
        let mut module: Module = inner.split('/').map(str::to_owned).collect();
        if module.last().is_some_and(|m| m == "mod") || module == ["lib"] {
            module.pop();
        }
        Self {
            rel: rel.to_owned(),
            module,
            text: text.to_owned(),
        }
    }

    fn is_root(&self) -> bool {
        self.module.is_empty()
    }
}

/// A path in code, as found in a file.
#[derive(Clone, Debug)]
struct Ref {
    line: usize,
    /// As written (`use` groups expanded), e.g. `crate::trace::Value`.
    written: String,
    /// Absolute module path, `crate` left out, re-exports not yet followed.
    absolute: Module,
    /// In a `pub use` (or `pub(..) use`): a re-export.
    reexport: bool,
}

// ---------------------------------------------------------------------------------------------
// Lexing: comments and literals blanked out, then tokens with line numbers.

/// `src` with comments and string and character literals replaced by spaces (newlines kept,
/// so line numbers still hold).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        // Line comments, doc comments included.
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
            continue;
        }
        // Block comments, nested.
        if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                    continue;
                }
                out.push_str("  ");
                i += 2;
                if depth == 0 {
                    break;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br"..", cr"..".
        let raw_prefix = match (ch, next) {
            ('r', _) => Some(1),
            ('b' | 'c', Some('r')) => Some(2),
            _ => None,
        };
        if let Some(prefix) = raw_prefix.filter(|_| i == 0 || !is_ident(c[i - 1])) {
            let mut j = i + prefix;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) == Some(&'"') {
                let closes =
                    |k: usize| c[k] == '"' && (1..=hashes).all(|h| c.get(k + h) == Some(&'#'));
                let mut k = j + 1;
                while k < c.len() && !closes(k) {
                    k += 1;
                }
                let end = (k + 1 + hashes).min(c.len());
                for &ch in &c[i..end] {
                    blank(&mut out, ch);
                }
                i = end;
                continue;
            }
        }
        // Strings (b"..", c".." leave their prefix, an identifier, in place).
        if ch == '"' {
            blank(&mut out, ch);
            i += 1;
            while i < c.len() {
                let ch = c[i];
                blank(&mut out, ch);
                i += 1;
                if ch == '\\' && i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                } else if ch == '"' {
                    break;
                }
            }
            continue;
        }
        // Character literals ('a', '\n', '\'', '\u{1F600}'); lifetimes ('a) stay.
        if ch == '\'' {
            if next == Some('\\') {
                let mut k = i + 3;
                while k < c.len() && c[k] != '\'' {
                    k += 1;
                }
                let end = (k + 1).min(c.len());
                for &ch in &c[i..end] {
                    blank(&mut out, ch);
                }
                i = end;
                continue;
            }
            if c.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
                continue;
            }
        }
        out.push(ch);
        i += 1;
    }
    out
}

struct Token {
    /// An identifier or keyword, `::`, or one other character.
    text: String,
    line: usize,
}

fn tokens(stripped: &str) -> Vec<Token> {
    let c: Vec<char> = stripped.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".to_owned(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Paths in code.

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Parses a use tree (or a plain path) at `toks[i]` under `prefix`; pushes each full path
/// with its line. Returns the index after it.
fn parse_tree(
    toks: &[Token],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut segments = prefix.to_vec();
    let mut line = toks.get(i).map_or(0, |t| t.line);
    while let Some(tok) = toks.get(i) {
        match tok.text.as_str() {
            "{" => {
                i += 1;
                while toks.get(i).is_some_and(|t| t.text != "}") {
                    i = parse_tree(toks, i, &segments, out);
                    if toks.get(i).is_some_and(|t| t.text == ",") {
                        i += 1;
                    } else if toks.get(i).is_some_and(|t| t.text != "}") {
                        // Not a use tree after all: skip to the end of the group.
                        i += 1;
                    }
                }
                return i + 1;
            }
            "*" => {
                i += 1;
                break;
            }
            "$" => i += 1, // `$crate`
            text if is_ident(text) && text != "as" => {
                // `self` inside a group names the prefix itself.
                if !(text == "self" && !prefix.is_empty() && segments.len() == prefix.len()) {
                    segments.push(text.to_owned());
                }
                line = tok.line;
                i += 1;
                if toks.get(i).is_some_and(|t| t.text == "::") {
                    i += 1;
                } else {
                    break;
                }
            }
            _ => break,
        }
    }
    if toks.get(i).is_some_and(|t| t.text == "as") {
        i += 2;
    }
    if segments.len() > prefix.len() || !prefix.is_empty() {
        out.push((segments, line));
    }
    i
}

/// `raw` (starting with `crate`, `self` or `super`) as an absolute module path, from within
/// module `current`; `None` when `super` climbs above the crate root.
fn absolute(raw: &[String], current: &[String]) -> Option<Module> {
    let mut abs: Module = match raw[0].as_str() {
        "crate" => Vec::new(),
        "self" => current.to_vec(),
        "super" => {
            let mut m = current.to_vec();
            m.pop()?;
            m
        }
        _ => return None,
    };
    let mut leading = true;
    for segment in &raw[1..] {
        match segment.as_str() {
            "super" if leading => {
                abs.pop()?;
            }
            "self" => {}
            _ => {
                leading = false;
                abs.push(segment.clone());
            }
        }
    }
    Some(abs)
}

/// Every path of `file` that names a module of this crate.
fn references(file: &SourceFile, modules: &BTreeSet<Module>) -> Vec<Ref> {
    let toks = tokens(&strip(&file.text));
    let text = |i: usize| toks.get(i).map_or("", |t| t.text.as_str());
    let mut refs = Vec::new();
    // Inline `mod name { .. }` blocks around the current token: (name, depth outside).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth: usize = 0;
    let mut i = 0;
    while i < toks.len() {
        let current: Module = file
            .module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(name, _)| name.clone()))
            .collect();
        let is_child = |name: &str| {
            let mut m = current.clone();
            m.push(name.to_owned());
            modules.contains(&m)
        };
        let prev = if i > 0 { text(i - 1) } else { "" };
        let t = text(i);
        match t {
            "{" => {
                depth += 1;
                i += 1;
            }
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                i += 1;
            }
            "mod" if is_ident(text(i + 1)) && text(i + 2) == "{" => {
                inline.push((text(i + 1).to_owned(), depth));
                depth += 1;
                i += 3;
            }
            // `mod x;` declares a child: not a reference.
            "mod" => i += 1,
            "use" => {
                // `pub use`, `pub(crate) use`, `pub(in path) use`.
                let reexport = prev == "pub"
                    || (prev == ")"
                        && toks[..i - 1]
                            .iter()
                            .rposition(|t| t.text == "(")
                            .is_some_and(|open| open > 0 && text(open - 1) == "pub"));
                let mut paths = Vec::new();
                let mut end = parse_tree(&toks, i + 1, &[], &mut paths);
                while end < toks.len() && text(end) != ";" {
                    end += 1;
                }
                for (raw, line) in paths {
                    let written = raw.join("::");
                    let raw = match raw[0].as_str() {
                        "crate" | "self" | "super" => raw,
                        // Edition 2018 paths: a child module of the current one.
                        first if is_child(first) => {
                            std::iter::once("self".to_owned()).chain(raw).collect()
                        }
                        _ => continue, // extern crates, std, items in scope
                    };
                    if let Some(absolute) = absolute(&raw, &current) {
                        refs.push(Ref {
                            line,
                            written,
                            absolute,
                            reexport,
                        });
                    }
                }
                i = end + 1;
            }
            _ if text(i + 1) == "::" && prev != "::" && prev != "." && is_ident(t) => {
                let relative = matches!(t, "crate" | "self" | "super");
                // `pub(in crate::x)` is a visibility, not a reference.
                let visibility =
                    prev == "in" && i >= 3 && text(i - 2) == "(" && text(i - 3) == "pub";
                if !(relative || is_child(t)) || visibility {
                    i += 1;
                    continue;
                }
                let mut paths = Vec::new();
                let end = parse_tree(&toks, i, &[], &mut paths);
                for (raw, line) in paths {
                    let written = raw.join("::");
                    let raw: Vec<String> = if relative {
                        raw
                    } else {
                        std::iter::once("self".to_owned()).chain(raw).collect()
                    };
                    if let Some(absolute) = absolute(&raw, &current) {
                        refs.push(Ref {
                            line,
                            written,
                            absolute,
                            reexport: false,
                        });
                    }
                }
                i = end.max(i + 1);
            }
            _ => i += 1,
        }
    }
    refs
}

// ---------------------------------------------------------------------------------------------
// The checks.

#[derive(Default, Debug)]
struct Findings {
    /// Top-level modules without a rank in STAGES.
    unknown: Vec<String>,
    /// References against the pipeline direction.
    layering: Vec<String>,
    /// Import cycles.
    cycles: Vec<String>,
}

/// Follows re-exports in `abs`: `crate::Callsite` becomes `crate::record::callsite::Callsite`
/// when the root has `pub use record::callsite::Callsite`. Returns the path and the module of
/// the file it lands in.
fn follow(
    abs: &[String],
    modules: &BTreeSet<Module>,
    reexports: &HashMap<Module, HashMap<String, Module>>,
) -> (Module, Module) {
    let mut abs = abs.to_vec();
    'restart: for _ in 0..16 {
        let mut module: Module = Vec::new();
        for (k, segment) in abs.iter().enumerate() {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if modules.contains(&deeper) {
                module = deeper;
                continue;
            }
            if let Some(target) = reexports.get(&module).and_then(|r| r.get(segment)) {
                let mut next = target.clone();
                next.extend(abs[k + 1..].iter().cloned());
                if next != abs {
                    abs = next;
                    continue 'restart;
                }
            }
            break;
        }
        return (abs, module);
    }
    let module = abs
        .iter()
        .scan(Vec::new(), |m: &mut Module, s| {
            m.push(s.clone());
            Some(m.clone())
        })
        .filter(|m| modules.contains(m))
        .last()
        .unwrap_or_default();
    (abs, module)
}

fn check(files: &[SourceFile]) -> Findings {
    let mut findings = Findings::default();
    let modules: BTreeSet<Module> = files.iter().map(|f| f.module.clone()).collect();
    let file_of: HashMap<&Module, &str> =
        files.iter().map(|f| (&f.module, f.rel.as_str())).collect();

    // Unknown stages.
    let mut seen = BTreeSet::new();
    for file in files.iter().filter(|f| !f.is_root()) {
        let top = &file.module[0];
        if rank(top).is_none() && seen.insert(top.clone()) {
            findings.unknown.push(format!(
                "{}: top-level module `{top}` has no stage: add it to the rank table STAGES in \
                 tests/it/layers.rs, with its place in the pipeline",
                file.rel
            ));
        }
    }

    let refs: Vec<Vec<Ref>> = files.iter().map(|f| references(f, &modules)).collect();

    // What each module re-exports by name (`pub use path;`, `pub use path as name;`).
    let mut reexports: HashMap<Module, HashMap<String, Module>> = HashMap::new();
    for (file, refs) in files.iter().zip(&refs) {
        for r in refs.iter().filter(|r| r.reexport) {
            if let Some(name) = r.absolute.last() {
                reexports
                    .entry(file.module.clone())
                    .or_default()
                    .insert(name.clone(), r.absolute.clone());
            }
        }
    }
    // `pub use x as y` registers under the last segment of x, not y; good enough for the
    // crate's facades, which do not rename.

    // Direction.
    let mut edges: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    let index: HashMap<&str, usize> = files
        .iter()
        .enumerate()
        .map(|(k, f)| (f.rel.as_str(), k))
        .collect();
    for (k, (file, refs)) in files.iter().zip(&refs).enumerate() {
        if file.is_root() {
            continue;
        }
        let own = rank(&file.module[0]);
        for r in refs {
            let (resolved, target) = follow(&r.absolute, &modules, &reexports);
            let where_ = format!("{}:{}: `{}`", file.rel, r.line, r.written);
            if let (Some(own), Some(stage)) = (own, target.first())
                && let Some(theirs) = rank(stage).filter(|&theirs| theirs > own)
            {
                let via = if resolved == r.absolute {
                    String::new()
                } else {
                    format!(" (re-export of `crate::{}`)", resolved.join("::"))
                };
                findings.layering.push(format!(
                    "{where_}{via}: stage `{}` (rank {own}) may not refer to stage `{stage}` \
                     (rank {theirs})",
                    file.module[0]
                ));
            }
            // Cycle graph: not the root, not the file itself, not a facade re-export.
            let facade =
                r.reexport && target.len() > file.module.len() && target.starts_with(&file.module);
            if target.is_empty() || target == file.module || facade {
                continue;
            }
            if let Some(&to) = file_of.get(&target).and_then(|rel| index.get(rel)) {
                edges.entry((k, to)).or_default().push(where_);
            }
        }
    }

    // Cycles: strongly connected components of more than one file.
    let mut graph = vec![Vec::new(); files.len()];
    for &(from, to) in edges.keys() {
        graph[from].push(to);
    }
    for component in tarjan(&graph) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<usize> = component.iter().copied().collect();
        // A shortest cycle through each file of the component, each listed once (rotated to
        // start at its first file), so that every file's part in it shows.
        let mut cycles = BTreeSet::new();
        for &member in &members {
            let mut cycle = shortest_cycle(&graph, &members, member);
            let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
            cycle.rotate_left(first);
            cycles.insert(cycle);
        }
        for cycle in cycles {
            let mut message = String::new();
            let names: Vec<&str> = cycle.iter().map(|&n| files[n].rel.as_str()).collect();
            write!(
                message,
                "import cycle: {} -> {}",
                names.join(" -> "),
                names[0]
            )
            .unwrap();
            for (k, &from) in cycle.iter().enumerate() {
                let to = cycle[(k + 1) % cycle.len()];
                for where_ in &edges[&(from, to)] {
                    write!(message, "\n    {where_}").unwrap();
                }
            }
            if members.len() > cycle.len() {
                let all: Vec<&str> = members.iter().map(|&n| files[n].rel.as_str()).collect();
                write!(
                    message,
                    "\n    (one of the cycles among {})",
                    all.join(", ")
                )
                .unwrap();
            }
            findings.cycles.push(message);
        }
    }
    findings
}

/// Tarjan's strongly connected components.
fn tarjan(graph: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'g> {
        graph: &'g [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for k in 0..s.graph[v].len() {
            let w = s.graph[v][k];
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.components.push(component);
        }
    }
    let n = graph.len();
    let mut s = State {
        graph,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.components
}

/// A shortest cycle through `start` within `members`, as its nodes in order.
fn shortest_cycle(graph: &[Vec<usize>], members: &BTreeSet<usize>, start: usize) -> Vec<usize> {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &graph[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut cycle = vec![v];
                let mut at = v;
                while at != start {
                    at = parent[&at];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    members.iter().copied().collect()
}

// ---------------------------------------------------------------------------------------------
// The crate's own sources.

fn source_files() -> Vec<SourceFile> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<SourceFile>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under the crate");
                let rel = rel.to_string_lossy().replace('\\', "/");
                let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
                out.push(SourceFile::new(&rel, &text));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root.join("src"), root, &mut files);
    assert!(
        files.iter().any(SourceFile::is_root),
        "src/lib.rs not found under {}",
        root.display()
    );
    files
}

#[test]
fn every_module_of_src_has_a_stage() {
    let findings = check(&source_files());
    assert!(
        findings.unknown.is_empty(),
        "\n{}\n",
        findings.unknown.join("\n")
    );
}

#[test]
fn src_imports_follow_the_pipeline() {
    let findings = check(&source_files());
    assert!(
        findings.layering.is_empty(),
        "{} reference(s) against the pipeline (record 0 < capture 1 < trace 2 < decode 3 < \
         report 4 < table, export 5 < session 6):\n{}\n",
        findings.layering.len(),
        findings.layering.join("\n")
    );
}

#[test]
fn src_has_no_import_cycle() {
    let findings = check(&source_files());
    assert!(
        findings.cycles.is_empty(),
        "{} import cycle(s) between files of src/:\n{}\n",
        findings.cycles.len(),
        findings.cycles.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The checker on synthetic sources.

fn check_sources(sources: &[(&str, &str)]) -> Findings {
    let files: Vec<SourceFile> = sources
        .iter()
        .map(|(rel, text)| SourceFile::new(rel, text))
        .collect();
    check(&files)
}

const ROOT: (&str, &str) = (
    "src/lib.rs",
    "mod record;\nmod trace;\npub use record::Guard;\n",
);

#[test]
fn checker_catches_a_record_file_importing_trace() {
    let findings = check_sources(&[
        ROOT,
        ("src/record/mod.rs", "pub mod scope;\n"),
        (
            "src/record/scope.rs",
            "use std::fmt;\n\nuse crate::trace::Value;\n",
        ),
        ("src/trace/mod.rs", "pub struct Value;\n"),
    ]);
    assert_eq!(findings.layering.len(), 1, "{findings:#?}");
    let message = &findings.layering[0];
    assert!(
        message.starts_with("src/record/scope.rs:3: `crate::trace::Value`"),
        "{message}"
    );
    assert!(
        message.contains("`record` (rank 0)") && message.contains("`trace` (rank 2)"),
        "{message}"
    );
    assert!(
        findings.cycles.is_empty() && findings.unknown.is_empty(),
        "{findings:#?}"
    );
}

#[test]
fn checker_catches_use_groups_super_paths_and_reexports() {
    let findings = check_sources(&[
        (
            "src/lib.rs",
            "mod record;\nmod session;\nmod trace;\npub use session::Profiler;\n",
        ),
        ("src/record/mod.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        (
            "src/record/a.rs",
            "use crate::{record::b::X, trace::{self, Span}};\n",
        ),
        (
            "src/record/b.rs",
            "pub struct X;\nfn f() { let _ = super::super::trace::Span::new(); }\n",
        ),
        ("src/record/c.rs", "fn f(p: &crate::Profiler) {}\n"),
        ("src/trace/mod.rs", "pub struct Span;\n"),
        (
            "src/session.rs",
            "pub struct Profiler;\nuse crate::trace::Span;\n",
        ),
    ]);
    let got: Vec<&str> = findings
        .layering
        .iter()
        .map(|m| m.split(" (").next().unwrap())
        .collect();
    let got: Vec<&str> = got
        .iter()
        .map(|m| m.split(": stage").next().unwrap())
        .collect();
    assert_eq!(
        got,
        [
            "src/record/a.rs:1: `crate::trace`",
            "src/record/a.rs:1: `crate::trace::Span`",
            "src/record/b.rs:2: `super::super::trace::Span::new`",
            "src/record/c.rs:1: `crate::Profiler`",
        ],
        "{findings:#?}"
    );
    assert!(findings.layering[3].contains("re-export of `crate::session::Profiler`"));
}

#[test]
fn checker_catches_an_inline_path() {
    let findings = check_sources(&[
        ROOT,
        ("src/record/mod.rs", "pub struct Guard;\n"),
        (
            "src/trace/mod.rs",
            concat!(
                "fn f() {\n",
                "    let x = 1;\n",
                "    crate::session::Registry::enter(x);\n",
                "}\n",
                "macro_rules! m { () => { $crate::session::Registry::new() }; }\n",
                "pub(in crate::trace) fn g() -> crate::record::Guard { todo!() }\n",
            ),
        ),
        ("src/session.rs", "pub struct Registry;\n"),
    ]);
    let got: Vec<&str> = findings
        .layering
        .iter()
        .map(|m| m.split(": stage").next().unwrap())
        .collect();
    assert_eq!(
        got,
        [
            "src/trace/mod.rs:3: `crate::session::Registry::enter`",
            "src/trace/mod.rs:5: `crate::session::Registry::new`",
        ],
        "{findings:#?}"
    );
}

#[test]
fn checker_ignores_comments_doc_links_and_strings() {
    let findings = check_sources(&[
        ROOT,
        (
            "src/record/mod.rs",
            concat!(
                "//! Feeds [`Trace`](crate::trace::Trace).\n",
                "/// See [`Value`](crate::trace::Value) and crate::session::Profiler.\n",
                "pub struct Guard; // use crate::trace::Value;\n",
                "/* crate::trace::Value /* nested crate::trace::X */ crate::trace::Y */\n",
                "#[doc = \"crate::trace::Value\"]\n",
                "const S: &str = r#\"crate::trace::\"Value\"#;\n",
                "const C: char = '\"'; const D: &str = \"crate::trace::Value\";\n",
                "fn f<'a>(x: &'a str) -> &'a str { x }\n",
                "pub(crate) fn g() {}\n",
            ),
        ),
        ("src/trace/mod.rs", "pub struct Trace;\npub struct Value;\n"),
    ]);
    assert!(
        findings.layering.is_empty() && findings.cycles.is_empty(),
        "{findings:#?}"
    );
    // The same file with the path in code is caught, on the right line.
    let findings = check_sources(&[
        ROOT,
        (
            "src/record/mod.rs",
            "/// [`Trace`](crate::trace::Trace)\nconst C: char = '\"';\nfn f() -> crate::trace::Trace { todo!() }\n",
        ),
        ("src/trace/mod.rs", "pub struct Trace;\n"),
    ]);
    assert_eq!(findings.layering.len(), 1, "{findings:#?}");
    assert!(findings.layering[0].starts_with("src/record/mod.rs:3: `crate::trace::Trace`"));
}

#[test]
fn checker_catches_a_cycle() {
    let findings = check_sources(&[
        ROOT,
        (
            "src/record/mod.rs",
            "pub mod a;\npub mod b;\npub use self::a::Guard;\n",
        ),
        ("src/record/a.rs", "use super::b::B;\npub struct Guard;\n"),
        (
            "src/record/b.rs",
            "pub struct B;\nfn f() { crate::record::a::Guard; }\n",
        ),
        ("src/trace/mod.rs", ""),
    ]);
    assert!(findings.layering.is_empty(), "{findings:#?}");
    assert_eq!(
        findings.cycles,
        [concat!(
            "import cycle: src/record/a.rs -> src/record/b.rs -> src/record/a.rs\n",
            "    src/record/a.rs:1: `super::b::B`\n",
            "    src/record/b.rs:2: `crate::record::a::Guard`",
        )],
        "{findings:#?}"
    );
}

#[test]
fn checker_does_not_count_mod_declarations_facades_or_tests_as_cycles() {
    let findings = check_sources(&[
        ROOT,
        (
            "src/record/mod.rs",
            "mod a;\npub use a::Guard;\npub(crate) use self::a::helper;\nfn shared() {}\n",
        ),
        (
            "src/record/a.rs",
            "use super::shared;\npub struct Guard;\npub fn helper() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::shared;\n}\n",
        ),
        ("src/trace/mod.rs", ""),
    ]);
    assert!(findings.cycles.is_empty(), "{findings:#?}");
    // A private import of the child from the parent is an edge: now it is a cycle.
    let findings = check_sources(&[
        ROOT,
        (
            "src/record/mod.rs",
            "mod a;\nuse a::Guard;\npub fn shared() {}\n",
        ),
        ("src/record/a.rs", "use super::shared;\npub struct Guard;\n"),
        ("src/trace/mod.rs", ""),
    ]);
    assert_eq!(findings.cycles.len(), 1, "{findings:#?}");
    assert!(
        findings.cycles[0].contains("src/record/mod.rs:2: `a::Guard`"),
        "{findings:#?}"
    );
}

#[test]
fn checker_flags_an_unknown_top_level_module() {
    let findings = check_sources(&[
        ROOT,
        ("src/record/mod.rs", "pub struct Guard;\n"),
        ("src/trace/mod.rs", ""),
        ("src/foo/mod.rs", "mod bar;\n"),
        ("src/foo/bar.rs", ""),
        ("src/baz.rs", ""),
    ]);
    assert_eq!(findings.unknown.len(), 2, "{findings:#?}");
    assert!(findings.unknown[0].starts_with("src/foo/mod.rs: top-level module `foo`"));
    assert!(findings.unknown[0].contains("add it to the rank table STAGES"));
    assert!(findings.unknown[1].starts_with("src/baz.rs: top-level module `baz`"));
}
