//! AFL++ entry point: `gpol_fuzz::engines` on each input.

fn main() {
    afl::fuzz!(|data: &[u8]| gpol_fuzz::engines(data));
}
