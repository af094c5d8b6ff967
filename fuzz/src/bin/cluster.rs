//! AFL++ entry point: `gpol_fuzz::cluster` on each input.

fn main() {
    afl::fuzz!(|data: &[u8]| gpol_fuzz::cluster(data));
}
