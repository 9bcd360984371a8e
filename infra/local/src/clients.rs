//! The TypeScript and Python clients (`shared/clients`), generated from `docs/openapi.json`:
//! their tools set up on first use (the npm packages of `shared/clients/typescript`'s lock
//! file, and `infra/local/requirements-clients.txt` in the project virtualenv), and the one
//! command that regenerates both (`converger-local clients`).

use crate::emulator::{self, DirLock, on_path, root, run, venv_bin};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::process::Command;

pub const USAGE: &str = "converger-local clients   regenerate shared/clients (TypeScript and Python) from docs/openapi.json";

/// The TypeScript client's directory.
pub fn typescript_dir() -> PathBuf {
    root().join("shared/clients/typescript")
}

/// The Python client's directory (the generated package is `converger_client` in it).
pub fn python_dir() -> PathBuf {
    root().join("shared/clients/python")
}

/// Node.js and npm (Debian's packages, installed when missing) and the TypeScript client's
/// npm packages as its lock file pins them, installed once per version of the lock file.
pub async fn ensure_node_tools() -> Result<PathBuf, String> {
    let dir = typescript_dir();
    if !on_path("node") || !on_path("npm") {
        emulator::apt_install(&["nodejs", "npm"], "the TypeScript client").await?;
    }
    let lock = std::fs::read(dir.join("package-lock.json"))
        .map_err(|e| format!("shared/clients/typescript/package-lock.json: {e}"))?;
    let want = hex::encode(Sha256::digest(&lock));
    let marker = dir.join("node_modules/.converger-lock");
    let installed = || std::fs::read_to_string(&marker).is_ok_and(|h| h.trim() == want);
    if installed() {
        return Ok(dir);
    }
    std::fs::create_dir_all(root().join(".local")).map_err(|e| e.to_string())?;
    let _lock = DirLock::take(root().join(".local/npm.lock")).await?;
    if installed() {
        return Ok(dir);
    }
    eprintln!("converger: installing the TypeScript client's packages (npm ci)");
    run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir),
        "npm ci (shared/clients/typescript)",
    )
    .await?;
    std::fs::write(&marker, want).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// The Python client's generator and the generated client's imports, in the project
/// virtualenv.
pub async fn ensure_python_tools() -> Result<PathBuf, String> {
    emulator::ensure_requirements("clients").await
}

/// Generates both clients from `docs/openapi.json`: the TypeScript types into `ts_file`, the
/// Python package into `py_dir` (replaced).
pub async fn generate(ts_file: &Path, py_dir: &Path) -> Result<(), String> {
    let (ts, _) = tokio::try_join!(ensure_node_tools(), ensure_python_tools())?;
    let doc = root().join("docs/openapi.json");
    run(
        Command::new(ts.join("node_modules/.bin/openapi-typescript"))
            .arg(&doc)
            .arg("--empty-objects-unknown")
            .arg("-o")
            .arg(ts_file)
            .current_dir(&ts),
        "openapi-typescript",
    )
    .await?;
    if py_dir.exists() {
        std::fs::remove_dir_all(py_dir).map_err(|e| format!("{}: {e}", py_dir.display()))?;
    }
    run(
        Command::new(venv_bin("openapi-python-client"))
            .args(["generate", "--meta", "none", "--path"])
            .arg(&doc)
            .arg("--output-path")
            .arg(py_dir)
            .current_dir(root()),
        "openapi-python-client generate",
    )
    .await
}

/// `converger-local clients`: both clients generated again in place.
pub async fn run_command(_args: &[String]) -> Result<(), String> {
    generate(
        &typescript_dir().join("src/schema.d.ts"),
        &python_dir().join("converger_client"),
    )
    .await?;
    eprintln!("converger: shared/clients regenerated from docs/openapi.json");
    Ok(())
}
