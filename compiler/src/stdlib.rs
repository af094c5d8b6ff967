//! The standard library: gpol modules embedded in the binary.

/// Module paths of the standard library.
pub(crate) const MODULES: &[&str] = &["std.atc23", "std.fair", "std.pack", "std.topology"];

/// The source of a standard-library module.
pub(crate) fn source(path: &str) -> Option<&'static str> {
    Some(match path {
        "std.atc23" => include_str!("../../stdlib/atc23.gpol"),
        "std.fair" => include_str!("../../stdlib/fair.gpol"),
        "std.pack" => include_str!("../../stdlib/pack.gpol"),
        "std.topology" => include_str!("../../stdlib/topology.gpol"),
        _ => return None,
    })
}

/// The name diagnostics use for a standard-library file.
pub(crate) fn file_name(path: &str) -> String {
    format!("<std>/{}.gpol", path.trim_start_matches("std.").replace('.', "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_a_module() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../stdlib");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("the folder is readable")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "gpol"))
            .filter_map(|p| p.file_stem().map(|s| format!("std.{}", s.to_string_lossy())))
            .collect();
        files.sort();
        assert_eq!(files, MODULES);
        assert!(MODULES.iter().all(|m| source(m).is_some()));
    }
}
