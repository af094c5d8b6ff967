pub use gpol_compiler::schema;
