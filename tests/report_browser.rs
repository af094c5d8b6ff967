//! `gpolc sim --report`, rendered by a real browser: Debian's headless Chromium loads
//! each report with a checker appended, which records script errors, every chart's
//! rendered size and lines, and any table its layout clips; the test fails on any of
//! them or on a missing chart. Without Chromium (`apt-get install chromium`, or
//! `GPOL_CHROMIUM=/path`) it says so and checks nothing.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Runs in the page before anything else: every script error is kept.
const ERRORS: &str = "<script>window.__errors = []; \
    window.addEventListener('error', e => window.__errors.push(String(e.message)));</script>";

/// Runs once the page is laid out: what it found goes into an attribute of `<body>`,
/// which `--dump-dom` prints.
const CHECKER: &str = r#"<script>
(() => {
  const charts = [...document.querySelectorAll('svg')].map(s => {
    const r = s.getBoundingClientRect();
    return { width: r.width, height: r.height, lines: s.querySelectorAll('polyline, path').length };
  });
  const clipped = [...document.querySelectorAll('table')].filter(t => {
    for (let a = t; a && a !== document.documentElement; a = a.parentElement) {
      const overflow = getComputedStyle(a).overflowX;
      if (overflow !== 'visible' && a.scrollWidth > a.clientWidth + 1) return true;
    }
    return t.scrollWidth > t.clientWidth + 1;
  }).length;
  const sections = [...document.querySelectorAll('h2')].map(h => h.textContent);
  const cells = document.querySelectorAll('td').length;
  const judged = document.querySelectorAll('td.better, td.worse').length;
  document.body.setAttribute('data-check',
    JSON.stringify({ errors: window.__errors, charts, clipped, sections, cells, judged }));
})();
</script>"#;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPOL_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

fn gpolc() -> Command {
    let mut c = Command::cargo_bin("gpolc").expect("gpolc is built");
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[derive(Debug, serde::Deserialize)]
struct Check {
    errors: Vec<String>,
    charts: Vec<Chart>,
    clipped: usize,
    sections: Vec<String>,
    cells: usize,
    judged: usize,
}

#[derive(Debug, serde::Deserialize)]
struct Chart {
    width: f64,
    height: f64,
    lines: usize,
}

/// Loads `report` with the checker in Chromium and returns what it found.
fn check(browser: &Path, report: &Path, dir: &Path) -> Check {
    let html = std::fs::read_to_string(report).expect("the report is written");
    let checked =
        html.replacen("<head>", &format!("<head>{ERRORS}"), 1).replacen("</body>", &format!("{CHECKER}</body>"), 1);
    let page = dir.join("checked.html");
    std::fs::write(&page, checked).expect("the checked copy is written");
    let profile = tempfile::tempdir_in(dir).expect("a profile folder");
    let mut child = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
            "--timeout=20000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().expect("chromium runs").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dom = reader.join().expect("the reader ends");
    let start = dom.find("data-check=\"").map(|i| i + "data-check=\"".len()).expect("the checker ran");
    let end = dom[start..].find('"').map(|i| start + i).expect("the attribute ends");
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    serde_json::from_str(&json).expect("the checker's JSON")
}

/// Every chart drawn full size with lines in it, no script error, no table clipped.
fn assert_sound(c: &Check, sections: &[&str]) {
    assert!(c.errors.is_empty(), "script errors: {:?}", c.errors);
    assert_eq!(c.clipped, 0, "a table is cut off");
    assert!(c.cells >= 12, "the summary's tables are missing: {c:?}");
    for wanted in sections {
        assert!(c.sections.iter().any(|s| s.starts_with(wanted)), "no chart `{wanted}` in {:?}", c.sections);
    }
    let charts = c.sections.iter().filter(|s| s.as_str() != "Notes").count();
    assert_eq!(c.charts.len(), charts, "one chart per section: {:?}", c.sections);
    for chart in &c.charts {
        assert!(chart.width >= 800.0 && chart.height >= 300.0, "a chart drawn too small: {chart:?}");
        assert!(chart.lines >= 3, "a chart with no lines: {chart:?}");
    }
}

#[test]
fn reports_render_in_a_real_browser_with_every_chart_and_table() {
    let Some(browser) = chromium() else {
        gpol_testing::missing_tool("Chromium", "apt-get install chromium, or set GPOL_CHROMIUM");
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary folder");
    let report = dir.path().join("report.html");
    // One timed run of the bundled default: its queues borrow, and research is evicted.
    gpolc().args(["sim", "--price", "2", "--report"]).arg(&report).assert().success();
    let c = check(&browser, &report, dir.path());
    assert_sound(
        &c,
        &[
            "Allocation vs utilization",
            "Waiting demand",
            "Queue GPUs vs guarantees — borrowing",
            "Queueing delay — all jobs and each queue",
            "Evictions over time",
            "Fragmentation over time",
        ],
    );
    // Two policies side by side over two seeds (research may borrow less in the second):
    // a delay chart per queue, deltas judged.
    let bundled = std::fs::read_to_string("policies/borrowing.gpol").expect("the bundled policy");
    let narrow =
        bundled.replacen("policy borrowing", "policy narrow", 1).replace("borrow_limit 64 gpu", "borrow_limit 8 gpu");
    let second = dir.path().join("narrow.gpol");
    std::fs::write(&second, narrow).expect("the second policy is written");
    gpolc()
        .args(["sim", "policies/borrowing.gpol", "--compare"])
        .arg(&second)
        .args(["--seeds", "1..2", "--report"])
        .arg(&report)
        .args(["--force"])
        .assert()
        .success();
    let c = check(&browser, &report, dir.path());
    assert_sound(&c, &["Queueing delay — all jobs", "Queueing delay — queue research", "Queue GPUs vs guarantees"]);
    assert!(c.judged > 0, "no delta is highlighted: {c:?}");
    // Fill mode: the curves, and each policy against the first.
    gpolc()
        .args(["sim", "policies/best_fit.gpol", "--compare", "policies/random.gpol", "--fill", "100", "--force"])
        .arg("--report")
        .arg(&report)
        .assert()
        .success();
    let c = check(&browser, &report, dir.path());
    assert_sound(&c, &["Allocation and fragmentation as jobs arrive", "Allocation against best_fit"]);
}
