//! A real Slurm for a test: whether one can start here, and a scenario run in one
//! (slurm/tests/slurm/cluster.sh).

/// Whether a test Slurm can be started here (root, Slurm installed), saying why not.
pub fn slurm_here() -> bool {
    let has = |t: &str| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ok = root && ["slurmctld", "slurmd", "munged", "sbatch", "unshare"].iter().all(|t| has(t));
    if !ok {
        gpol_testing::missing_tool("a real Slurm (root and slurm-wlm)", "apt-get install slurm-wlm munge, as root");
    }
    ok
}

/// Whether a test Slurm with accounting (slurmdbd over MariaDB) can start here, saying
/// why not.
pub fn accounting_here() -> bool {
    let has = |t: &str| std::process::Command::new("sh").args(["-c", &format!("command -v {t}")]).output();
    let ok = ["slurmdbd", "mariadbd", "mariadb-install-db", "sacctmgr"]
        .iter()
        .all(|t| has(t).is_ok_and(|o| o.status.success()));
    if !ok {
        gpol_testing::missing_tool("slurmdbd and MariaDB", "apt-get install slurmdbd mariadb-server");
    }
    ok && slurm_here()
}

/// Test clusters with accounting run one at a time: slurmdbd's clients reach munge by
/// its default socket whatever the configuration says (Slurm 22.05), so two at once
/// authenticate against each other's munged and `sacctmgr add cluster` fails.
static ACCOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `scenario` in a real test cluster given `dir`'s files; what it printed.
pub fn in_test_cluster(dir: &std::path::Path, scenario: &str) -> String {
    let _one_at_a_time =
        dir.join("accounting").exists().then(|| ACCOUNTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    std::fs::write(dir.join("scenario.sh"), scenario).expect("writable");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("slurm/tests/slurm/cluster.sh");
    let out =
        std::process::Command::new("bash").arg(script).arg(dir).arg(dir.join("scenario.sh")).output().expect("runs");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    said
}

/// The test cluster's 16 nodes gpu-[0-15] (cluster.sh's default) as a cluster file.
pub const SIXTEEN_NODES: &str = "name = \"test\"\n\n[[pool]]\nname = \"gpu\"\ncount = 16\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\n";

/// Writes `text` to `dir/name`; the path.
pub fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writable");
    path
}
