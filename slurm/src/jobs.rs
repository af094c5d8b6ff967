//! The job model on Slurm: how a Slurm job's request (`job_desc` in `job_submit.lua`,
//! Slurm 22.05) becomes the job gpol's rules read, and back. One mapping, written twice:
//! in Lua for `job_submit.lua` ([`LUA_JOB`]) and in Rust for the way back
//! ([`job_desc`]), which the tests hold to each other. docs/slurm.md has the table.
//!
//! | gpol | Slurm |
//! |---|---|
//! | `queue` | the account (`--account`, else the user's default) |
//! | `priority_class`, `priority` | the QOS, and the policy's value for a class of that name (0 without) |
//! | `whole_cards`, `allowed_models` | GPUs per node, and their type: `--gres=gpu[:TYPE]:N` (`tres_per_node`) |
//! | `replicas`, `min_replicas` | `--nodes` (`min_nodes`; 1 when not given) |
//! | `total_gpus` | `whole_cards × replicas` |
//! | `cpu` | CPUs per node: `min_cpus ÷ nodes` (0 when not given) |
//! | `mem` | memory per node: `--mem` (`min_mem_per_node`, MiB), or `--mem-per-cpu` × CPUs |
//! | `expected_duration` | `--time` (`time_limit`, minutes; absent when unlimited or not given) |
//! | `name`, `user` | the job name, the user name |
//! | `labels` | `--comment "key=value,key=value"` |
//! | `bursty`, `latency_critical`, `preemptible` | labels of those names set to `true` |
//! | `utilization` | 1 |
//!
//! What a job does not carry at submission (`id`, `submitted`, fractions of cards through
//! shards, MIG profiles, GPU memory) is not in the model: rules reading it are not compiled.

use crate::lua;
use gpol_compiler::spec::{JobSpec, Request};

/// `gpol.job(job_desc)`: the job as gpol's rules read it.
pub const LUA_JOB: &str = r#"-- The job as gpol's rules read it, from Slurm's job_desc (docs/slurm.md, "The job model").
local NO_VAL = 4294967294
local function given(v) return type(v) == "number" and v < NO_VAL end

-- GPUs per node and their type from "gres:gpu:4", "gres/gpu:a100:4", "gpu:4" (comma-separated).
function gpol.gpus(tres)
  local cards, model = 0, nil
  for item in string.gmatch(tres or "", "[^,]+") do
    local spec = string.gsub(item, "^gres[:/]", "")
    local name, rest = string.match(spec, "^([^:=]+)[:=]?(.*)$")
    if name == "gpu" then
      local typ, n = string.match(rest, "^([^:]+):(%d+)$")
      if typ then cards, model = tonumber(n), typ
      elseif string.match(rest, "^%d+$") then cards = tonumber(rest)
      elseif rest == "" then cards = 1 end
    end
  end
  return cards, model
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

function gpol.job(job_desc)
  local job = {}
  job.name = job_desc.name or ""
  job.user = job_desc.user_name or ""
  job.queue = job_desc.account or job_desc.default_account or ""
  job.priority_class = job_desc.qos or job_desc.default_qos or ""
  job.priority = gpol.classes[job.priority_class] or 0
  local cards, model = gpol.gpus(job_desc.tres_per_node or job_desc.gres)
  job.whole_cards = cards
  job.allowed_models = {}
  if model then job.allowed_models = { model } end
  job.replicas = given(job_desc.min_nodes) and math.max(job_desc.min_nodes, 1) or 1
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

/// A job as Slurm's `job_desc` for it, a Lua table constructor: the way back of
/// [`LUA_JOB`], for jobs Slurm can express exactly (whole cards, whole CPUs, memory in
/// MiB, durations in minutes, at most one GPU model, labels without `,` or `=`).
pub fn job_desc(job: &JobSpec) -> Result<String, Inexact> {
    let replicas = job.replicas.max(1);
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| fields.push((k.to_string(), v));
    put("name", lua::string(&job.name));
    if let Some(u) = &job.user {
        put("user_name", lua::string(u));
    }
    if let Some(q) = &job.queue {
        put("account", lua::string(q));
    }
    if let Some(c) = &job.priority_class {
        put("qos", lua::string(c));
    }
    if job.priority.is_some() {
        return Err(Inexact("a priority of its own (Slurm takes it from the QOS)"));
    }
    match (job.request, job.models.as_slice()) {
        (Request::None, _) => {}
        (Request::Whole(n), []) => put("tres_per_node", lua::string(&format!("gres:gpu:{n}"))),
        (Request::Whole(n), [m]) => put("tres_per_node", lua::string(&format!("gres:gpu:{m}:{n}"))),
        (Request::Whole(_), _) => return Err(Inexact("more than one GPU model")),
        _ => return Err(Inexact("a fraction of a card or a MIG instance")),
    }
    if job.min_replicas.is_some_and(|m| m != replicas) {
        return Err(Inexact("an elastic gang"));
    }
    put("min_nodes", replicas.to_string());
    if !job.cpu_milli.is_multiple_of(1000) {
        return Err(Inexact("a fraction of a CPU"));
    }
    if job.cpu_milli > 0 {
        put("min_cpus", (job.cpu_milli / 1000 * u64::from(replicas)).to_string());
    }
    if !job.mem.is_multiple_of(1 << 20) {
        return Err(Inexact("memory that is not whole MiB"));
    }
    if job.mem > 0 {
        put("min_mem_per_node", (job.mem >> 20).to_string());
    }
    if let Some(d) = job.duration_ms {
        if !d.is_multiple_of(60_000) {
            return Err(Inexact("a duration that is not whole minutes"));
        }
        put("time_limit", (d / 60_000).to_string());
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
    if !labels.iter().all(|(k, v)| clean(k) && (v.is_empty() || clean(v))) {
        return Err(Inexact("a label with `,` or `=` or spaces"));
    }
    if !labels.is_empty() {
        let text: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        put("comment", lua::string(&text.join(",")));
    }
    let body: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
    Ok(format!("{{ {} }}", body.join(", ")))
}
