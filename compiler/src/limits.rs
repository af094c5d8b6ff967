//! Every count gpol accepts has a documented limit, checked where the input is read and
//! refused with "too large, at most N" — never clamped. The limits are defined here, once,
//! and listed in docs/limits.md; each section belongs to one stage.

// ---- Policy text: parsing --------------------------------------------------------------

/// Brackets, braces and `if`s nest at most this deep (E0002).
pub const MAX_NESTING: usize = 64;

/// One expression has at most this many operators and operands, and this many levels (E0002).
pub const MAX_EXPR_DEPTH: u32 = 256;

// ---- Policy checking and lowering ------------------------------------------------------

/// Topology levels a cluster may declare.
pub const MAX_LEVELS: usize = 8;

/// Steps of constant evaluation (expressions evaluated, across every call) one constant
/// expression may take (E0041).
pub const MAX_CONST_EVAL_STEPS: u64 = 1_000_000;

/// Expressions lowered to IR for a whole policy, counting each inlined copy of a function
/// body and each unrolled item of a literal list (E0041). It bounds the size of the IR
/// and the native code, whatever the source's size.
pub const MAX_LOWERING_STEPS: u64 = 1_000_000;

/// Quota statements with a window (`from 22:00 to 07:00`) one policy may have (E0045):
/// each cuts the week into at most 16 more phases, and every phase is checked.
pub const MAX_QUOTA_WINDOWS: usize = 256;

/// Worst-case operations one evaluation of one rule may take, counting every loop at its
/// list's limit (E0042). `gpolc check --costs` prints each rule's bound.
pub const MAX_RULE_COST: u64 = 100_000_000;

// ---- Diagnostics -----------------------------------------------------------------------

/// Diagnostics of one code printed for people before the rest are summarised in a line
/// (`gpolc check --max-diagnostics` changes it; JSON output always has them all).
pub const MAX_DIAGNOSTICS_PER_CODE: usize = 100;

// ---- Test scenarios, clusters and traces -----------------------------------------------

/// Nodes in one cluster: a test's, a cluster file's, an import's, `gpolc bench --nodes`.
pub const MAX_NODES: u32 = 100_000;

/// Replicas of one job (a gang).
pub const MAX_REPLICAS: u32 = 100_000;

/// CPU cores of one node, or asked for by one replica.
pub const MAX_CPU_CORES: u64 = 100_000;

/// Bytes of memory of one node or card, or asked for by one replica: 64 TiB. With at most
/// [`MAX_NODES`] nodes, every sum over a cluster fits in 64 bits.
pub const MAX_MEMORY_BYTES: u64 = 64 << 40;

/// Jobs sharing one card by time-slicing or MPS (`max_clients`).
pub const MAX_CLIENTS_PER_CARD: u32 = 1024;

/// GPUs (cards) one node may have: the length of `node.cards_list`.
pub const MAX_CARDS_PER_NODE: u32 = 64;

/// GPU models one job may list as allowed: the length of `job.allowed_models`.
pub const MAX_ALLOWED_MODELS: u32 = 64;

/// Request shapes in `cluster.task_shapes`.
pub const MAX_TASK_SHAPES: u32 = 64;

/// How far the scheduler's clock may run from its start, in milliseconds: 100 years.
/// Every time in a trace, every duration and the sum of a test's `advance`s is checked
/// against it, so the clock never wraps around.
pub const MAX_CLOCK_MS: u64 = 36_525 * 24 * 3600 * 1000;

/// Nodes one `node n[A..B]` range of a test may declare.
pub const MAX_RANGE_NODES: u32 = 100_000;

/// Host names the Slurm hostlists of one document may expand to, all together: one
/// `squeue --json` (every job's `nodes` and `required_nodes`) or one `topology.conf`. One
/// hostlist names at most [`MAX_NODES`], but a document holds many: 2,000 jobs each on
/// `n[0-99999]` fit in 600 KB and would be 200 million names (past 8 GB). Each name held
/// costs about 40 bytes: a `gpolc slurm plan` that reaches the budget peaks at 171 MB
/// (measured). A cluster at the node limit running eight jobs on every node, with as many
/// waiting pinned to their nodes, names 1.6 million.
pub const MAX_HOSTLIST_NAMES_PER_DOCUMENT: usize = 4_000_000;

/// Bytes of text one cluster of the C ABI may hold (`gpol_cluster_new`): its nodes'
/// names, models, labels, topology entries and MIG profile names, each string counted
/// with [`CLUSTER_BYTES_PER_STRING`] more. Every per-item limit can hold while their
/// product does not (1,200 nodes of 1,024 labels of 4 KiB are 10 GB): this bounds the
/// whole, about 10 KB a node at the most nodes.
pub const MAX_CLUSTER_TEXT_BYTES: u64 = 1 << 30;

/// What holding one string costs beyond its bytes, as [`MAX_CLUSTER_TEXT_BYTES`] counts
/// it: its handle, its allocation's header and an index entry. Without it, a million
/// empty labels would cost nothing.
pub const CLUSTER_BYTES_PER_STRING: u64 = 64;

/// Characters of one Kubernetes quantity (`256Gi`, `500m`). The API server writes at
/// most about 30; a longer one is refused as too large rather than read digit by digit.
pub const MAX_QUANTITY_BYTES: usize = 256;

// ---- Files read and written ------------------------------------------------------------

/// Bytes of one policy or library file.
pub const MAX_POLICY_BYTES: u64 = 16 << 20;

/// Bytes of one trace file (a five-million-row trace is about 500 MB). A native trace in
/// arrival order is streamed, so this bounds the work of a run, not its memory.
pub const MAX_INPUT_BYTES: u64 = 2 << 30;

/// Bytes of one cluster file. JSON node lists are parsed whole, at about twenty times
/// their size in memory; 100,000 kubectl nodes take about 40 MiB.
pub const MAX_CLUSTER_BYTES: u64 = 64 << 20;

/// Cases one `gpolc diff` plays at most (`--budget`): about three hours on two cores.
pub const MAX_DIFF_CASES: u64 = 50_000_000;

/// Seconds one `gpolc diff` searches at most (`--budget 30s`): a day.
pub const MAX_DIFF_SECONDS: u64 = 86_400;

/// Cases of `gpolc diff`'s exhaustive small-cluster domain at most (`--bound`): each is
/// 24 bytes held while they are played, so 2,000,000 take 48 MB.
pub const MAX_DIFF_BOUND: u64 = 2_000_000;

/// Bytes of the decisions one `gpolc sim --decisions` run records (held until the run
/// ends, then written whole): about ten million decisions.
pub const MAX_DECISIONS_BYTES: u64 = 1 << 30;

// ---- Checks every reader shares ------------------------------------------------------

/// A number read from some input that gpol does not accept, with the text it was read
/// from (unescaped: readers that show it to people escape it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitError {
    /// Not a whole number from 0 up: a fraction, a negative or not a number at all.
    NotWhole { text: String },
    /// Over its limit (refused, never clamped).
    TooLarge { text: String, limit: Limit },
}

/// The limit a number went over, and so how the error states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// A count: "at most 64".
    Count(u64),
    /// Bytes, stated in TiB: "at most 64TiB".
    Bytes(u64),
    /// CPU cores: "at most 100000 cores".
    Cores(u64),
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitError::NotWhole { text } => write!(f, "expected a whole number, found `{text}`"),
            LimitError::TooLarge { text, limit } => write!(f, "`{text}` is too large, at most {limit}"),
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Count(max) => write!(f, "{max}"),
            Limit::Bytes(max) => write!(f, "{}TiB", max >> 40),
            Limit::Cores(max) => write!(f, "{max} cores"),
        }
    }
}

impl std::error::Error for LimitError {}

fn too_large(text: &str, limit: Limit) -> LimitError {
    LimitError::TooLarge { text: text.to_string(), limit }
}

/// A number of bytes read some other way, checked against the memory limit.
pub fn within_bytes(b: f64, text: &str) -> Result<u64, LimitError> {
    if b > MAX_MEMORY_BYTES as f64 {
        return Err(too_large(text, Limit::Bytes(MAX_MEMORY_BYTES)));
    }
    Ok(b as u64)
}

/// A number of cores read some other way, as milli-cores, checked against the limit.
pub fn within_cores(cores: f64, text: &str) -> Result<u64, LimitError> {
    if cores > MAX_CPU_CORES as f64 {
        return Err(too_large(text, Limit::Cores(MAX_CPU_CORES)));
    }
    Ok((cores * 1000.0).round() as u64)
}

/// A whole number from 0 to `max`: a fraction is an error, never rounded, and so is a
/// value over the limit, never clamped.
pub fn whole(value: f64, text: &str, max: u64) -> Result<u64, LimitError> {
    if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0) {
        return Err(LimitError::NotWhole { text: text.to_string() });
    }
    if value > max as f64 {
        return Err(too_large(text, Limit::Count(max)));
    }
    Ok(value as u64)
}

/// A count written as text (`8`, `1e3`), from 0 to `max`.
pub fn count(text: &str, max: u64) -> Result<u64, LimitError> {
    let value: f64 = text.trim().parse().map_err(|_| LimitError::NotWhole { text: text.to_string() })?;
    whole(value, text, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_what_was_expected_and_the_limit() {
        let text = |r: Result<u64, LimitError>| r.expect_err("refused").to_string();
        assert_eq!(text(count("2.5", 8)), "expected a whole number, found `2.5`");
        assert_eq!(text(count("many", 8)), "expected a whole number, found `many`");
        assert_eq!(text(count("9", 8)), "`9` is too large, at most 8");
        assert_eq!(text(within_bytes(1e15, "1PB")), "`1PB` is too large, at most 64TiB");
        assert_eq!(text(within_cores(1e6, "1e6")), "`1e6` is too large, at most 100000 cores");
        assert_eq!((count(" 1e3 ", 1000), within_cores(1.5, "1.5")), (Ok(1000), Ok(1500)));
    }
}
