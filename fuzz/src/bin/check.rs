//! AFL++ entry point: `gpol_fuzz::check` on each input.

fn main() {
    afl::fuzz!(|data: &[u8]| gpol_fuzz::check(data));
}
