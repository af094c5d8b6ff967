//! Interned strings. Rules compare strings as symbols; `hash01` needs each symbol's text
//! hash, kept alongside. `Sym(0)` is "absent" and never names a string.

use gpol_compiler::ops::str_key;
use gpol_compiler::schema::Sym;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct Symbols {
    ids: HashMap<String, Sym>,
    names: Vec<String>,
    /// `hashes[sym]`: the FNV-1a hash of the symbol's text, mixed with `salt` (0 for
    /// `Sym(0)`).
    hashes: Vec<u64>,
    salt: u64,
}

impl Default for Symbols {
    fn default() -> Self {
        Symbols { ids: HashMap::new(), names: vec![String::new()], hashes: vec![0], salt: 0 }
    }
}

impl Symbols {
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = Sym(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        self.names.push(s.to_string());
        self.hashes.push(str_key(s) ^ self.salt);
        self.ids.insert(s.to_string(), id);
        id
    }

    pub fn get(&self, s: &str) -> Option<Sym> {
        self.ids.get(s).copied()
    }

    pub fn name(&self, s: Sym) -> &str {
        self.names.get(s.0 as usize).map_or("", String::as_str)
    }

    /// Mixes `seed` into every symbol's hash, so `hash01` draws differ from seed to seed
    /// (seed 0 keeps the plain text hashes).
    pub fn reseed(&mut self, seed: u64) {
        self.salt = if seed == 0 { 0 } else { gpol_compiler::ops::str_key(&seed.to_string()) };
        for (h, name) in self.hashes.iter_mut().zip(&self.names).skip(1) {
            *h = str_key(name) ^ self.salt;
        }
    }

    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }
}
