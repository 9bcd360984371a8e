//! A private RabbitMQ broker for the tests: the machine's `rabbitmq-server` (Debian's
//! package, installed by the test command when missing), one node per broker with its own
//! ports, data, cookie and user under a directory of its own, an AMQP listener and,
//! optionally, a TLS one with a certificate of a CA made here. Stopped, and its directory
//! removed, when dropped. `stop` and `start` again keep its ports and data: a broker that
//! goes down and comes back.

use crate::emulator;
use amqprs::channel::{
    BasicGetArguments, Channel, ExchangeDeclareArguments, QueueBindArguments, QueueDeclareArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use std::path::PathBuf;
use std::time::Duration;
use tokio::process::{Child, Command};

/// The user every broker has.
pub const USER: &str = "converger";

/// Where the server's start script is: Debian's own (not `/usr/sbin`'s wrapper, which
/// switches to the `rabbitmq` user), `RABBITMQ_SERVER`, or the one on the `PATH`.
fn server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RABBITMQ_SERVER") {
        return Some(p.into());
    }
    let debian = PathBuf::from("/usr/lib/rabbitmq/bin/rabbitmq-server");
    if debian.exists() {
        return Some(debian);
    }
    emulator::find_on_path("rabbitmq-server")
}

/// Installs the server when the machine lacks it (the test command does, before the tests).
pub async fn ensure_server() -> Result<(), String> {
    if server().is_some() {
        return Ok(());
    }
    emulator::apt_install(
        &["rabbitmq-server"],
        "the RabbitMQ tests (or set RABBITMQ_SERVER)",
    )
    .await
}

/// A running (or stopped) private broker.
pub struct Broker {
    pub port: u16,
    /// The TLS listener's port, with the PEM of the CA that signed its certificate (for
    /// `localhost`).
    pub tls: Option<(u16, String)>,
    pub password: String,
    dir: PathBuf,
    node: String,
    dist_port: u16,
    child: Option<Child>,
}

impl Broker {
    /// Starts a broker, with a TLS listener if `tls`; returns once it takes connections.
    pub async fn start(tls: bool) -> Result<Self, String> {
        ensure_server().await?;
        // Ports a restart finds free again (`start_again`).
        let port = emulator::free_port_to_keep()?;
        let dist_port = emulator::free_port_to_keep()?;
        let dir = std::env::temp_dir().join(format!("converger-rabbitmq-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let password = format!("pw-{}", rand::random::<u64>());
        let mut conf = format!(
            "listeners.tcp.default = 127.0.0.1:{port}\n\
             default_user = {USER}\n\
             default_pass = {password}\n\
             loopback_users = none\n\
             log.console = false\n\
             log.file.level = warning\n\
             vm_memory_high_watermark.absolute = 512MB\n\
             disk_free_limit.absolute = 10MB\n"
        );
        let tls = if tls {
            let tls_port = emulator::free_port_to_keep()?;
            let (ca, cert, key) = certificates()?;
            for (name, pem) in [("ca.pem", &ca), ("server.pem", &cert), ("server.key", &key)] {
                std::fs::write(dir.join(name), pem).map_err(|e| format!("{name}: {e}"))?;
            }
            conf.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{tls_port}\n\
                 ssl_options.cacertfile = {d}/ca.pem\n\
                 ssl_options.certfile = {d}/server.pem\n\
                 ssl_options.keyfile = {d}/server.key\n\
                 ssl_options.verify = verify_none\n\
                 ssl_options.fail_if_no_peer_cert = false\n",
                d = dir.display()
            ));
            Some((tls_port, ca))
        } else {
            None
        };
        std::fs::write(dir.join("rabbitmq.conf"), conf).map_err(|e| format!("conf: {e}"))?;
        std::fs::write(dir.join("enabled_plugins"), "[].\n").map_err(|e| format!("{e}"))?;
        let mut b = Self {
            port,
            tls,
            password,
            node: format!("converger-{port}@localhost"),
            dist_port,
            dir,
            child: None,
        };
        b.start_again().await?;
        Ok(b)
    }

    /// `amqp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("amqp://127.0.0.1:{}", self.port)
    }

    /// `amqps://localhost:<port>` and the CA's PEM, if the broker has TLS.
    pub fn tls_url(&self) -> Option<(String, String)> {
        self.tls
            .as_ref()
            .map(|(p, ca)| (format!("amqps://localhost:{p}"), ca.clone()))
    }

    /// Starts the node (again): same ports, same data.
    pub async fn start_again(&mut self) -> Result<(), String> {
        let server = server().ok_or("rabbitmq-server is not installed")?;
        let d = &self.dir;
        let log = std::fs::File::create(d.join("server.out")).map_err(|e| format!("{e}"))?;
        let child = Command::new(server)
            // Its crash dumps (`MnesiaCore.*`, `erl_crash.dump`) land in its working
            // directory: the broker's own, not the tests'.
            .current_dir(d)
            .env("HOME", d)
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_PID_FILE", d.join("pid"))
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            // The script then execs the VM (no shell in between that outlives it), and the
            // VM reads no input: the child is the broker, and killing it stops the broker.
            .env("RABBITMQ_ALLOW_INPUT", "1")
            .env("RABBITMQ_SERVER_START_ARGS", "-noinput")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| format!("{e}"))?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("rabbitmq-server: {e}"))?;
        self.child = Some(child);
        // The listeners open while the node boots: it is ready once a connection's handshake
        // and a channel go through (an open port alone may still drop a connection).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(Ok((conn, _))) =
                tokio::time::timeout(Duration::from_secs(5), self.admin()).await
            {
                let _ = conn.close().await;
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || tokio::time::Instant::now() > deadline {
                let out = std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default();
                let tail: String = out.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                return Err(format!(
                    "rabbitmq-server did not take connections on {} ({exited:?}): {tail}",
                    self.port
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the node (killed, as a crash would) and waits until its port is closed.
    pub async fn stop(&mut self) {
        self.kill();
        if let Some(mut c) = self.child.take() {
            let _ = c.wait().await;
        }
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_err()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// A message read back from a queue.
#[derive(Debug, Clone)]
pub struct Got {
    pub body: Vec<u8>,
    pub headers: std::collections::BTreeMap<String, String>,
    pub message_id: Option<String>,
    pub message_type: Option<String>,
    pub content_type: Option<String>,
    pub delivery_mode: Option<u8>,
}

impl Broker {
    async fn admin(&self) -> Result<(Connection, Channel), String> {
        let args = OpenConnectionArguments::new("127.0.0.1", self.port, USER, &self.password);
        let conn = Connection::open(&args).await.map_err(|e| format!("{e}"))?;
        let ch = conn.open_channel(None).await.map_err(|e| format!("{e}"))?;
        Ok((conn, ch))
    }

    /// Declares a durable topic exchange and a durable queue bound to it with `key`.
    pub async fn bind(&self, exchange: &str, queue: &str, key: &str) -> Result<(), String> {
        let (conn, ch) = self.admin().await?;
        let e = |e: amqprs::error::Error| format!("{e}");
        let mut x = ExchangeDeclareArguments::new(exchange, "topic");
        x.durable(true);
        ch.exchange_declare(x.finish()).await.map_err(e)?;
        ch.queue_declare(QueueDeclareArguments::durable_client_named(queue))
            .await
            .map_err(e)?;
        ch.queue_bind(QueueBindArguments::new(queue, exchange, key))
            .await
            .map_err(e)?;
        let _ = conn.close().await;
        Ok(())
    }

    /// Every message waiting in `queue`, taken.
    pub async fn take(&self, queue: &str) -> Result<Vec<Got>, String> {
        let (conn, ch) = self.admin().await?;
        let mut out = Vec::new();
        let mut args = BasicGetArguments::new(queue);
        args.no_ack(true);
        while let Some((_, props, body)) = ch
            .basic_get(args.clone())
            .await
            .map_err(|e| format!("{e}"))?
        {
            let headers = props
                .headers()
                .map(|h| {
                    h.as_ref()
                        .iter()
                        .map(|(k, v)| (k.as_ref().clone(), v.to_string()))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Got {
                body,
                headers,
                message_id: props.message_id().cloned(),
                message_type: props.message_type().cloned(),
                content_type: props.content_type().cloned(),
                delivery_mode: props.delivery_mode(),
            });
        }
        let _ = conn.close().await;
        Ok(out)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A CA's certificate, and a certificate for `localhost` it signed with its key (PEM).
fn certificates() -> Result<(String, String, String), String> {
    let ca = crate::pki::Ca::new("Converger test CA")?;
    let server = ca.server("localhost")?;
    Ok((ca.pem(), server.cert, server.key))
}
