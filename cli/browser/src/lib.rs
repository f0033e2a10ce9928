//! # causeway-cli-browser
//!
//! The browser tier of the `causeway` HTML view: real runs rendered as pages by
//! `causeway_cli::view`, opened in Debian's headless Chromium and driven through chromedriver
//! with a WebDriver client (fantoccini). What the tests read comes from the page's DOM after
//! the page's own controls were used, never from the HTML text.
//!
//! `scripts/browser.sh` installs `chromium` and `chromium-driver` and runs the tests (they are
//! `#[ignore]`d so that `cargo test --workspace` needs no browser); when either is missing the
//! tests fail naming it.
//!
//! In the guide: `docs/src/view.md` in the repository.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use causeway_cli::view;
use causeway_scenario::run::{run, RunOptions};
use causeway_scenario::{check, parse, report};
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

/// Where Debian's packages put the browser and its driver (overridden by `CAUSEWAY_CHROMIUM`
/// and `CAUSEWAY_CHROMEDRIVER`).
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long chromedriver may take to accept a session.
const DRIVER_START: Duration = Duration::from_secs(20);

/// A headless Chromium session behind its own chromedriver; the driver is killed on drop.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
}

fn tool(variable: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        path.exists(),
        "{} is not installed ({variable} unset or wrong): run scripts/browser.sh, which installs \
         Debian's chromium and chromium-driver",
        path.display()
    );
    path
}

impl Browser {
    /// Starts chromedriver on a free local port and opens a headless Chromium window of
    /// `width` × `height` whose console is recorded.
    pub async fn start(width: u32, height: u32) -> Browser {
        let chromium = tool("CAUSEWAY_CHROMIUM", CHROMIUM);
        let chromedriver = tool("CAUSEWAY_CHROMEDRIVER", CHROMEDRIVER);
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let capabilities: Capabilities = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--hide-scrollbars",
                         format!("--window-size={width},{height}")],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }))
        .unwrap();
        let deadline = Instant::now() + DRIVER_START;
        let client = loop {
            let mut builder = ClientBuilder::new(HttpConnector::new());
            builder.capabilities(capabilities.clone());
            match builder.connect(&format!("http://127.0.0.1:{port}")).await {
                Ok(client) => break client,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("no Chromium session from chromedriver: {error}"),
            }
        };
        // A machine shared with builds can be slow: a timed script gets two minutes.
        let mut timeouts = fantoccini::wd::TimeoutConfiguration::default();
        timeouts.set_script(Some(Duration::from_secs(120)));
        client.update_timeouts(timeouts).await.expect("chromedriver takes the timeouts");
        Browser { client, driver }
    }

    /// The browser console since the last call: `(level, message)` pairs; `SEVERE` is
    /// `console.error` or an uncaught exception.
    pub async fn console(&self) -> Vec<(String, String)> {
        let entries = self.client.issue_cmd(BrowserLog).await.expect("chromedriver's log");
        entries
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| {
                let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
                (text("level"), text("message"))
            })
            .collect()
    }

    /// Opens `page` (a file) and waits until the page says it has painted.
    pub async fn open(&self, page: &Path) {
        let url = url::Url::from_file_path(page).expect("an absolute path");
        self.client.goto(url.as_str()).await.expect("the page loads");
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(fantoccini::Locator::Css("body[data-ready]"))
            .await
            .expect("the page paints");
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// chromedriver's log endpoint (outside the W3C protocol, which has none).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

/// A real run of scenario `source` (named `name`) on the device, as its report JSON.
pub fn run_report(name: &str, source: &str) -> Vec<u8> {
    run_report_within(name, source, Duration::from_secs(120))
}

/// As [`run_report`], stopped at `timeout` (its report then says it timed out).
pub fn run_report_within(name: &str, source: &str, timeout: Duration) -> Vec<u8> {
    let scenario = parse::parse(Path::new(name), source).expect("the scenario parses");
    let plan = check::check(&scenario).expect("the scenario checks");
    let options = RunOptions { timeout, progress: false, all_cpu: false };
    let outcome = run(&scenario, &plan, options).expect("the scenario runs");
    let mut json = Vec::new();
    report::write(&outcome, &mut json).expect("the report is written");
    json
}

/// Writes the page of `report` to `page`.
pub fn write_page(report: &[u8], page: &Path) -> io::Result<()> {
    let file = std::fs::File::create(page)?;
    view::write(report, view::PageLinks { trace: Some("trace.json") }, io::BufWriter::new(file))
        .map_err(io::Error::other)
}

/// Where the tier leaves its pages and screenshots: `CAUSEWAY_BROWSER_OUT`, else
/// `target/browser` in the workspace.
pub fn output_dir() -> PathBuf {
    let dir = std::env::var_os("CAUSEWAY_BROWSER_OUT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).expect("the output folder");
    dir.canonicalize().expect("the output folder")
}

/// A report value read as JSON.
pub fn parse_report(report: &[u8]) -> Value {
    serde_json::from_slice(report).expect("the report is JSON")
}
