//! Interned strings. Rules compare strings as symbols; `hash01` needs each symbol's text
//! hash, kept alongside. `Sym(0)` is "absent" and never names a string. Job names are
//! interned counted, so that a long run forgets the names of jobs that ended; every other
//! string (policy text, queues, nodes, users, labels) is kept for good.

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
    /// Symbols interned only by [`Symbols::intern_counted`], with how many holders each has.
    counted: HashMap<Sym, u32>,
    /// Released symbols, to be given out again.
    free: Vec<Sym>,
}

impl Default for Symbols {
    fn default() -> Self {
        Symbols {
            ids: HashMap::new(),
            names: vec![String::new()],
            hashes: vec![0],
            salt: 0,
            counted: HashMap::new(),
            free: Vec::new(),
        }
    }
}

impl Symbols {
    /// The symbol of `s`, kept for good.
    pub(crate) fn intern(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ids.get(s) {
            self.counted.remove(&id);
            return id;
        }
        self.add(s)
    }

    /// The symbol of `s` for one more holder, who gives it back with [`Symbols::release`].
    pub(crate) fn intern_counted(&mut self, s: &str) -> Sym {
        match self.ids.get(s) {
            Some(&id) => {
                if let Some(n) = self.counted.get_mut(&id) {
                    *n += 1;
                }
                id
            }
            None => {
                let id = self.add(s);
                self.counted.insert(id, 1);
                id
            }
        }
    }

    /// One holder of a symbol from [`Symbols::intern_counted`] is done with it; the last
    /// one's release forgets the string, and the symbol may name another later.
    pub(crate) fn release(&mut self, id: Sym) {
        let Some(n) = self.counted.get_mut(&id) else { return };
        *n -= 1;
        if *n == 0 {
            self.counted.remove(&id);
            let name = std::mem::take(&mut self.names[id.0 as usize]);
            self.ids.remove(&name);
            self.hashes[id.0 as usize] = 0;
            self.free.push(id);
        }
    }

    /// How many strings are held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn add(&mut self, s: &str) -> Sym {
        let hash = str_key(s) ^ self.salt;
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id.0 as usize] = s.to_string();
                self.hashes[id.0 as usize] = hash;
                id
            }
            None => {
                self.names.push(s.to_string());
                self.hashes.push(hash);
                Sym(u32::try_from(self.names.len() - 1).unwrap_or(u32::MAX))
            }
        };
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
    pub(crate) fn reseed(&mut self, seed: u64) {
        self.salt = if seed == 0 { 0 } else { gpol_compiler::ops::str_key(&seed.to_string()) };
        for (h, name) in self.hashes.iter_mut().zip(&self.names).skip(1).filter(|(_, n)| !n.is_empty()) {
            *h = str_key(name) ^ self.salt;
        }
    }

    pub(crate) fn hashes(&self) -> &[u64] {
        &self.hashes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_symbol_lives_while_held_and_a_kept_one_for_good() {
        let mut syms = Symbols::default();
        let a = syms.intern_counted("job-a");
        assert_eq!(syms.intern_counted("job-a"), a);
        syms.release(a);
        assert_eq!(syms.get("job-a"), Some(a), "one holder is left");
        syms.release(a);
        assert_eq!(syms.get("job-a"), None);
        let b = syms.intern_counted("job-b");
        assert_eq!(b, a, "a released symbol is given out again");
        assert_eq!((syms.name(b), syms.hashes()[b.0 as usize]), ("job-b", str_key("job-b")));
        let kept = syms.intern("job-b");
        syms.release(b);
        assert_eq!(syms.get("job-b"), Some(kept), "interning for good outlives every counted holder");
        let user = syms.intern("alice");
        assert_eq!(syms.intern_counted("alice"), user);
        syms.release(user);
        assert_eq!(syms.get("alice"), Some(user), "a kept symbol is never released");
    }
}
