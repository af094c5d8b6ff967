//! `gpolc build` output: a relocatable object with the entry points and the layout hash.

use gpol_compiler::check::check;
use gpol_compiler::source::{SourceFile, SourceMap};
use object::{Object, ObjectSection, ObjectSymbol};

#[test]
fn object_exports_entry_points_and_layout_hash() {
    let path = format!("{}/../policies/gpu_sharing.gpol", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new(path, text));
    let policy = check(&mut sources, id).policy.unwrap_or_else(|| panic!("policy does not check"));
    let program = gpol_compiler::lower::lower(&policy);
    let bytes = gpol_compiler::jit::object::object(&program).unwrap_or_else(|e| panic!("{e}"));
    let file = object::File::parse(&*bytes).unwrap_or_else(|e| panic!("{e}"));
    let symbols: Vec<String> = file.symbols().filter_map(|s| s.name().ok().map(str::to_string)).collect();
    use gpol_compiler::jit::codegen::*;
    for name in [ADMIT, FILTER_SCORE, CARD_SCORE, QUEUE_KEYS, JOB_KEYS, GANG, VICTIM, "gpol_layout_hash"] {
        let sym = file.symbol_by_name(name).unwrap_or_else(|| panic!("{name} missing from {symbols:?}"));
        assert!(sym.is_global() && sym.is_definition(), "{name} is exported");
    }
    for helper in HELPERS {
        let sym = file.symbol_by_name(helper).unwrap_or_else(|| panic!("{helper} missing"));
        assert!(sym.is_undefined(), "{helper} is imported");
    }
    let hash = file.symbol_by_name("gpol_layout_hash").unwrap_or_else(|| panic!("hash"));
    let section = file
        .section_by_index(hash.section_index().unwrap_or_else(|| panic!("no section")))
        .unwrap_or_else(|e| panic!("{e}"));
    let data = section.data().unwrap_or_else(|e| panic!("{e}"));
    let at = (hash.address() - section.address()) as usize;
    let stamped = u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or_default());
    assert_eq!(stamped, gpol_compiler::schema::layout_hash());
}
