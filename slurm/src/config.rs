//! What the loop reads of slurmctld's configuration (`scontrol show config`): whether
//! memory is a consumable resource. Under `SelectTypeParameters=CR_*_Memory` Slurm
//! allocates memory as it does cores, and a job that asks for none gets its default
//! (`DefMemPerCPU`, `DefMemPerNode`, `DefMemPerGPU`) or, with none set, the whole node's
//! memory; otherwise Slurm allocates no memory at all and jobs share it.

/// How Slurm counts memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Memory {
    /// Allocated per job (`CR_*_Memory`), as Slurm's own count of each job's request
    /// (its TRES) says — defaults and whole nodes included. What a Slurm unknown to the
    /// loop is taken to do.
    #[default]
    Counted,
    /// Not allocated: no job holds memory.
    NotCounted,
}

/// Reads `scontrol show config`'s `SelectTypeParameters` line; `None` when the output
/// has no such line (it is not that command's output).
pub fn memory(config: &str) -> Option<Memory> {
    let line = config.lines().find(|l| l.split('=').next().is_some_and(|k| k.trim() == "SelectTypeParameters"))?;
    let value = line.split_once('=').map_or("", |(_, v)| v.trim()).to_ascii_uppercase();
    Some(if value.split(',').any(|p| p.trim().ends_with("MEMORY")) { Memory::Counted } else { Memory::NotCounted })
}

/// MiB in the `mem=` item of a TRES string (`cpu=1,mem=500G,node=1,billing=1`, as
/// `squeue --json`'s `tres_req_str` gives what Slurm counts for a job over all its nodes).
pub fn tres_mem_mib(tres: &str) -> Option<u64> {
    let value = tres.split(',').find_map(|item| item.trim().strip_prefix("mem="))?;
    let digits = value.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: f64 = digits.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let scale = match &value[digits.len()..] {
        "" | "M" => 1.0,
        "K" => 1.0 / 1024.0,
        "G" => 1024.0,
        "T" => 1024.0 * 1024.0,
        "P" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let mib = (n * scale).ceil();
    // Past 2^53 a double is not whole: no node has that much memory anyway.
    (mib < 9.0e15).then_some(mib as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_counted_under_cr_memory_and_not_otherwise() {
        let line = |v: &str| format!("SchedulerType           = sched/backfill\nSelectTypeParameters    = {v}\n");
        assert_eq!(memory(&line("CR_CORE_MEMORY")), Some(Memory::Counted));
        assert_eq!(memory(&line("CR_Socket_Memory,CR_ONE_TASK_PER_CORE")), Some(Memory::Counted));
        assert_eq!(memory(&line("CR_CORE")), Some(Memory::NotCounted));
        assert_eq!(memory(&line("CR_CPU,OTHER_CONS_RES")), Some(Memory::NotCounted));
        assert_eq!(memory("Configuration data as of 2026-11-29T04:00:00\n"), None);
    }

    #[test]
    fn the_memory_of_a_tres_string_in_mib() {
        assert_eq!(tres_mem_mib("cpu=1,mem=500G,node=1,billing=1"), Some(512_000));
        assert_eq!(tres_mem_mib("cpu=4,mem=400M,node=1"), Some(400));
        assert_eq!(tres_mem_mib("mem=1.5T"), Some(1_572_864));
        assert_eq!(tres_mem_mib("mem=2048"), Some(2048));
        assert_eq!(tres_mem_mib("cpu=1,node=1"), None);
        assert_eq!(tres_mem_mib("mem=-1G"), None);
        assert_eq!(tres_mem_mib("mem=1X"), None);
        assert_eq!(tres_mem_mib("mem=1e300T"), None);
    }
}
