//! What the tests that compile C share: finding the system C compiler and the libgpol
//! that `cargo test` built, compiling and running a C program, C string literals, and a
//! small seeded generator.
//!
//! Where libgpol is: `cargo test` builds this package's library with every crate type
//! it declares, so the `cdylib` is written next to the `rlib` the tests link, in
//! `target/<profile>/deps/` — the folder holding the test executable itself. (The copy
//! `cargo build` puts in `target/<profile>/` is not refreshed by `cargo test`, so the
//! tests never use it.)

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder holding the libgpol `cargo test` built for this run.
pub fn libgpol_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe.parent().expect("the test executable's folder").to_path_buf();
    let lib = dir.join(format!("{}gpol{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX));
    assert!(lib.is_file(), "{} is missing: `cargo test -p gpol-capi` builds it beside the tests", lib.display());
    dir
}

/// The system C compiler (`$CC`, else `cc`), or `None` with a message saying why the
/// test is skipped.
pub fn cc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    match Command::new(&cc).arg("--version").output() {
        Ok(out) if out.status.success() => Some(cc),
        _ => {
            gpol_testing::missing_tool(&format!("a C compiler (`{cc}`)"), "apt-get install gcc");
            None
        }
    }
}

/// A fresh folder for one test's files, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gpol-capi-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles and links `source` (with `extra` inputs such as an object file) against
/// libgpol and the headers in `capi/include`, strictly (warnings are errors); the
/// executable's path.
pub fn build_c(cc: &str, dir: &Path, source: &str, extra: &[&Path]) -> PathBuf {
    let src = dir.join("main.c");
    std::fs::write(&src, source).expect("writing the C source");
    let exe = dir.join("main");
    let lib = libgpol_dir();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let mut cmd = Command::new(cc);
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wno-overlength-strings", "-O1"])
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .args(extra)
        .arg("-L")
        .arg(&lib)
        .arg("-lgpol")
        // DT_RPATH, not DT_RUNPATH: cargo puts target/<profile>/ on LD_LIBRARY_PATH, which
        // would win over a RUNPATH with whatever stale libgpol `cargo build` left there.
        .arg("-Wl,--disable-new-dtags")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lm")
        .arg("-o")
        .arg(&exe);
    let out = cmd.output().expect("running the C compiler");
    assert!(
        out.status.success(),
        "the C program does not compile:\n{}\n(source: {})",
        String::from_utf8_lossy(&out.stderr),
        src.display()
    );
    exe
}

/// Runs a built C program; its standard output.
pub fn run(exe: &Path) -> String {
    let out = Command::new(exe).output().expect("running the C program");
    assert!(
        out.status.success(),
        "the C program failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the C program prints UTF-8")
}

/// `text` as a C string literal: printable ASCII as is, everything else (and `?`, which
/// could start a trigraph) escaped in octal.
pub fn c_str(text: &str) -> String {
    let mut out = String::from("\"");
    for b in text.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n\"\n\""),
            b' '..=b'~' if b != b'?' => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// SplitMix64: small, seeded, the same on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// One of `items`, cloned.
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize].clone()
    }
}
