//! The job model on Slurm: how a Slurm job's request (`job_desc` in `job_submit.lua`,
//! Slurm 22.05) becomes the job gpol's rules read, and back. One mapping, written twice:
//! in Lua for `job_submit.lua` ([`LUA_JOB`]) and in Rust for the way back
//! ([`job_desc`]), which the tests hold to each other. docs/slurm.md has the table.
//!
//! | gpol | Slurm |
//! |---|---|
//! | `queue` | the account (`--account`, else the user's default); or, when asked ([`QueueFrom::Partition`]), the partition (`--partition`, else the default partition; a list of several is refused at submission) |
//! | `priority_class`, `priority` | the QOS when the policy has a class of that name, and its value (else none, 0) |
//! | `whole_cards`, `allowed_models` | GPUs per node, and their type: `--gres=gpu[:TYPE]:N` (`tres_per_node`), else `--gpus=[TYPE:]N` ÷ nodes, rounded up, else `--gpus-per-task=[TYPE:]N` × `--ntasks-per-node`, or × `--ntasks` (1 when not given) ÷ nodes, rounded up; each list read as Slurm 22.05 reads it ([`gpus`]: a type's last count, counts of 0 skipped, suffixes), the type through gpol's model table; a negative count or two types refused ([`BadRequest`]) |
//! | `replicas`, `min_replicas` | `--nodes` (`min_nodes`; 1 when not given) |
//! | `total_gpus` | `whole_cards × replicas` |
//! | `cpu` | CPUs per node: `min_cpus ÷ nodes` (Slurm's default is one per node) |
//! | `mem` | memory per node: `--mem` (`min_mem_per_node`, MiB), or `--mem-per-cpu` × CPUs |
//! | `expected_duration` | `--time` (`time_limit`, minutes; absent when unlimited or not given) |
//! | `name`, `user` | the job name, the user name |
//! | `labels` | `--comment "key=value,key=value"` |
//! | `bursty`, `latency_critical`, `preemptible` | labels of those names set to `true` |
//! | `gpu_fraction` | `--gres=shard:K` ÷ the cluster's shards per card (in the loop, which knows the nodes) |
//! | `utilization` | 1 |
//!
//! What a job does not carry at submission (`id`, `submitted`, fractions of cards through
//! shards — the shards per card are the nodes' —, MIG profiles, GPU memory) is not in the
//! Lua model: rules reading it are not compiled.

use crate::gres::{self, GresError};
use crate::lua;
use gpol_compiler::models;
use gpol_compiler::spec::{self, JobSpec, NodeSpec, Sharing};

/// Which of a Slurm job's names is its gpol queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueFrom {
    /// The account (`--account`): Slurm's association tree is gpol's queue tree.
    #[default]
    Account,
    /// The partition (`--partition`): sites whose teams each submit to a partition.
    Partition,
}

impl QueueFrom {
    /// Its name in options and in `job_submit.lua`.
    pub fn name(self) -> &'static str {
        match self {
            QueueFrom::Account => "account",
            QueueFrom::Partition => "partition",
        }
    }
}

/// A name that is neither `account` nor `partition`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownQueueFrom(pub String);

impl std::fmt::Display for UnknownQueueFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "expected `account` or `partition`, not `{}`", self.0)
    }
}

impl std::error::Error for UnknownQueueFrom {}

impl std::str::FromStr for QueueFrom {
    type Err = UnknownQueueFrom;
    fn from_str(s: &str) -> Result<QueueFrom, UnknownQueueFrom> {
        match s {
            "account" => Ok(QueueFrom::Account),
            "partition" => Ok(QueueFrom::Partition),
            _ => Err(UnknownQueueFrom(s.to_string())),
        }
    }
}

/// What reading a request as a job depends on besides the request: the policy's priority
/// classes (a QOS that names none of them gives no class), the cluster's shards per card
/// (which turn shards into a fraction of a card), and where the queue comes from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub classes: Vec<String>,
    pub shards_per_card: Option<u32>,
    pub queue_from: QueueFrom,
    /// Whether Slurm allocates memory (`scontrol show config`).
    pub memory: crate::config::Memory,
}

impl Reading {
    /// The reading for a policy's `classes` on `nodes`: shards per card are the
    /// time-sliced nodes' (through `shard` GRES) when they agree; when they differ, shard
    /// requests are not read, and the second value says so.
    pub fn new<'a>(
        classes: Vec<String>,
        nodes: impl IntoIterator<Item = &'a NodeSpec>,
        queue_from: QueueFrom,
    ) -> (Reading, Option<String>) {
        let mut per_card: Vec<u32> =
            nodes.into_iter().filter(|n| n.sharing == Sharing::Timeslice).map(|n| n.max_clients).collect();
        per_card.sort_unstable();
        per_card.dedup();
        let (shards_per_card, warning) = match per_card[..] {
            [one] => (Some(one), None),
            [] => (None, None),
            _ => (None, Some("the time-sliced nodes differ in shards per card: shard requests are not read".into())),
        };
        (Reading { classes, shards_per_card, queue_from, memory: crate::config::Memory::default() }, warning)
    }
}

/// `gpol.job(job_desc)`: the job as gpol's rules read it.
pub const LUA_JOB: &str = r#"-- The job as gpol's rules read it, from Slurm's job_desc (docs/slurm.md, "The job model").
local NO_VAL = 4294967294
local function given(v) return type(v) == "number" and v < NO_VAL end
-- Counts Slurm keeps in 16 bits (tasks per node) are unset at NO_VAL16.
local function given16(v) return type(v) == "number" and v < 65534 end

-- GRES counts as Slurm 22.05 reads them (gres.c: strtoull, then a suffix of any case).
local GRES_MULTIPLE = { [""] = 1, k = 1024, kib = 1024, kb = 1e3, m = 1048576, mib = 1048576, mb = 1e6,
  g = 1073741824, gib = 1073741824, gb = 1e9, t = 1099511627776, tib = 1099511627776, tb = 1e12,
  p = 1125899906842624, pib = 1125899906842624, pb = 1e15 }

-- A count; nil when the text is none (it is then a type); nil and why for a negative one,
-- which Slurm would read as 2^64 less it.
function gpol.gres_count(text)
  local sign, digits, suffix = string.match(text, "^%s*([+-]?)(%d*)(.*)$")
  if digits == "" then
    if GRES_MULTIPLE[string.lower(text)] then return 0 end
    return nil
  end
  local multiple = GRES_MULTIPLE[string.lower(suffix)]
  if multiple == nil then return nil end
  if sign == "-" then return nil, "a negative count" end
  return tonumber(digits) * multiple
end

-- One GRES: NAME, NAME:COUNT, NAME:TYPE (one) or NAME:TYPE:COUNT, after "gres:" or "gres/".
-- Its name, type and count; or nil and why Slurm would refuse it.
function gpol.gres_item(item)
  local spec = string.gsub(item, "^gres[:/]", "")
  local function bad(why) return nil, nil, nil, "`" .. spec .. "`: " .. why end
  local colon = string.find(spec, ":", 1, true)
  if colon == nil then return spec, nil, 1 end
  local name, rest = string.sub(spec, 1, colon - 1), string.sub(spec, colon + 1)
  local colon2 = string.find(rest, ":", 1, true)
  if colon2 == nil then
    if rest == "" then return bad("no count or type after `:`") end
    local n, why = gpol.gres_count(rest)
    if why then return bad(why) end
    if n then return name, nil, n end
    return name, rest, 1
  end
  local kind, count = string.sub(rest, 1, colon2 - 1), string.sub(rest, colon2 + 1)
  if kind == "" or count == "" then return bad("an empty type or count") end
  local n, why = gpol.gres_count(count)
  if why then return bad(why) end
  if n == nil then return bad("`" .. count .. "` is not a count") end
  return name, kind, n
end

-- The count of GRES `name` a TRES list ("gres:gpu:h100:4,gres:shard:2") asks for, and its
-- type, as Slurm reads the list: every item checked, an item of count 0 no GRES, the same
-- type twice its last count (gpu:4,gpu:2 is 2), two types both asked for — which gpol's
-- one-model jobs cannot be. nil and why for a list gpol cannot read.
function gpol.gres(tres, name)
  local found, order = {}, {}
  for item in string.gmatch(tres or "", "[^,]+") do
    local n, kind, count, why = gpol.gres_item(item)
    if why then return nil, nil, why end
    if n == name and count > 0 then
      local key = kind or ""
      if found[key] == nil then order[#order + 1] = key end
      found[key] = count
    end
  end
  if #order == 0 then return 0, nil end
  if #order > 1 then
    local kinds = {}
    for i, k in ipairs(order) do kinds[i] = (k == "" and "untyped") or k end
    return nil, nil, name .. " of more than one type (" .. table.concat(kinds, ", ") .. "): gpol reads one"
  end
  local kind = order[1]
  if kind == "" then kind = nil end
  return found[order[1]], kind
end

-- gpol's name for a GPU type, through its model table (compiler/src/models.rs), as a
-- node's GRES type is read: "a100_80g" is "a100", "nvidia_h100_80gb_hbm3" "h100".
function gpol.model_name(product)
  local text = string.match(product, "^%s*(.-)%s*$")
  if string.sub(text, -7) == "-SHARED" then text = string.sub(text, 1, -8) end
  local mig = string.find(text, "-MIG-", 1, true)
  if mig then text = string.sub(text, 1, mig - 1) end
  local stem = string.gsub(string.lower(text), "[ _]", "-")
  for _, prefix in ipairs({ "nvidia-", "tesla-", "geforce-" }) do
    if string.sub(stem, 1, #prefix) == prefix then stem = string.sub(stem, #prefix + 1) end
  end
  for _, entry in ipairs(gpol.model_table) do
    local s = entry[1]
    if stem == s or string.sub(stem, 1, #s + 1) == s .. "-" then return entry[2] end
  end
  return stem
end

-- GPUs per node and their type from a TRES list; 0, nil and why for one gpol cannot read.
function gpol.gpus(tres)
  local cards, model, why = gpol.gres(tres, "gpu")
  if why then return 0, nil, why end
  if model then model = gpol.model_name(model) end
  return cards, model
end

-- The partition a job asked for, else the default partition; nil for a list of several
-- (the job's queue would be whichever partition it starts in).
function gpol.partition(job_desc, part_list)
  local asked, n = nil, 0
  for p in string.gmatch(job_desc.partition or "", "[^,%s]+") do asked, n = asked or p, n + 1 end
  if n > 1 then return nil end
  if asked then return asked end
  for _, part in pairs(part_list or {}) do
    if part.flag_default ~= nil and part.flag_default ~= 0 then return part.name end
  end
  return ""
end

-- Labels from the comment: "key=value,key=value".
function gpol.labels(comment)
  local labels = {}
  for item in string.gmatch(comment or "", "[^,]+") do
    local k, v = string.match(item, "^%s*([^=]-)%s*=%s*(.-)%s*$")
    if k and k ~= "" then labels[k] = v end
  end
  return labels
end

function gpol.job(job_desc, part_list)
  local job = {}
  job.name = job_desc.name or ""
  job.user = job_desc.user_name or ""
  if gpol.queue_from == "partition" then job.queue = gpol.partition(job_desc, part_list)
  else job.queue = job_desc.account or job_desc.default_account or "" end
  -- A QOS that names none of the policy's classes gives no class.
  local qos = job_desc.qos or job_desc.default_qos or ""
  job.priority_class = gpol.classes[qos] and qos or ""
  job.priority = gpol.classes[qos] or 0
  job.replicas = given(job_desc.min_nodes) and math.max(job_desc.min_nodes, 1) or 1
  -- Every list is read, whichever gives the cards: one Slurm would refuse is refused
  -- (`job.unreadable` says why, and which option asked it).
  local per_node = job_desc.tres_per_node or job_desc.gres
  local lists = { { per_node, "--gres" }, { job_desc.tres_per_job, "--gpus" },
    { job_desc.tres_per_task, "--gpus-per-task" } }
  for _, list in ipairs(lists) do
    local _, _, why = gpol.gpus(list[1])
    if why == nil and list[2] == "--gres" then _, _, why = gpol.gres(list[1], "shard") end
    if why and job.unreadable == nil then job.unreadable = why .. " (" .. list[2] .. ")" end
  end
  local cards, model = gpol.gpus(per_node)
  if cards == 0 then
    -- `--gpus=N` over the whole job: N ÷ nodes per node, rounded up.
    local total, m = gpol.gpus(job_desc.tres_per_job)
    if total > 0 then cards, model = math.ceil(total / job.replicas), m end
  end
  if cards == 0 then
    -- `--gpus-per-task=N`: N × tasks per node, or N × tasks ÷ nodes, rounded up.
    local per_task, m = gpol.gpus(job_desc.tres_per_task)
    if per_task > 0 then
      if given16(job_desc.ntasks_per_node) then cards = per_task * job_desc.ntasks_per_node
      else cards = math.ceil(per_task * (given(job_desc.num_tasks) and job_desc.num_tasks or 1) / job.replicas) end
      model = m
    end
  end
  job.whole_cards = cards
  job.allowed_models = {}
  if model and cards > 0 then job.allowed_models = { model } end
  job.min_replicas = job.replicas
  job.total_gpus = job.whole_cards * job.replicas
  job.cpu = given(job_desc.min_cpus) and job_desc.min_cpus / job.replicas or 0
  local mib = 1048576
  if given(job_desc.min_mem_per_node) then job.mem = job_desc.min_mem_per_node * mib
  elseif given(job_desc.min_mem_per_cpu) then job.mem = job_desc.min_mem_per_cpu * job.cpu * mib
  else job.mem = 0 end
  if given(job_desc.time_limit) then job.expected_duration = job_desc.time_limit * 60 end
  job.labels = gpol.labels(job_desc.comment)
  job.bursty = job.labels["bursty"] == "true"
  job.latency_critical = job.labels["latency_critical"] == "true"
  job.preemptible = job.labels["preemptible"] == "true"
  job.utilization = 1
  return job
end
"#;

/// Why a job cannot be written as a Slurm request exactly.
#[derive(Debug, PartialEq)]
pub struct Inexact(pub &'static str);

/// A Slurm job's request as `job_desc` (at submission) and `squeue --json` (after) show
/// it: what the job model reads, in Slurm's units.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub name: String,
    pub user: String,
    pub account: String,
    /// The partition, or the partitions it may run in (`gpu,debug`), or empty.
    pub partition: String,
    pub qos: String,
    /// `gres:gpu:4`, `gres:gpu:h100:8`, or empty.
    pub tres_per_node: String,
    /// GPUs over the whole job (`--gpus=N`), read when none are asked per node.
    pub tres_per_job: String,
    /// GPUs per task (`--gpus-per-task=N`), read when none are asked per node or job.
    pub tres_per_task: String,
    /// Tasks over the whole job (`--ntasks`) and per node (`--ntasks-per-node`), when given.
    pub tasks: Option<u64>,
    pub tasks_per_node: Option<u64>,
    /// Nodes asked for (at least 1).
    pub nodes: u32,
    /// CPUs over all nodes, when given.
    pub cpus: Option<u64>,
    pub mem_per_node_mib: Option<u64>,
    pub mem_per_cpu_mib: Option<u64>,
    /// The memory Slurm counts for the job over all its nodes (its requested TRES), in
    /// MiB: when neither of the above is given, Slurm's default (`DefMemPerCPU`,
    /// `DefMemPerNode`, `DefMemPerGPU`) or the whole node's memory.
    pub mem_counted_mib: Option<u64>,
    pub time_limit_min: Option<u64>,
    pub comment: String,
}

/// gpol's model table (compiler/src/models.rs) as the Lua table `gpol.model_table`, which
/// `gpol.model_name` reads: a job's GPU type is read through it, as a node's is.
pub fn lua_model_table() -> String {
    let rows: Vec<String> = models::TABLE
        .chunks(4)
        .map(|row| {
            let pairs: Vec<String> =
                row.iter().map(|(stem, name)| format!("{{ {}, {} }}", lua::string(stem), lua::string(name))).collect();
            format!("  {},\n", pairs.join(", "))
        })
        .collect();
    format!(
        "-- gpol's GPU model table: product stems, most specific first, and gpol's name for each.\n\
         gpol.model_table = {{\n{}}}\n\n",
        rows.concat()
    )
}

/// Why a request cannot be read as Slurm reads it: the field, and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRequest {
    /// The `job_desc` / `squeue --json` field: `tres_per_node`, `tres_per_job`, `tres_per_task`.
    pub field: &'static str,
    pub problem: GresError,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.field, crate::command::printable(&self.problem.to_string()))
    }
}

impl std::error::Error for BadRequest {}

/// GPUs and their type a TRES list asks for (`gres:gpu:4`, `gres/gpu:a100:4`, `gpu`,
/// comma-separated), as `gpol.gpus` reads it; the type through gpol's model table (as a
/// node's GRES type is: `a100_80g` is `a100`). A count past 32 bits is the largest.
pub fn gpus(tres: &str) -> Result<(u32, Option<String>), GresError> {
    let (n, kind) = gres::requested(tres, "gpu")?;
    Ok((u32::try_from(n).unwrap_or(u32::MAX), kind.map(models::name)))
}

/// Shards per node a TRES list asks for (`gres:shard:4`, `gres/shard:h100:4`).
pub fn shards(tres: &str) -> Result<u32, GresError> {
    let (n, _) = gres::requested(tres, "shard")?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Labels from a comment (`key=value,key=value`), as `gpol.labels` reads them.
pub fn labels(comment: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in comment.split(',') {
        let Some((k, v)) = item.split_once('=') else { continue };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() {
            continue;
        }
        out.retain(|(x, _)| x != k);
        out.push((k.to_string(), v.to_string()));
    }
    out
}

impl Request {
    /// The queue: the account, or the partition (the first of a list: a job waiting
    /// for any of several, which `job_submit.lua` refuses when queues are partitions).
    pub fn queue(&self, from: QueueFrom) -> &str {
        match from {
            QueueFrom::Account => &self.account,
            QueueFrom::Partition => self.partition.split(',').map(str::trim).find(|p| !p.is_empty()).unwrap_or(""),
        }
    }

    /// The job gpol's rules read (the Rust half of [`LUA_JOB`]), as `reading` says: a
    /// request of shards is a fraction of a card (a whole card or more of them: whole
    /// cards, rounded up). A request Slurm would refuse, or that asks for GPUs of two types,
    /// is [`BadRequest`] (as `job_submit.lua` refuses it).
    pub fn job(&self, reading: &Reading) -> Result<JobSpec, BadRequest> {
        let shards_per_card = reading.shards_per_card;
        let mut j = JobSpec::named(self.name.clone());
        j.user = Some(self.user.clone()).filter(|u| !u.is_empty());
        j.queue = Some(self.queue(reading.queue_from).to_string()).filter(|a| !a.is_empty());
        j.priority_class = reading.classes.iter().find(|c| **c == self.qos).cloned();
        j.replicas = self.nodes.max(1);
        // Every list is read, whichever gives the cards: one Slurm refuses is refused here,
        // in the order `gpol.job` reads them.
        let bad = |field: &'static str| move |problem| BadRequest { field, problem };
        let per_node = gpus(&self.tres_per_node).map_err(bad("tres_per_node"))?;
        let shards = shards(&self.tres_per_node).map_err(bad("tres_per_node"))?;
        let per_job = gpus(&self.tres_per_job).map_err(bad("tres_per_job"))?;
        let per_task = gpus(&self.tres_per_task).map_err(bad("tres_per_task"))?;
        let (mut cards, mut model) = per_node;
        if cards == 0 {
            let (total, m) = per_job;
            (cards, model) = (total.div_ceil(j.replicas), m);
        }
        if cards == 0 {
            let (per_task, m) = per_task;
            let per_node = match self.tasks_per_node {
                Some(t) => u64::from(per_task) * t,
                None => (u64::from(per_task) * self.tasks.unwrap_or(1)).div_ceil(u64::from(j.replicas)),
            };
            (cards, model) = (u32::try_from(per_node).unwrap_or(u32::MAX), m);
        }
        j.request = match shards_per_card.filter(|&s| s > 0) {
            _ if cards > 0 => spec::Request::Whole(cards),
            Some(per_card) if shards > 0 && shards < per_card => {
                let milli = (u64::from(shards) * 1000 / u64::from(per_card)).clamp(1, 999);
                spec::Request::Fraction(u32::try_from(milli).unwrap_or(999))
            }
            Some(per_card) if shards > 0 => spec::Request::Whole(shards.div_ceil(per_card)),
            _ => spec::Request::None,
        };
        j.models = if cards > 0 { model.into_iter().collect() } else { Vec::new() };
        let per_node_cpu = self.cpus.map_or(0, |c| c.saturating_mul(1000) / u64::from(j.replicas));
        j.cpu_milli = per_node_cpu;
        j.mem = match (reading.memory, self.mem_per_node_mib, self.mem_per_cpu_mib) {
            // Slurm allocates no memory: jobs share it.
            (crate::config::Memory::NotCounted, _, _) => 0,
            // Saturating: a count past the job model's limits is refused there, never wrapped.
            (_, Some(m), _) => m.saturating_mul(1 << 20),
            (_, None, Some(m)) => m.saturating_mul(1 << 20).saturating_mul(per_node_cpu) / 1000,
            // Asked for none: what Slurm counts (a default, or the whole node), per node.
            (_, None, None) => self.mem_counted_mib.map_or(0, |m| m.saturating_mul(1 << 20) / u64::from(j.replicas)),
        };
        j.duration_ms = self.time_limit_min.map(|m| m * 60_000);
        let mut labels = labels(&self.comment);
        let flag = |labels: &[(String, String)], f: &str| labels.iter().any(|(k, v)| k == f && v == "true");
        (j.bursty, j.latency_critical, j.preemptible) =
            (flag(&labels, "bursty"), flag(&labels, "latency_critical"), flag(&labels, "preemptible"));
        labels.retain(|(k, v)| !v.is_empty() && !["bursty", "latency_critical", "preemptible"].contains(&k.as_str()));
        j.labels = labels;
        Ok(j)
    }

    /// The request for a job, for jobs Slurm can express exactly (whole cards, whole CPUs,
    /// memory in MiB, durations in minutes, at most one GPU model, labels without `,` or
    /// `=`): the way back of [`Request::job`] (the queue as the account or the partition,
    /// as `reading` says). A fraction of a card is `shard`s of the cluster's shards per
    /// card, when it is a whole number of them.
    pub fn of(job: &JobSpec, reading: &Reading) -> Result<Request, Inexact> {
        let shards_per_card = reading.shards_per_card;
        let replicas = job.replicas.max(1);
        let queue = job.queue.clone().unwrap_or_default();
        let mut r = Request {
            name: job.name.clone(),
            user: job.user.clone().unwrap_or_default(),
            qos: job.priority_class.clone().unwrap_or_default(),
            nodes: replicas,
            ..Request::default()
        };
        match reading.queue_from {
            QueueFrom::Account => r.account = queue,
            QueueFrom::Partition => r.partition = queue,
        }
        if job.priority.is_some() {
            return Err(Inexact("a priority of its own (Slurm takes it from the QOS)"));
        }
        r.tres_per_node = match (job.request, job.models.as_slice()) {
            (spec::Request::None, _) => String::new(),
            (spec::Request::Whole(n), []) => format!("gres:gpu:{n}"),
            // A model Slurm would read back as another: not a GRES type, or not gpol's name.
            (spec::Request::Whole(_), [m]) if m.is_empty() || m.contains([',', ':']) || models::name(m) != *m => {
                return Err(Inexact("a GPU model that is not a GRES type gpol reads back as itself"));
            }
            (spec::Request::Whole(n), [m]) => format!("gres:gpu:{m}:{n}"),
            (spec::Request::Whole(_), _) => return Err(Inexact("more than one GPU model")),
            (spec::Request::Fraction(m), []) => match shards_per_card {
                Some(s) if (u64::from(m) * u64::from(s)).is_multiple_of(1000) => {
                    format!("gres:shard:{}", u64::from(m) * u64::from(s) / 1000)
                }
                _ => return Err(Inexact("a fraction of a card that is not a whole number of shards")),
            },
            _ => return Err(Inexact("a fraction of a card or a MIG instance")),
        };
        if job.min_replicas.is_some_and(|m| m != replicas) {
            return Err(Inexact("an elastic gang"));
        }
        if !job.cpu_milli.is_multiple_of(1000) {
            return Err(Inexact("a fraction of a CPU"));
        }
        if job.cpu_milli == 0 {
            return Err(Inexact("no CPU (Slurm gives every node at least one)"));
        }
        r.cpus = Some(job.cpu_milli / 1000 * u64::from(replicas));
        if !job.mem.is_multiple_of(1 << 20) {
            return Err(Inexact("memory that is not whole MiB"));
        }
        if job.mem > 0 {
            r.mem_per_node_mib = Some(job.mem >> 20);
        }
        if let Some(d) = job.duration_ms {
            if !d.is_multiple_of(60_000) || d == 0 {
                return Err(Inexact("a duration that is not whole minutes"));
            }
            r.time_limit_min = Some(d / 60_000);
        }
        if job.utilization != 1.0 || job.gpu_mem != 0 {
            return Err(Inexact("a utilization or GPU memory"));
        }
        let mut labels = job.labels.clone();
        for (flag, on) in
            [("bursty", job.bursty), ("latency_critical", job.latency_critical), ("preemptible", job.preemptible)]
        {
            if labels.iter().any(|(k, _)| k == flag) {
                return Err(Inexact("a label named like a flag"));
            }
            if on {
                labels.push((flag.to_string(), "true".to_string()));
            }
        }
        let clean = |s: &str| !s.contains([',', '=']) && s.trim() == s && !s.is_empty();
        if !labels.iter().all(|(k, v)| clean(k) && clean(v)) {
            return Err(Inexact("a label with `,` or `=`, spaces, or no value"));
        }
        r.comment = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        Ok(r)
    }

    /// As Slurm's `job_desc` for it: a Lua table constructor.
    pub fn lua_table(&self) -> String {
        let mut fields = vec![format!("name = {}", lua::string(&self.name)), format!("min_nodes = {}", self.nodes)];
        let mut text = |k: &str, v: &str| {
            if !v.is_empty() {
                fields.push(format!("{k} = {}", lua::string(v)));
            }
        };
        text("user_name", &self.user);
        text("account", &self.account);
        text("partition", &self.partition);
        text("qos", &self.qos);
        text("tres_per_node", &self.tres_per_node);
        text("tres_per_job", &self.tres_per_job);
        text("tres_per_task", &self.tres_per_task);
        text("comment", &self.comment);
        for (k, v) in [
            ("num_tasks", self.tasks),
            ("ntasks_per_node", self.tasks_per_node),
            ("min_cpus", self.cpus),
            ("min_mem_per_node", self.mem_per_node_mib),
            ("min_mem_per_cpu", self.mem_per_cpu_mib),
            ("time_limit", self.time_limit_min),
        ] {
            if let Some(v) = v {
                fields.push(format!("{k} = {v}"));
            }
        }
        format!("{{ {} }}", fields.join(", "))
    }

    /// `sbatch` options asking for it.
    pub fn sbatch_args(&self) -> Vec<String> {
        let mut a = vec![format!("--job-name={}", self.name), format!("--nodes={}", self.nodes)];
        if !self.account.is_empty() {
            a.push(format!("--account={}", self.account));
        }
        if !self.partition.is_empty() {
            a.push(format!("--partition={}", self.partition));
        }
        if !self.qos.is_empty() {
            a.push(format!("--qos={}", self.qos));
        }
        if let Some(g) = self.tres_per_node.strip_prefix("gres:") {
            a.push(format!("--gres={g}"));
        }
        if let Some(c) = self.cpus {
            a.push(format!("--ntasks={}", self.nodes));
            a.push(format!("--cpus-per-task={}", c / u64::from(self.nodes.max(1))));
        }
        if let Some(m) = self.mem_per_node_mib {
            a.push(format!("--mem={m}"));
        }
        if let Some(m) = self.mem_per_cpu_mib {
            a.push(format!("--mem-per-cpu={m}"));
        }
        if let Some(t) = self.time_limit_min {
            a.push(format!("--time={t}"));
        }
        if !self.comment.is_empty() {
            a.push(format!("--comment={}", self.comment));
        }
        a
    }
}

/// A job as Slurm's `job_desc` for it (see [`Request::of`] for what can be expressed).
pub fn job_desc(job: &JobSpec, reading: &Reading) -> Result<String, Inexact> {
    Request::of(job, reading).map(|r| r.lua_table())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_as_the_lua_reads_them() {
        assert_eq!(gpus("gres:gpu:4"), Ok((4, None)));
        assert_eq!(gpus("gres/gpu:a100:8,gres:shard:2"), Ok((8, Some("a100".into()))));
        assert_eq!(gpus("gpu"), Ok((1, None)));
        assert_eq!(gpus(""), Ok((0, None)));
        assert_eq!(
            labels("team=vision, tier = gold,junk,=x"),
            [("team".into(), "vision".into()), ("tier".into(), "gold".into())]
        );
    }

    #[test]
    fn gres_lists_count_as_slurm_counts_them() {
        // As Slurm 22.05 allocated them (measured: `scontrol show job -d`): the same type
        // asked twice is its last count; a count of 0 is no GRES (and overwrites nothing);
        // a type without a count is one; suffixes multiply.
        let cases = [
            ("gres:gpu:4,gres:gpu:2", 2, None),
            ("gres:gpu:2,gres:gpu:4", 4, None),
            ("gres:gpu:1,gres:gpu:1,gres:gpu:3", 3, None),
            ("gres:gpu:h100:2,gres:gpu:h100:4", 4, Some("h100")),
            ("gres:gpu:4,gres:gpu:0", 4, None),
            ("gres:gpu:h100", 1, Some("h100")),
            ("gres:gpu:h100:0", 0, None),
            ("gres:gpu:0", 0, None),
            ("gres:gpu:1k", 1024, None),
            ("gres:gpu:2KiB", 2048, None),
            ("gres:gpu:1g.5gb:2", 2, Some("1g.5gb")),
            ("gres:gpu:1g.5gb", 1, Some("1g.5gb")),
            ("gres:gpu:k", 0, None),
            ("gres:gpu:+2", 2, None),
            ("gres:gpu:nvidia_h100_80gb_hbm3:8", 8, Some("h100")),
            ("gres:gpu:a100_80g:1", 1, Some("a100")),
            ("gres:shard:4,gres:gpu:2,,", 2, None),
            ("gres:gpu:99999999999999999999", u32::MAX, None),
        ];
        for (list, cards, model) in cases {
            assert_eq!(gpus(list), Ok((cards, model.map(str::to_string))), "{list}");
        }
        let refused = [
            ("gres:gpu:-2", "`gpu:-2`: a negative count"),
            ("gres/gpu:-1", "`gpu:-1`: a negative count"),
            ("gres:gpu:h100:-1", "`gpu:h100:-1`: a negative count"),
            ("gres:shard:-4", "`shard:-4`: a negative count"),
            ("gres:gpu:", "`gpu:`: no count or type after `:`"),
            ("gres:gpu::1", "`gpu::1`: an empty type or count"),
            ("gres:gpu:h100:", "`gpu:h100:`: an empty type or count"),
            ("gres:gpu:h100:x", "`gpu:h100:x`: `x` is not a count"),
            ("gres:gpu:h100:2:1", "`gpu:h100:2:1`: `2:1` is not a count"),
            ("gres:gpu:a100:2,gres:gpu:h100:4", "gpu of more than one type (a100, h100): gpol reads one"),
            ("gres:gpu:h100:4,gres:gpu:2", "gpu of more than one type (h100, untyped): gpol reads one"),
        ];
        for (list, why) in refused {
            assert_eq!(gpus(list).map_err(|e| e.to_string()), Err(why.to_string()), "{list}");
        }
        assert_eq!(
            shards("gres:shard:a:4,gres:shard:b:4").map_err(|e| e.to_string()),
            Err("shard of more than one type (a, b): gpol reads one".into())
        );
    }

    #[test]
    fn a_request_slurm_would_refuse_is_refused_naming_the_field() {
        let r = Request { name: "x".into(), nodes: 1, tres_per_task: "gres:gpu:-1".into(), ..Request::default() };
        let e = r.job(&Reading::default()).expect_err("negative");
        assert_eq!((e.field, e.to_string().as_str()), ("tres_per_task", "`tres_per_task`: `gpu:-1`: a negative count"));
        // Checked whichever list gives the cards, in the order job_submit.lua reads them.
        let r = Request { tres_per_node: "gres:gpu:2,gres:shard:-1".into(), tres_per_job: "gres:gpu:-3".into(), ..r };
        assert_eq!(r.job(&Reading::default()).expect_err("negative").field, "tres_per_node");
        // A type gpol reads back as another is not written.
        let mut j = JobSpec::named("j");
        (j.request, j.models, j.cpu_milli) = (spec::Request::Whole(1), vec!["A100".into()], 1000);
        assert!(Request::of(&j, &Reading::default()).is_err());
        j.models = vec!["a100".into()];
        assert_eq!(Request::of(&j, &Reading::default()).map(|r| r.tres_per_node), Ok("gres:gpu:a100:1".to_string()));
    }

    #[test]
    fn a_job_comes_back_from_its_request() {
        let mut j = JobSpec::named("train");
        (j.user, j.queue, j.priority_class) = (Some("alice".into()), Some("research".into()), Some("urgent".into()));
        (j.request, j.models, j.replicas) = (spec::Request::Whole(8), vec!["h100".into()], 2);
        (j.cpu_milli, j.mem, j.duration_ms) = (32_000, 64 << 30, Some(3_600_000));
        (j.preemptible, j.labels) = (true, vec![("team".into(), "vision".into())]);
        let r = Request::of(&j, &Reading::default()).expect("expressible");
        assert_eq!(r.cpus, Some(64));
        assert_eq!(r.job(&Reading { classes: vec!["urgent".into()], ..Reading::default() }), Ok(j));
        assert!(r.sbatch_args().contains(&"--gres=gpu:h100:8".to_string()));
        // A QOS the policy does not declare is no class.
        assert_eq!(r.job(&Reading::default()).expect("readable").priority_class, None);
        // GPUs asked for the whole job count per node.
        let whole_job =
            Request { tres_per_node: String::new(), tres_per_job: "gres:gpu:a100:12".into(), nodes: 2, ..r };
        let j = whole_job.job(&Reading::default()).expect("readable");
        assert_eq!((j.request, j.models), (spec::Request::Whole(6), vec!["a100".to_string()]));
    }

    #[test]
    fn shards_are_fractions_of_a_card() {
        assert_eq!(
            (shards("gres:shard:4"), shards("gres/shard:h100:16"), shards("gres:gpu:2")),
            (Ok(4), Ok(16), Ok(0))
        );
        let mut j = JobSpec::named("notebook");
        (j.request, j.cpu_milli) = (spec::Request::Fraction(250), 1000);
        let r =
            Request::of(&j, &Reading { shards_per_card: Some(8), ..Reading::default() }).expect("two shards of eight");
        assert_eq!(r.tres_per_node, "gres:shard:2");
        assert_eq!(r.job(&Reading { shards_per_card: Some(8), ..Reading::default() }), Ok(j.clone()));
        assert!(
            Request::of(&j, &Reading::default()).is_err()
                && Request::of(&j, &Reading { shards_per_card: Some(6), ..Reading::default() }).is_err()
        );
        // Without the cluster's shards per card, or asking a card's worth or more.
        assert_eq!(r.job(&Reading::default()).expect("readable").request, spec::Request::None);
        let all = Request { tres_per_node: "gres:shard:12".into(), ..r };
        assert_eq!(
            all.job(&Reading { shards_per_card: Some(8), ..Reading::default() }).expect("readable").request,
            spec::Request::Whole(2)
        );
    }
}
