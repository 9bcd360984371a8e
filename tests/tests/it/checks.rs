//! The code layout's own rules, checked on every run: no Rust source over 800 lines, no
//! `Result<_, String>` in the shared crates (errors are types: `core::Invalid`, the
//! crates' own enums), no circle among a shared crate's modules, no use-case type over 20
//! methods, and a README of at most 12 KB.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output and local tooling.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".local" | ".git" | "node_modules") {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn all_sources(under: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in under {
        sources(&root().join(d), &mut out);
    }
    out.sort();
    out
}

/// The type arguments of each `Result<...>` in `text` whose error is a plain `String`.
fn string_errors(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("Result<") {
        let rest = &text[at + "Result<".len()..];
        let (mut depth, mut args, mut cur) = (1, Vec::new(), String::new());
        for c in rest.chars() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                args.push(cur.trim().to_owned());
                break;
            }
            if c == ',' && depth == 1 {
                args.push(std::mem::take(&mut cur).trim().to_owned());
            } else {
                cur.push(c);
            }
        }
        if args.len() == 2 && args[1] == "String" {
            found.push(format!("Result<{}, String>", args[0]));
        }
    }
    found
}

#[test]
fn no_rust_source_is_over_800_lines() {
    let long: Vec<String> = all_sources(&["shared", "functions", "infra", "tests"])
        .into_iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p).unwrap().lines().count();
            (n > 800).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these: {long:#?}");
}

/// The tooling is split by job (`infra/stack` the local stack and its checks, `infra/bench`
/// the benchmarks, `infra/local` the runner): none of its crates grows back into one.
#[test]
fn no_tooling_crate_is_over_11000_lines() {
    let mut big = Vec::new();
    for entry in std::fs::read_dir(root().join("infra")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("Cargo.toml").exists() {
            continue;
        }
        let mut files = Vec::new();
        sources(&dir, &mut files);
        let n: usize = files
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
            .sum();
        if n > 11_000 {
            big.push(format!("{} ({n} lines)", dir.display()));
        }
    }
    assert!(big.is_empty(), "split these by job: {big:#?}");
}

/// Every update expression of the DynamoDB backend comes from the one builder
/// (`shared/store/src/dynamo/expr.rs`), which names each attribute and binds each value: none
/// is spelled by hand beside it.
#[test]
fn every_update_expression_comes_from_the_builder() {
    let found: Vec<String> = all_sources(&["shared/store/src"])
        .into_iter()
        .filter(|p| !p.ends_with("dynamo/expr.rs"))
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains(".update_expression("))
                .map(|(i, _)| format!("{}:{}", p.display(), i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "update expressions spelled by hand: {found:?}"
    );
}

#[test]
fn the_shared_crates_return_no_string_errors() {
    let mut found = Vec::new();
    for p in all_sources(&["shared"]) {
        if !p.components().any(|c| c.as_os_str() == "src") {
            continue;
        }
        for e in string_errors(&std::fs::read_to_string(&p).unwrap()) {
            found.push(format!("{}: {e}", p.display()));
        }
    }
    assert!(found.is_empty(), "use an error type: {found:#?}");
    assert_eq!(
        string_errors("fn a() -> Result<Vec<u8>, String>; fn b() -> Result<(i64, i64), Invalid>;"),
        vec!["Result<Vec<u8>, String>"],
        "the check sees what it looks for"
    );
}

#[test]
fn the_readme_is_at_most_12_kb() {
    let n = std::fs::metadata(root().join("README.md")).unwrap().len();
    assert!(n <= 12 * 1024, "README.md is {n} bytes");
}

/// The crate's modules `text` names through `crate::` (`crate::a::b`, `crate::{a, b::c}`),
/// comments left out.
fn crate_modules(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let rest = &code[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or_default();
                found.extend(group.split(',').map(ident));
            } else {
                found.insert(ident(rest));
            }
        }
    }
    found.retain(|m| !m.is_empty() && m != "self");
    found
}

/// A circle in `edges` (module -> the modules it names), as its path, if there is one.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for n in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_shared_crate_has_a_circle_among_its_modules() {
    let mut circles = Vec::new();
    for e in std::fs::read_dir(root().join("shared")).unwrap() {
        let src = e.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(&src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let top = top.trim_end_matches(".rs").to_owned();
            if matches!(top.as_str(), "lib" | "main") {
                continue;
            }
            let named = crate_modules(&std::fs::read_to_string(&f).unwrap());
            let to = edges.entry(top.clone()).or_default();
            to.extend(named.into_iter().filter(|m| *m != top));
        }
        if let Some(c) = circle(&edges) {
            circles.push(format!("{}: {}", src.display(), c.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "modules in a circle: {circles:#?}");
    assert_eq!(
        crate_modules(
            "use crate::{flow::CallEnd, metrics};\n// crate::sweep\nx = $crate::a; crate::outcome::Report"
        ),
        ["flow", "metrics", "outcome"].map(String::from).into(),
        "the check reads what a module names"
    );
    let edges: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .map(|(a, b)| (a.to_owned(), BTreeSet::from([b.to_owned()])))
        .into();
    assert_eq!(circle(&edges).unwrap().len(), 4, "and sees a circle");
}

/// The methods of each type of the use-case crate, over all its `impl` blocks (trait impls
/// left out: their methods are the trait's).
fn methods_per_type() -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for path in all_sources(&["shared/pipeline/src"]) {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("impl") {
                let head = rest.trim_start_matches(|c| c != ' ').trim();
                current = (!head.contains(" for "))
                    .then(|| head.split(['<', ' ', '{']).next().unwrap_or("").to_owned())
                    .filter(|t| !t.is_empty());
            } else if line == "}" {
                current = None;
            } else if let Some(t) = &current {
                let l = line.trim_start_matches("    ");
                let l = l.strip_prefix("pub ").unwrap_or(l);
                let l = ["pub(crate) ", "pub(super) "]
                    .iter()
                    .fold(l, |l, p| l.strip_prefix(p).unwrap_or(l));
                let l = l.strip_prefix("async ").unwrap_or(l);
                if line.starts_with("    ") && !line.starts_with("     ") && l.starts_with("fn ") {
                    *counts.entry(t.clone()).or_insert(0) += 1;
                }
            }
        }
    }
    counts
}

#[test]
fn no_use_case_type_has_over_20_methods() {
    let counts = methods_per_type();
    assert!(
        counts.get("FlowControl").is_some_and(|n| *n > 5) && counts.len() > 20,
        "the count reads the crate: {counts:?}"
    );
    // The composition root builds the use cases and hands them out; it is none itself.
    let over: Vec<_> = counts
        .iter()
        .filter(|(t, n)| **n > 20 && t.as_str() != "Pipeline")
        .collect();
    assert!(over.is_empty(), "split these: {over:?}");
}
