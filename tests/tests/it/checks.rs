//! The code layout's own rules, checked on every run: no Rust source over 800 lines, no
//! `Result<_, String>` in the shared crates (errors are types: `core::Invalid`, the
//! crates' own enums), and a README of at most 12 KB.

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
