//! `gpolc build` output: a relocatable object with the entry points and the layout hash.

use gpol_compiler::load::Checked;
use object::{Object, ObjectSection, ObjectSymbol};

#[test]
fn object_exports_entry_points_and_layout_hash() {
    let path = format!("{}/../policies/gpu_sharing.gpol", env!("CARGO_MANIFEST_DIR"));
    let policy = Checked::from_file(path.as_ref()).unwrap().into_policy().unwrap().policy;
    let program = gpol_compiler::lower::lower(&policy).expect("lowers");
    let bytes = gpol_compiler::jit::object::object(&program).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let symbols: Vec<String> = file.symbols().filter_map(|s| s.name().ok().map(str::to_string)).collect();
    use gpol_compiler::jit::codegen::*;
    for name in [ADMIT, FILTER_SCORE, CARD_SCORE, QUEUE_KEYS, JOB_KEYS, GANG, VICTIM, VICTIM_KEYS, "gpol_layout_hash"] {
        assert!(symbols.iter().any(|s| s == name), "{name} missing from {symbols:?}");
        let sym = file.symbol_by_name(name).expect("the entry point is exported");
        assert!(sym.is_global() && sym.is_definition(), "{name} is exported");
    }
    for helper in HELPERS {
        let sym = file.symbol_by_name(helper).expect("the helper is exported");
        assert!(sym.is_undefined(), "{helper} is imported");
    }
    let hash = file.symbol_by_name("gpol_layout_hash").expect("the layout hash is exported");
    let section = file.section_by_index(hash.section_index().expect("no section")).unwrap();
    let data = section.data().unwrap();
    let at = (hash.address() - section.address()) as usize;
    let stamped = u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or_default());
    assert_eq!(stamped, gpol_compiler::schema::layout_hash());
}
