//! A real browser for the web pages' tests: Debian's Chromium, headless, driven through
//! chromedriver (WebDriver) with its own empty profile and download folder. Each test's
//! screenshots go to `target/test-output/browser/<test>/`, numbered in the order taken, so a
//! reviewer can look at every page the test visited.
//!
//! chromedriver and Chromium are found through `CHROMEDRIVER` and `CHROME_BIN`, or on the
//! `PATH`; the test command installs Debian's `chromium` and `chromium-driver` when they are
//! missing. A test that cannot find them fails: it never passes without a browser.

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a page, an element or a download may take to appear.
const WAIT: Duration = Duration::from_secs(30);

/// Whether a command failed because its element is no longer in the page.
fn stale(e: &fantoccini::error::CmdError) -> bool {
    matches!(
        e,
        fantoccini::error::CmdError::Standard(w)
            if w.error == fantoccini::error::ErrorStatus::StaleElementReference
    )
}

pub struct Browser {
    pub client: Client,
    /// The site's base URL (`http://127.0.0.1:PORT`).
    pub base: String,
    driver: tokio::process::Child,
    scratch: PathBuf,
    shots: PathBuf,
    shot_no: AtomicU32,
}

fn find_program(var: &str, names: &[&str]) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        return PathBuf::from(p);
    }
    if let Some(p) = names
        .iter()
        .find_map(|n| converger_local::emulator::find_on_path(n))
    {
        return p;
    }
    panic!(
        "no {} found (set {var}, or install Debian's chromium and chromium-driver: the test \
         command `cargo run -p converger-local -- test` does this)",
        names.join(" or ")
    )
}

/// The workspace's `target` folder (or `CARGO_TARGET_DIR`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium for the site at `base`; screenshots go to
    /// `target/test-output/browser/<test>/` (emptied first).
    pub async fn start(base: &str, test: &str) -> Self {
        let chromedriver = find_program("CHROMEDRIVER", &["chromedriver"]);
        let chromium = find_program(
            "CHROME_BIN",
            &["chromium", "chromium-browser", "google-chrome"],
        );
        let scratch = std::env::temp_dir().join(format!(
            "converger-browser-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let downloads = scratch.join("downloads");
        std::fs::create_dir_all(&downloads).unwrap();
        let shots = target_dir().join("test-output/browser").join(test);
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();

        let port = free_port();
        // Its own process group: dropping the browser ends chromedriver and Chromium together.
        let driver = tokio::process::Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", chromedriver.display()));
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            let ready = http
                .get(format!("{url}/status"))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .ok()
                .filter(|r| r.status().is_success());
            if let Some(r) = ready
                && r.text()
                    .await
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .is_some_and(|v| v["value"]["ready"] == true)
            {
                break;
            }
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // The flags keep Chromium from reaching out to the network (this machine's is closed)
        // and from sharing anything with another run.
        let caps = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    format!("--user-data-dir={}", scratch.join("profile").display()),
                ],
                "prefs": {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": false,
                },
            }
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .expect("a WebDriver session");
        Self {
            client,
            base: base.trim_end_matches('/').to_owned(),
            driver,
            scratch,
            shots,
            shot_no: AtomicU32::new(0),
        }
    }

    /// Ends the browser session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }

    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
    }

    /// The current page's path and query.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.unwrap();
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// Saves a screenshot of the whole window as `NN-name.png`.
    pub async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let n = self.shot_no.fetch_add(1, Ordering::Relaxed) + 1;
        std::fs::write(self.shots.join(format!("{n:02}-{name}.png")), png).unwrap();
    }

    /// The element `css` matches, waiting for it to appear.
    pub async fn find(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => panic!("no element `{css}` on {}: {e}", self.path_now().await),
        }
    }

    async fn path_now(&self) -> String {
        self.client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Every element `css` matches now (none is fine).
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap()
    }

    pub async fn exists(&self, css: &str) -> bool {
        !self.all(css).await.is_empty()
    }

    /// The text of the element `css` matches. A page that updates itself (the dashboard's
    /// live counts) may replace the element between finding and reading it: it is found
    /// again then.
    pub async fn text(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.find(css).await.text().await {
                Ok(t) => return t,
                Err(e) if stale(&e) && Instant::now() < deadline => continue,
                Err(e) => panic!("`{css}`: {e}"),
            }
        }
    }

    /// Clicks the element `css` matches, found again if it was replaced meanwhile.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.find(css).await.click().await {
                Ok(_) => return,
                Err(e) if stale(&e) && Instant::now() < deadline => continue,
                Err(e) => panic!("`{css}`: {e}"),
            }
        }
    }

    /// Clicks a submit button and waits for the page it leads to.
    pub async fn submit(&self, css: &str) {
        let before = self.find("html").await;
        self.click(css).await;
        let deadline = Instant::now() + WAIT;
        // The old page's root goes stale once the new page has loaded.
        while before.tag_name().await.is_ok() {
            assert!(Instant::now() < deadline, "`{css}` led to no new page");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.find("body").await;
    }

    /// Types `value` into the empty input `css`.
    pub async fn fill(&self, css: &str, value: &str) {
        let e = self.find(css).await;
        e.clear().await.unwrap();
        e.send_keys(value).await.unwrap();
    }

    pub async fn select(&self, css: &str, value: &str) {
        self.find(css)
            .await
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("select {value} in `{css}`: {e}"));
    }

    /// The `data-id` of every row `css` matches, in page order.
    pub async fn row_ids(&self, css: &str) -> Vec<String> {
        let mut ids = Vec::new();
        for e in self.all(css).await {
            if let Some(id) = e.attr("data-id").await.unwrap() {
                ids.push(id);
            }
        }
        ids
    }

    /// Signs in through the login form; returns the path the site sent the browser to.
    pub async fn sign_in(&self, realm: &str, email: &str, password: &str) -> String {
        self.goto(&format!("/{realm}/login")).await;
        self.fill("input[name=email]", email).await;
        self.fill("input[name=password]", password).await;
        self.submit("form button[type=submit]").await;
        self.path().await
    }

    /// Polls the text of `css` until `ok` holds; returns the last text seen.
    pub async fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let t = self.text(css).await;
            if ok(&t) || Instant::now() > deadline {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs `script` in the page (`arguments[0]`... are `args`) and returns its value.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }

    /// Runs an asynchronous `script` whose last argument is the callback it must call.
    pub async fn js_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute_async(script, args).await.unwrap()
    }

    /// Clicks the link `css` and returns the file the browser downloaded (name, contents).
    pub async fn download(&self, css: &str) -> (String, String) {
        let dir = self.scratch.join("downloads");
        self.click(css).await;
        let deadline = Instant::now() + WAIT;
        loop {
            let done: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| e.path())
                // Chromium writes into a hidden file, then a `.crdownload`, then renames.
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                        && p.extension().is_none_or(|e| e != "crdownload")
                })
                .collect();
            if let [file] = done.as_slice() {
                let text = std::fs::read_to_string(file).unwrap();
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                std::fs::remove_file(file).unwrap();
                return (name, text);
            }
            assert!(Instant::now() < deadline, "no download from `{css}`");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, which Chromium joins: end them all, even
        // when a test panics before `close`.
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}
