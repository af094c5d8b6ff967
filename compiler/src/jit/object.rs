//! Relocatable object output (`gpolc build`): the same code as the JIT, with the entry
//! points exported as C symbols (see `codegen`'s names) and `gpol_layout_hash`, a
//! `u64` a loader compares with its own `schema::layout_hash()` before calling anything.
//! The object imports `gpol_exp2`, `gpol_log` and `gpol_pow` (provided by the C ABI
//! library that links it).

use super::{BackendError, codegen, host_isa};
use crate::ir::Program;
use cranelift_module::{DataDescription, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};

pub const LAYOUT_HASH_SYMBOL: &str = "gpol_layout_hash";

/// Compiles a program into the bytes of a relocatable object file for this machine.
pub fn object(program: &Program) -> Result<Vec<u8>, BackendError> {
    // Position-independent, so the object can go into a shared library.
    let isa = host_isa(&[("opt_level", "speed"), ("is_pic", "true")])?;
    let builder = ObjectBuilder::new(isa, program.name.as_bytes().to_vec(), cranelift_module::default_libcall_names())
        .map_err(BackendError::module)?;
    let mut module = ObjectModule::new(builder);
    codegen::define_all(&mut module, program, Linkage::Export)?;
    let hash = module.declare_data(LAYOUT_HASH_SYMBOL, Linkage::Export, false, false).map_err(BackendError::module)?;
    let mut data = DataDescription::new();
    data.define(crate::schema::layout_hash().to_le_bytes().to_vec().into_boxed_slice());
    data.set_align(8);
    module.define_data(hash, &data).map_err(BackendError::module)?;
    module.finish().emit().map_err(BackendError::Emit)
}
