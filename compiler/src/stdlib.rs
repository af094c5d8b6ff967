//! The standard library: gpol modules embedded in the binary.

/// Module paths of the standard library.
pub const MODULES: &[&str] = &["std.atc23", "std.fair", "std.pack", "std.topology"];

/// The source of a standard-library module.
pub fn source(path: &str) -> Option<&'static str> {
    Some(match path {
        "std.atc23" => include_str!("../../stdlib/atc23.gpol"),
        "std.fair" => include_str!("../../stdlib/fair.gpol"),
        "std.pack" => include_str!("../../stdlib/pack.gpol"),
        "std.topology" => include_str!("../../stdlib/topology.gpol"),
        _ => return None,
    })
}

/// The name diagnostics use for a standard-library file.
pub fn file_name(path: &str) -> String {
    format!("<std>/{}.gpol", path.trim_start_matches("std.").replace('.', "/"))
}
