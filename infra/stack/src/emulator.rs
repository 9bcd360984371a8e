//! The local AWS emulator: moto's server, run from a project-local virtualenv that this
//! module creates (and keeps in step with `infra/local/requirements.txt`) on first use.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// The workspace root: `CONVERGER_ROOT`, else where this crate was built from.
pub fn root() -> PathBuf {
    std::env::var_os("CONVERGER_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// Cargo's target directory (`CARGO_TARGET_DIR`, else `target/` under the root).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Where a program of that name is on `PATH`, if it is.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether a program of that name is on `PATH`.
pub fn on_path(name: &str) -> bool {
    find_on_path(name).is_some()
}

/// Installs Debian's `packages` (for `purpose`, named in the error when the machine has no
/// `apt-get`): the package lists fetched once per process, installs one at a time.
pub async fn apt_install(packages: &[&str], purpose: &str) -> Result<(), String> {
    static UPDATED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    if !on_path("apt-get") {
        return Err(format!(
            "{purpose} needs {}: install them",
            packages.join(" and ")
        ));
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    UPDATED
        .get_or_try_init(|| async {
            run(
                Command::new("apt-get").args(["update", "-qq"]),
                "apt-get update",
            )
            .await
        })
        .await?;
    run(
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        &format!("apt-get install {} ({purpose})", packages.join(" ")),
    )
    .await
}

pub fn venv_dir() -> PathBuf {
    root().join(".local/venv")
}

pub fn venv_bin(name: &str) -> PathBuf {
    venv_dir().join("bin").join(name)
}

fn requirements() -> PathBuf {
    root().join("infra/local/requirements.txt")
}

pub async fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("{what}: could not start: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A lock held by creating a directory, so that parallel test processes set the virtualenv
/// up once.
pub struct DirLock(PathBuf);

impl DirLock {
    pub async fn take(path: PathBuf) -> Result<Self, String> {
        let start = Instant::now();
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // A lock older than 15 minutes was left by a killed process.
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > Duration::from_secs(900));
                    if stale {
                        let _ = std::fs::remove_dir(&path);
                    } else if start.elapsed() > Duration::from_secs(900) {
                        return Err(format!("timed out waiting for {}", path.display()));
                    } else {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Creates the virtualenv and installs the pinned requirements, unless they are installed
/// already. Returns the virtualenv's directory.
pub async fn ensure_venv() -> Result<PathBuf, String> {
    let venv = venv_dir();
    let reqs =
        std::fs::read(requirements()).map_err(|e| format!("{}: {e}", requirements().display()))?;
    let want = hex::encode(Sha256::digest(&reqs));
    let marker = venv.join(".converger-requirements");
    if std::fs::read_to_string(&marker).is_ok_and(|h| h.trim() == want) {
        return Ok(venv);
    }
    std::fs::create_dir_all(root().join(".local")).map_err(|e| e.to_string())?;
    let _lock = DirLock::take(root().join(".local/venv.lock")).await?;
    if std::fs::read_to_string(&marker).is_ok_and(|h| h.trim() == want) {
        return Ok(venv);
    }
    if !venv_bin("python").exists() {
        eprintln!("converger: creating the virtualenv in {}", venv.display());
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(
            Command::new(&python).arg("-m").arg("venv").arg(&venv),
            "python3 -m venv",
        )
        .await?;
    }
    pip_install(&requirements()).await?;
    std::fs::write(&marker, want).map_err(|e| e.to_string())?;
    Ok(venv)
}

/// cargo-lambda (and the zig it links with), pinned in `infra/local/requirements-lambda.txt`,
/// installed into the project virtualenv on first use (the `binaries` benchmark builds with it).
pub async fn ensure_lambda_tools() -> Result<PathBuf, String> {
    ensure_requirements("lambda").await
}

/// schemathesis, pinned in `infra/local/requirements-fuzz.txt`, installed into the project
/// virtualenv on first use (the test command's API fuzzing).
pub async fn ensure_fuzz_tools() -> Result<PathBuf, String> {
    ensure_requirements("fuzz").await
}

/// `infra/local/requirements-<name>.txt` installed into the project virtualenv, once per
/// version of that file.
pub async fn ensure_requirements(name: &str) -> Result<PathBuf, String> {
    let venv = ensure_venv().await?;
    let file = root().join(format!("infra/local/requirements-{name}.txt"));
    let reqs = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let want = hex::encode(Sha256::digest(&reqs));
    let marker = venv.join(format!(".converger-{name}-requirements"));
    let installed = || std::fs::read_to_string(&marker).is_ok_and(|h| h.trim() == want);
    if installed() {
        return Ok(venv);
    }
    let _lock = DirLock::take(root().join(".local/venv.lock")).await?;
    if installed() {
        return Ok(venv);
    }
    pip_install(&file).await?;
    std::fs::write(&marker, want).map_err(|e| e.to_string())?;
    Ok(venv)
}

/// `pip install -r file` into the project virtualenv.
async fn pip_install(file: &std::path::Path) -> Result<(), String> {
    eprintln!("converger: installing {}", file.display());
    run(
        Command::new(venv_bin("python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(file),
        "pip install",
    )
    .await
}

/// A free TCP port on loopback.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// A free port below the system's ephemeral range, for a server that must come back on the
/// same port after a restart: a port from the ephemeral range may be taken meanwhile by any
/// outgoing connection of the machine (a test's broker once could not listen again).
pub fn free_port_to_keep() -> Result<u16, String> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| {
            r.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let (from, to) = (10_000u16, low.max(10_001));
    for _ in 0..200 {
        let port = from + rand::random::<u16>() % (to - from);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    free_port()
}

/// The emulator at `endpoint`, else the one `AWS_ENDPOINT_URL` names, else one started here
/// (returned, so that the caller keeps it running as long as it needs it), and its endpoint.
pub async fn named_or_started(
    endpoint: Option<&str>,
) -> Result<(Option<Emulator>, String), String> {
    let named = endpoint
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    match named {
        Some(ep) if !ep.is_empty() => Ok((None, ep)),
        _ => {
            let em = Emulator::start().await?;
            let ep = em.endpoint.clone();
            Ok((Some(em), ep))
        }
    }
}

/// A running moto server, stopped when dropped.
pub struct Emulator {
    pub endpoint: String,
    child: Child,
}

impl Emulator {
    /// Starts moto's server on a loopback port the system picks (the server reports it once
    /// bound: a port picked here beforehand could be taken by another process meanwhile).
    pub async fn start() -> Result<Self, String> {
        use tokio::io::AsyncBufReadExt;
        ensure_venv().await?;
        // moto's server with DynamoDB's isolation (see `infra/local/emulator.py`).
        let mut child = Command::new(venv_bin("python"))
            .arg(root().join("infra/local/emulator.py"))
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("emulator: {e}"))?;
        let stdout = child.stdout.take().ok_or("emulator: no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .map_err(|_| "the emulator did not start within 60 s".to_string())?
            .map_err(|e| format!("emulator: {e}"))?;
        let port: u16 = match first.as_deref().and_then(|l| l.strip_prefix("PORT ")) {
            Some(p) => p
                .trim()
                .parse()
                .map_err(|e| format!("the emulator's port {p:?}: {e}"))?,
            None => {
                let status = child.try_wait().ok().flatten();
                return Err(format!(
                    "the emulator did not say its port (said {first:?}; exit status {status:?})"
                ));
            }
        };
        // Whatever else it prints is read and dropped, so that a full pipe never blocks it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        })
    }

    /// The server's process id (its CPU time is read from `/proc` by the benchmarks).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The SDK configuration of another account of the emulator (a tenant's), in `region`: the
/// emulator files the requests of an assumed role's session under the role's account, so
/// what is made with it is apart from the stack's own account.
pub async fn account_config(
    platform: &aws_config::SdkConfig,
    account: &str,
    region: &str,
) -> Result<aws_config::SdkConfig, String> {
    let c = aws_sdk_sts::Client::new(platform)
        .assume_role()
        .role_arn(format!("arn:aws:iam::{account}:role/tenant-admin"))
        .role_session_name("tenant-setup")
        .send()
        .await
        .map_err(|e| format!("account {account}: {e}"))?
        .credentials
        .ok_or_else(|| format!("account {account}: no credentials"))?;
    let creds = aws_sdk_sts::config::Credentials::new(
        c.access_key_id,
        c.secret_access_key,
        Some(c.session_token),
        None,
        "tenant",
    );
    Ok(platform
        .to_builder()
        .region(aws_config::Region::new(region.to_owned()))
        .credentials_provider(aws_sdk_sts::config::SharedCredentialsProvider::new(creds))
        .build())
}
