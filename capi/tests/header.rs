//! The checked-in headers are what the code generates: `include/gpol.h` from this
//! crate's source (cbindgen, `cbindgen.toml`), `include/gpol_records.h` from the schema.
//! `GPOL_BLESS=1` rewrites them instead of failing.

use std::path::Path;

fn compare_or_bless(path: &Path, generated: &str) {
    let bless = std::env::var_os("GPOL_BLESS").is_some_and(|v| v == "1");
    let current = std::fs::read_to_string(path).unwrap_or_default();
    if current == generated {
        return;
    }
    if bless {
        std::fs::write(path, generated).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let first = current.lines().zip(generated.lines()).position(|(a, b)| a != b);
    panic!(
        "{} is not current (first difference at line {}); regenerate it with \
         `GPOL_BLESS=1 cargo test -p gpol-capi --test header`",
        path.display(),
        first.map_or_else(|| "the end".to_string(), |l| (l + 1).to_string())
    );
}

#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml reads");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    let text = String::from_utf8(out).expect("the header is UTF-8");
    compare_or_bless(&crate_dir.join("include/gpol.h"), &text);
}

#[test]
fn records_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    compare_or_bless(&crate_dir.join("include/gpol_records.h"), &gpol::records_header::header());
}
