//! The TypeScript and Python clients (`shared/clients`): what is committed is what
//! `docs/openapi.json` generates (`converger-local clients` regenerates both), and each drives
//! a stack through the calls an integration makes (its `examples/exercise`), its receiver
//! verifying every webhook's signature.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use converger_local::clients;
use converger_tests::TestStack;
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// A new directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let p = std::env::temp_dir().join(format!(
            "converger-clients-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file under `dir`, by its path below it, with its bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "__pycache__") {
                    todo.push(p);
                }
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

#[tokio::test]
async fn the_committed_clients_are_what_the_document_generates() {
    let tmp = TempDir::new();
    let (ts, py) = (tmp.path().join("schema.d.ts"), tmp.path().join("py"));
    clients::generate(&ts, &py).await.unwrap();
    let stale = "run `cargo run -p converger-local -- clients` and commit shared/clients";
    assert!(
        std::fs::read(&ts).unwrap()
            == std::fs::read(clients::typescript_dir().join("src/schema.d.ts")).unwrap(),
        "the TypeScript client is not docs/openapi.json's: {stale}"
    );
    let committed = files(&clients::python_dir().join("converger_client"));
    let fresh = files(&py);
    let differ: Vec<_> = fresh
        .keys()
        .chain(committed.keys())
        .filter(|k| fresh.get(*k) != committed.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "the Python client is not docs/openapi.json's ({differ:?}): {stale}"
    );
}

async fn exercise(mut cmd: Command, t: &TestStack, key: &str) {
    let out = cmd
        .env("CONVERGER_API_URL", &t.stack.api_url)
        .env("CONVERGER_API_KEY", key)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "ok: every webhook's signature verifies",
        "ok: an altered webhook does not verify",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
}

#[tokio::test]
async fn the_typescript_client_drives_a_stack() {
    let dir = clients::ensure_node_tools().await.unwrap();
    let built = TempDir::new();
    let status = Command::new(dir.join("node_modules/.bin/tsc"))
        .args(["-p", "."])
        .arg("--outDir")
        .arg(built.path())
        .current_dir(&dir)
        .status()
        .await
        .unwrap();
    assert!(status.success(), "tsc: {status}");
    // The compiled example resolves `openapi-fetch` from the client's own packages.
    std::os::unix::fs::symlink(dir.join("node_modules"), built.path().join("node_modules"))
        .unwrap();
    std::fs::write(built.path().join("package.json"), r#"{"type": "module"}"#).unwrap();
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let mut node = Command::new("node");
    node.arg(built.path().join("examples/exercise.js"));
    exercise(node, &t, &key).await;
}

#[tokio::test]
async fn the_python_client_drives_a_stack() {
    clients::ensure_python_tools().await.unwrap();
    let t = TestStack::start().await;
    let (_, key) = t.tenant("default").await;
    let mut python = Command::new(converger_local::emulator::venv_bin("python"));
    python
        .arg(clients::python_dir().join("examples/exercise.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    exercise(python, &t, &key).await;
}
