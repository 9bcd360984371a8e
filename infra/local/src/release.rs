//! `release-check`: the build a user runs before `sam deploy`, run and checked. `sam build`
//! (the SAM CLI and cargo-lambda of the project's virtualenv, the template's
//! `BuildMethod: rust-cargolambda`) with the `Architecture` the deployment gives, then every
//! function's `bootstrap` read for the machine it was built for: a binary of the other
//! architecture fails every invocation at start (`Runtime.InvalidEntrypoint`), and no emulator
//! runs it.

use crate::emulator;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

pub const USAGE: &str = "converger-local release-check [--architecture x86_64|arm64] \
    [--function <LogicalId>]   sam build as a deployment runs it (every function, or one), \
    each bootstrap's architecture checked";

/// The machine an ELF executable is built for, as Lambda names it (`x86_64`, `arm64`).
pub fn elf_architecture(bytes: &[u8]) -> Result<&'static str, String> {
    if bytes.len() < 20 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF executable".into());
    }
    // e_machine: two bytes at offset 18, in the file's byte order (byte 5: 1 little, 2 big).
    let machine = if bytes[5] == 2 {
        u16::from_be_bytes([bytes[18], bytes[19]])
    } else {
        u16::from_le_bytes([bytes[18], bytes[19]])
    };
    match machine {
        0x3e => Ok("x86_64"),
        0xb7 => Ok("arm64"),
        other => Err(format!("an ELF executable for machine {other:#x}")),
    }
}

/// Each function's built `bootstrap` under `build_dir` (SAM's `.aws-sam/build` layout: a
/// directory per function's logical id), and the architecture it is for.
pub fn built_architectures(
    build_dir: &Path,
    functions: &[String],
) -> Result<Vec<(String, &'static str, u64)>, String> {
    let mut out = Vec::new();
    for f in functions {
        let path = build_dir.join(f).join("bootstrap");
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let arch = elf_architecture(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push((f.clone(), arch, bytes.len() as u64));
    }
    Ok(out)
}

pub async fn run(args: &[String]) -> Result<(), String> {
    let mut arch = "x86_64".to_owned();
    let mut only = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match (a.as_str(), rest.next()) {
            ("--architecture", Some(v)) if v == "x86_64" || v == "arm64" => arch.clone_from(v),
            ("--function", Some(v)) => only = Some(v.clone()),
            _ => return Err(format!("usage: {USAGE}")),
        }
    }
    let root = emulator::root();
    emulator::ensure_venv().await?;
    emulator::ensure_lambda_tools().await?;
    let mut functions: Vec<String> = crate::cfn::declared_functions()?.into_keys().collect();
    if let Some(f) = &only {
        if !functions.contains(f) {
            return Err(format!("no function {f} in the template ({functions:?})"));
        }
        functions = vec![f.clone()];
    }
    let build_dir = emulator::target_dir().join("sam-build").join(&arch);
    let path = format!(
        "{}:{}",
        emulator::venv_dir().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let st = tokio::process::Command::new(emulator::venv_bin("sam"))
        .arg("build")
        // The one function first: `--parameter-overrides` takes every word after it.
        .args(only.iter())
        .args(["-t", "infra/template.yaml", "--build-dir"])
        .arg(&build_dir)
        .args(["--parameter-overrides", &format!("Architecture={arch}")])
        .env("PATH", path)
        .env("SAM_CLI_TELEMETRY", "0")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .current_dir(&root)
        .status()
        .await
        .map_err(|e| format!("sam build: {e}"))?;
    let took = started.elapsed();
    if !st.success() {
        return Err(format!(
            "sam build --parameter-overrides Architecture={arch} failed ({st})"
        ));
    }
    let built = built_architectures(&build_dir, &functions)?;
    let wrong: Vec<String> = built
        .iter()
        .filter(|(_, a, _)| *a != arch)
        .map(|(f, a, _)| format!("{f} is built for {a}"))
        .collect();
    let figures = json!({
        "architecture": arch,
        "sam_build_s": (took.as_secs_f64() * 10.0).round() / 10.0,
        "command": format!("sam build --parameter-overrides Architecture={arch}{}", only.as_deref().map(|f| format!(" {f}")).unwrap_or_default()),
        "functions": built.iter().map(|(f, a, size)| (f.clone(), json!({"architecture": a, "bytes": size}))).collect::<serde_json::Map<String, Value>>(),
    });
    println!("{figures}");
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the template deploys {arch}, but {}",
            wrong.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn header(class_le: bool, machine: u16) -> Vec<u8> {
        let mut h = vec![0x7f, b'E', b'L', b'F', 2, if class_le { 1 } else { 2 }];
        h.resize(18, 0);
        if class_le {
            h.extend_from_slice(&machine.to_le_bytes());
        } else {
            h.extend_from_slice(&machine.to_be_bytes());
        }
        h.resize(64, 0);
        h
    }

    #[test]
    fn an_elf_header_names_its_machine() {
        assert_eq!(elf_architecture(&header(true, 0x3e)).unwrap(), "x86_64");
        assert_eq!(elf_architecture(&header(true, 0xb7)).unwrap(), "arm64");
        assert!(elf_architecture(&header(true, 0x28)).is_err());
        assert!(elf_architecture(b"#!/bin/sh\n echo not a binary").is_err());
    }

    /// This test's own executable is one the machine runs: read as Lambda would read a
    /// bootstrap, it is of the machine's architecture.
    #[test]
    fn this_test_binary_is_of_the_machines_architecture() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let want = if cfg!(target_arch = "aarch64") {
            "arm64"
        } else {
            "x86_64"
        };
        assert_eq!(elf_architecture(&me).unwrap(), want);
    }

    /// `sam build` resolves `Architectures: [!Ref Architecture]` with the build's own
    /// parameters, and falls back to x86_64 without them: the example configuration gives the
    /// parameters to every command (`[default.global.parameters]`), not to `sam deploy` only,
    /// so that an arm64 deployment is built for arm64.
    #[test]
    fn the_example_samconfig_gives_the_build_its_architecture() {
        let text =
            std::fs::read_to_string(emulator::root().join("infra/samconfig.example.toml")).unwrap();
        // The section each line is in (`[default.global.parameters]`, ...).
        let mut section = String::new();
        let mut overrides_in = Vec::new();
        let mut architecture_in = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.to_owned();
            } else if line.starts_with("parameter_overrides") {
                overrides_in.push(section.clone());
            } else if line.starts_with("\"Architecture=") {
                architecture_in.push(section.clone());
            }
        }
        assert_eq!(overrides_in, ["[default.global.parameters]"], "{text}");
        assert_eq!(architecture_in, ["[default.global.parameters]"], "{text}");
    }
}
