//! AFL++ entry point: `gpol_fuzz::slurm` on each input.

fn main() {
    afl::fuzz!(|data: &[u8]| gpol_fuzz::slurm(data));
}
