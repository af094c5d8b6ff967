//! AFL++ entry point: `gpol_fuzz::trace` on each input.

fn main() {
    afl::fuzz!(|data: &[u8]| gpol_fuzz::trace(data));
}
