//! `job_submit.lua`: the policy's submit-time rules in Slurm's Lua job-submit plugin
//! (`JobSubmitPlugins=lua`). Pure Lua 5.1: it never starts a process and never calls back
//! into slurmctld (which would block it). An admit rule that reads only what a job carries
//! at submission rejects the job there, with the rule's message in `sbatch`'s error; every
//! other rule is listed in the header as one Slurm cannot enforce at submission (the
//! scheduling loop, `gpolc slurm run`, enforces it). Given the cluster's nodes
//! ([`node_table`]), a filter that reads only what the job carries and what never changes
//! of a node becomes the job's `exc_nodes`: the nodes it refuses, which Slurm then never
//! gives the job; and a job no node could ever hold is refused, as Slurm refuses it (but
//! not a job held at submission). A GRES request Slurm would refuse, or with GPUs of two
//! types, is refused before any rule.

use crate::jobs::{self, QueueFrom};
use crate::lua::{self, Policy, Unsupported};
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::schema::{FieldValue, Record, Storage, Sym};
use gpol_compiler::spec::NodeSpec;
use gpol_runtime::Scheduler;
use gpol_runtime::SpecError;

/// How the leading `job_order` key is listed when it becomes the site factor.
pub const SITE_FACTOR: &str = "key 1 (as site_factor)";

/// A rule and whether it was compiled: `Ok` with its Lua condition, or why not.
pub struct Compiled {
    pub kind: &'static str,
    pub name: String,
    pub condition: Result<String, Unsupported>,
}

/// What `gpolc slurm emit` writes for the submit side.
pub struct Submit {
    pub lua: String,
    pub rules: Vec<Compiled>,
}

/// The rules of a policy as Slurm's submit hook can take them; `with_nodes`: the script
/// will carry the cluster's nodes, so static filters can be compiled.
pub fn rules(policy: Policy<'_>, with_nodes: bool) -> Vec<Compiled> {
    let p = policy.program;
    let mut out = Vec::new();
    for r in &p.admit {
        // Only a rule gpol treats as fixed at submission rejects; any other refusal is a
        // hold (the job waits), which the scheduling loop places.
        let condition = match (r.is_static, lua::expr(&r.body.node, policy)) {
            (true, lua) => lua,
            (false, Ok(_)) => Err(Unsupported(
                "gpol holds a job this refuses rather than rejecting it (it reads a queue attribute): `gpolc slurm run` holds it".into(),
            )),
            (false, Err(Unsupported(why))) => Err(Unsupported(format!("{why}: `gpolc slurm run` holds a job it refuses"))),
        };
        out.push(Compiled { kind: "admit", name: r.name.clone(), condition });
    }
    let placement = "decides placement, which `gpolc slurm run` makes";
    for r in &p.filters {
        let condition = match lua::expr(&r.body.node, policy) {
            Ok(lua) if with_nodes => Ok(lua),
            Ok(_) => Err(Unsupported("needs the nodes: emit with --cluster to exclude the nodes it refuses".into())),
            Err(Unsupported(why)) => Err(Unsupported(format!("{why}: `gpolc slurm run` applies it"))),
        };
        out.push(Compiled { kind: "filter", name: r.name.clone(), condition });
    }
    for (kind, list) in [("score", &p.scores), ("card_score", &p.card_scores)] {
        for r in list {
            out.push(Compiled { kind, name: r.name.clone(), condition: Err(Unsupported(placement.into())) });
        }
    }
    for g in &p.gang {
        let level = p.levels.get(usize::from(g.level)).map_or("?", String::as_str);
        let why = "places a gang's replicas, which `gpolc slurm run` does (topology.conf gives Slurm the levels)";
        let kind = format!("{:?}", g.kind).to_lowercase();
        let name = format!("{kind} same {level}");
        out.push(Compiled { kind: "gang", name, condition: Err(Unsupported(why.into())) });
    }
    // The leading job_order key, when it reads only what a job carries at submission,
    // is Slurm's site factor: what Slurm's own scheduler orders by without the loop.
    let site_factor = p.job_order.first().map(|k| lua::expr(&k.body.node, policy));
    let first_static = matches!(site_factor, Some(Ok(_)));
    if let Some(condition @ Ok(_)) = site_factor {
        out.push(Compiled { kind: "job_order", name: SITE_FACTOR.into(), condition });
    }
    for (kind, keys, done) in
        [("job_order", &p.job_order, usize::from(first_static)), ("queue_order", &p.queue_order, 0)]
    {
        let left = keys.len() - done;
        if left > 0 {
            let why = "orders what waits: `gpolc slurm run` starts the jobs held for it in this order, and gives the others priorities that follow it";
            let name = if done > 0 { format!("{left} key(s) after the first") } else { format!("{left} key(s)") };
            out.push(Compiled { kind, name, condition: Err(Unsupported(why.into())) });
        }
    }
    for v in &p.victims {
        let why = "decides evictions, which `gpolc slurm run` makes by requeue";
        out.push(Compiled { kind: "eviction", name: v.name.clone(), condition: Err(Unsupported(why.into())) });
    }
    out
}

/// `slurm_job_modify`: what the rules and the scheduling loop decided stays decided. Only
/// root (the loop) may release or reorder a job (`scontrol release`, `top`, a priority)
/// or change what the rules read or the loop placed — its queue (account, partition), its
/// class (QOS), its size (GRES, nodes) and its placement (node lists, features). A user may
/// still hold their job, lower its priority (`nice`), shorten it or rename it. Slurm calls
/// this for every update (checked on a real Slurm 22.05: a release arrives as priority
/// `INFINITE`, a field not changed as nil or `NO_VAL`).
const MODIFY: &str = "\
-- What the rules and the scheduling loop decided stays decided: only root (the loop) may
-- release or reorder a job, or change its queue, class, size or placement.
gpol.decided = { \"account\", \"partition\", \"qos\", \"tres_per_node\", \"tres_per_job\",
  \"tres_per_socket\", \"tres_per_task\", \"req_nodes\", \"exc_nodes\", \"features\", \"min_nodes\" }

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if modify_uid == 0 then return slurm.SUCCESS end
  local p = job_desc.priority
  if p ~= nil and p ~= slurm.NO_VAL and p ~= 0 then
    slurm.log_user(\"%s\", \"gpol: only the scheduling loop releases or reorders jobs\")
    return slurm.ESLURM_ACCESS_DENIED
  end
  for _, field in ipairs(gpol.decided) do
    local v = job_desc[field]
    if v ~= nil and v ~= slurm.NO_VAL then
      slurm.log_user(\"gpol: %s is the policy's to decide: cancel the job and submit it again\", field)
      return slurm.ESLURM_ACCESS_DENIED
    end
  end
  return slurm.SUCCESS
end
";

/// `job_submit.lua` for a policy read from `file`; with `hold_for_loop`, every job the
/// rules admit is also held for the scheduling loop, which places it (and releases it);
/// with `nodes` (a [`node_table`]), static filters exclude the nodes they refuse; a job's
/// queue is its account or its partition, as `queue_from` says.
pub fn emit(policy: Policy<'_>, file: &str, hold_for_loop: bool, nodes: Option<&str>, queue_from: QueueFrom) -> Submit {
    let rules = rules(policy, nodes.is_some());
    let file = lua::comment(file);
    let mut lua = String::new();
    let name = &policy.hir.name;
    lua.push_str(&format!(
        "-- job_submit.lua for policy {name}, generated by `gpolc slurm emit` from {file}.\n\
         -- Do not edit: regenerate. Slurm's Lua job-submit plugin runs slurm_job_submit for\n\
         -- every job; a job an admit rule below refuses is rejected with the rule's message,\n\
         -- and the nodes a filter below refuses it are excluded from it (`exc_nodes`).\n\
         -- Pure Lua 5.1: it starts no process and never calls back into slurmctld.\n--\n"
    ));
    lua.push_str("-- Compiled (enforced at submission):\n");
    let compiled: Vec<&Compiled> = rules.iter().filter(|r| r.condition.is_ok()).collect();
    if compiled.is_empty() {
        lua.push_str("--   none\n");
    }
    for r in &compiled {
        lua.push_str(&format!("--   {} {}\n", r.kind, r.name));
    }
    lua.push_str(match nodes {
        Some(_) => {
            "-- Checked against the cluster's nodes: a job no node could ever hold (a GPU type no node\n\
             -- has; more GPUs, CPUs or memory per node than any node has) is refused, as Slurm\n\
             -- refuses it (\"Requested node configuration is not available\").\n"
        }
        None => {
            "-- Not checked (no nodes: `gpolc slurm emit --cluster` adds them): whether any node could\n\
             -- ever hold a job (a GPU type no node has; more GPUs, CPUs or memory per node than any\n\
             -- node has). Slurm refuses such a job itself, but not one held at submission\n\
             -- (`--hold-for-loop`), which then waits until it is cancelled.\n"
        }
    });
    lua.push_str("-- Not enforceable at submission (`gpolc slurm run` enforces them):\n");
    for r in rules.iter().filter(|r| r.condition.is_err()) {
        let why = r.condition.as_ref().err().map_or("", |u| u.0.as_str());
        lua.push_str(&format!("--   {} {}: {why}\n", r.kind, r.name));
    }
    lua.push('\n');
    lua.push_str(HELPERS);
    lua.push_str(&format!("gpol.attrs = {}\n\n", lua::attr_table(policy)));
    lua.push_str("-- Priority classes (a job's QOS names its class).\ngpol.classes = {");
    for (class, value) in &policy.hir.priority_classes {
        lua.push_str(&format!(" [{}] = {},", lua::string(class), lua::number(*value)));
    }
    lua.push_str(" }\n\n");
    lua.push_str(&format!(
        "-- A job's queue is its {0} (`gpolc slurm emit --queue-from {0}`).\ngpol.queue_from = {1}\n\n",
        queue_from.name(),
        lua::string(queue_from.name())
    ));
    lua.push_str(&jobs::lua_model_table());
    lua.push_str(jobs::LUA_JOB);
    // The rules in declaration order, each a function of the job (tests and `gpolc slurm`
    // ask each on its own); the first that refuses rejects the job.
    lua.push_str("\n-- The compiled admit rules, in declaration order.\ngpol.rules = {\n");
    for (r, index) in rules.iter().filter(|r| r.kind == "admit").zip(0..) {
        let Ok(condition) = &r.condition else { continue };
        let message = (policy.program.admit.get(index).and_then(|a| a.reason.clone()))
            .unwrap_or_else(|| format!("refused by admit rule {}", r.name));
        lua.push_str(&format!(
            "  {{ name = {}, message = {},\n    check = function(job) return {condition} end }},\n",
            lua::string(&r.name),
            lua::string(&format!("{message} (gpol admit {})", r.name)),
        ));
    }
    lua.push_str("}\n\n");
    lua.push_str(&format!(
        "-- The cluster's nodes: what never changes of them.\ngpol.nodes = {}\n\n",
        nodes.unwrap_or("{}")
    ));
    lua.push_str("-- The compiled filters (static: the job and what never changes of a node).\ngpol.filters = {\n");
    for r in rules.iter().filter(|r| r.kind == "filter") {
        let Ok(condition) = &r.condition else { continue };
        lua.push_str(&format!(
            "  {{ name = {}, check = function(job, node) return {condition} end }},\n",
            lua::string(&r.name)
        ));
    }
    lua.push_str("}\n\n");
    lua.push_str(MISFIT);
    lua.push_str(EXCLUDE);
    let key = rules.iter().find(|r| r.kind == "job_order" && r.name == SITE_FACTOR);
    if let (Some(Compiled { condition: Ok(value), .. }), Some(first)) = (key, policy.program.job_order.first()) {
        let sign = if first.dir == gpol_compiler::ir::Direction::Desc { 1 } else { -1 };
        lua.push_str(&format!(
            "-- The leading job_order key ({}) as Slurm's site factor, which Slurm adds to the job's\n\
             -- priority (higher starts first): 1,000,000,000 plus (desc) or minus (asc) the key's\n\
             -- value in thousandths, rounded, within 0..2,000,000,000 (a priority below 1 would be 1).\n\
             function gpol.site_factor(job)\n  local x = 1e9 + {sign} * ({value}) * 1000\n  if x ~= x then return 1e9 end\n  return gpol.clamp(gpol.round(x), 0, 2e9)\nend\n\n",
            if sign > 0 { "desc" } else { "asc" }
        ));
    }
    lua.push_str(
        "function slurm_job_submit(job_desc, part_list, submit_uid)\n  local job = gpol.job(job_desc, part_list)\n  if job.queue == nil then\n    slurm.log_user(\"%s\", \"gpol: queues are partitions here: submit to one partition\")\n    return slurm.ERROR\n  end\n  gpol.refused = nil\n  if job.unreadable then\n    slurm.log_user(\"%s\", \"gpol: the job's GRES cannot be read: \" .. job.unreadable)\n    return gpol.INVALID_GRES\n  end\n  for _, rule in ipairs(gpol.rules) do\n    if not rule.check(job) then\n      slurm.log_user(\"%s\", rule.message)\n      gpol.refused = rule.name\n      return slurm.ERROR\n    end\n  end\n  local misfit = gpol.misfit(job)\n  if misfit then\n    slurm.log_user(\"%s\", \"gpol: no node of the cluster can ever hold this job: \" .. misfit)\n    return gpol.NODE_CONFIG_UNAVAILABLE\n  end\n  if not gpol.exclude(job, job_desc) then\n    return slurm.ERROR\n  end\n  if gpol.site_factor then job_desc.site_factor = gpol.site_factor(job) end\n",
    );
    if hold_for_loop {
        lua.push_str(&format!(
            "  -- Held for the scheduling loop (`gpolc slurm apply`), which pins it to the nodes gpol\n  -- chooses and releases it.\n  job_desc.priority = 0\n  job_desc.admin_comment = {}\n",
            lua::string(crate::marks::WAITING)
        ));
    }
    lua.push_str("  return slurm.SUCCESS\nend\n\n");
    lua.push_str(MODIFY);
    Submit { lua, rules }
}

/// A node gpol's model refuses (a field past its limits): no table can carry it.
#[derive(Clone, Debug, PartialEq)]
pub struct UnmodelledNode {
    pub node: String,
    pub error: SpecError,
}

impl std::fmt::Display for UnmodelledNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}: {}", self.node, self.error)
    }
}

impl std::error::Error for UnmodelledNode {}

/// The cluster's nodes as the Lua table `gpol.nodes`: classes of nodes alike in every
/// field that never changes (as the runtime's node record holds it) and in their labels,
/// each with those fields, `hosts` (its nodes as one Slurm hostlist) and `count`. A filter's verdict is the
/// same for every node of a class, so a submission evaluates the filters once per class,
/// not per node (a 100,000-node cluster is usually a few hundred classes). When a filter
/// reads `node.name`, every node is a class of its own.
pub fn node_table(policy: &CompiledPolicy, nodes: &[NodeSpec]) -> Result<String, UnmodelledNode> {
    let mut s = Scheduler::new(policy.clone());
    for n in nodes {
        s.add_node(n).map_err(|error| UnmodelledNode { node: n.name.clone(), error })?;
    }
    let by_name = policy.program.filters.iter().any(|f| f.body.node.reads(Record::Node, "name"));
    let name = |sym: Sym| lua::string(s.symbols().name(sym));
    // Each class's fields, in order of first appearance, and its nodes' names.
    let mut classes: Vec<(String, Vec<String>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (rec, spec) in s.node_records().iter().zip(nodes) {
        let mut fields = Vec::new();
        for (i, f) in (0u16..).zip(Record::Node.fields()) {
            if f.storage != Storage::Static || (f.name == "name" && !by_name) {
                continue;
            }
            let value = match rec.field(i) {
                Some(FieldValue::Num(x)) => lua::number(x),
                Some(FieldValue::Bool(b)) => b.to_string(),
                Some(FieldValue::Sym(sym)) => name(sym),
                Some(FieldValue::Enum(e)) => e.to_string(),
                Some(FieldValue::Labels(slots)) => {
                    let keys = &policy.program.node_labels;
                    let items: Vec<String> = (keys.iter().zip(slots))
                        .filter(|(_, v)| v.0 != 0)
                        .map(|(k, v)| format!("[{}] = {}", lua::string(k), name(*v)))
                        .collect();
                    format!("{{ {} }}", items.join(", "))
                }
                _ => continue,
            };
            fields.push(format!("{} = {value}", f.name));
        }
        let fields = fields.join(", ");
        let at = *index.entry(fields.clone()).or_insert_with(|| {
            classes.push((fields, Vec::new()));
            classes.len() - 1
        });
        classes[at].1.push(spec.name.clone());
    }
    let mut out = String::from("{\n");
    for (fields, names) in classes {
        let hosts = lua::string(&crate::hostlist::compress(&names));
        out.push_str(&format!("  {{ {fields}, hosts = {hosts}, count = {} }},\n", names.len()));
    }
    out.push('}');
    Ok(out)
}

/// Whether any node could ever hold a job, against the node table: what Slurm checks at
/// submission ("Requested node configuration is not available", measured on 22.05 for a
/// GPU type no node has and for more GPUs, CPUs or memory per node than any node has) —
/// except for a job held at submission, which Slurm takes unchecked: held for the loop,
/// it would wait for ever. The error codes are Slurm's (slurm_errno.h), which its Lua
/// plugin gives no names: sbatch prints their text after the message.
const MISFIT: &str = r#"-- Slurm's error codes for a job no node can hold and for GRES it cannot read.
gpol.NODE_CONFIG_UNAVAILABLE = 2014 -- ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
gpol.INVALID_GRES = 2072 -- ESLURM_INVALID_GRES

local function amount(x)
  if x == math.floor(x) then return string.format("%.0f", x) end
  return string.format("%g", x)
end

-- Why no node of the cluster could ever hold the job (nil when one could, or when the
-- script carries no nodes): a GPU type no node has, or more GPUs, CPUs or memory per
-- node than any node (of that type) has, or not all of them on one node.
function gpol.misfit(job)
  if #gpol.nodes == 0 then return nil end
  local model = nil
  if job.whole_cards > 0 then model = job.allowed_models[1] end
  local most, types, seen = { cards = 0, cpu = 0, mem = 0 }, {}, {}
  for _, class in ipairs(gpol.nodes) do
    if class.cards > 0 and not seen[class.gpu_model] then
      seen[class.gpu_model] = true
      types[#types + 1] = class.gpu_model
    end
    if model == nil or (class.cards > 0 and class.gpu_model == model) then
      if job.whole_cards <= class.cards and job.cpu <= class.cpu and job.mem <= class.mem then return nil end
      most.cards = math.max(most.cards, class.cards)
      most.cpu = math.max(most.cpu, class.cpu)
      most.mem = math.max(most.mem, class.mem)
    end
  end
  if model and not seen[model] then
    if #types == 0 then return "it asks for GPUs of type " .. model .. ", and no node has GPUs" end
    return "no node has GPUs of type " .. model .. " (the nodes have " .. table.concat(types, ", ") .. ")"
  end
  local of, any = "", "any node"
  if model then of, any = " " .. model, "any node with " .. model .. " GPUs" end
  local mib = 1048576
  if job.whole_cards > most.cards then
    return amount(job.whole_cards) .. of .. " GPUs per node, more than " .. any .. " has (" .. amount(most.cards) .. ")"
  elseif job.cpu > most.cpu then
    return amount(job.cpu) .. " CPUs per node, more than " .. any .. " has (" .. amount(most.cpu) .. ")"
  elseif job.mem > most.mem then
    return amount(job.mem / mib) .. " MiB of memory per node, more than " .. any .. " has ("
      .. amount(most.mem / mib) .. " MiB)"
  end
  local asked = { amount(job.cpu) .. " CPUs", amount(job.mem / mib) .. " MiB of memory" }
  if job.whole_cards > 0 then table.insert(asked, 1, amount(job.whole_cards) .. of .. " GPUs") end
  return "no node has " .. table.concat(asked, ", ") .. " at once"
end
"#;

/// The nodes the static filters refuse, as `exc_nodes` (added to the user's own); a job
/// that no node takes is rejected, naming the filter that refused the last node.
const EXCLUDE: &str = r#"-- The nodes the filters refuse the job: excluded, so Slurm never gives it one.
-- Each class of nodes alike is asked once; the result is hostlists, and how many nodes
-- they name of how many there are.
function gpol.excluded(job)
  local out, refused_by, count, total = {}, nil, 0, 0
  for _, class in ipairs(gpol.nodes) do
    total = total + class.count
    for _, f in ipairs(gpol.filters) do
      if not f.check(job, class) then
        out[#out + 1] = class.hosts
        count = count + class.count
        refused_by = f.name
        break
      end
    end
  end
  return out, refused_by, count, total
end
function gpol.exclude(job, job_desc)
  if #gpol.filters == 0 then return true end
  local out, refused_by, count, total = gpol.excluded(job)
  if count > 0 and count == total then
    slurm.log_user("%s", "no node of the cluster passes the policy's filters (gpol filter " .. refused_by .. ")")
    gpol.refused = refused_by
    return false
  end
  if #out > 0 then
    if job_desc.exc_nodes ~= nil and job_desc.exc_nodes ~= "" then out[#out + 1] = job_desc.exc_nodes end
    job_desc.exc_nodes = table.concat(out, ",")
  end
  return true
end

"#;

/// gpol's built-ins with gpol's semantics (compiler/src/ops.rs).
const HELPERS: &str = r#"gpol = {}

local function nan(x) return x ~= x end
-- min and max propagate NaN; between equal values the first wins.
function gpol.min(a, b) if nan(a) or nan(b) then return 0/0 elseif b < a then return b else return a end end
function gpol.max(a, b) if nan(a) or nan(b) then return 0/0 elseif b > a then return b else return a end end
function gpol.clamp(x, lo, hi) return gpol.min(gpol.max(x, lo), hi) end
-- Halves away from zero, as C's round (a - floor(a) is exact for doubles).
function gpol.round(x)
  if nan(x) or x == 0 or x == 1/0 or x == -1/0 then return x end
  local a = math.abs(x)
  local f = math.floor(a)
  if a - f >= 0.5 then f = f + 1 end
  if x < 0 then return -f else return f end
end
function gpol.trunc(x) if x >= 0 then return math.floor(x) else return math.ceil(x) end end
-- Floored modulo: x − y·floor(x / y).
function gpol.mod(x, y) return x - y * math.floor(x / y) end
-- A queue's attribute (every queue has every attribute: absent ones are zero values).
function gpol.attr(name, queue)
  local values = gpol.attrs[name]
  local v = values and values[queue]
  if v == nil then return 0 end
  return v
end
function gpol.any(list, f) for _, x in ipairs(list) do if f(x) then return true end end return false end
function gpol.all(list, f) for _, x in ipairs(list) do if not f(x) then return false end end return true end
function gpol.count(list, f) local n = 0 for _, x in ipairs(list) do if f(x) then n = n + 1 end end return n end
function gpol.sum(list, f) local n = 0 for _, x in ipairs(list) do n = n + f(x) end return n end
function gpol.min_of(list, f) local n = 1/0 for _, x in ipairs(list) do n = gpol.min(n, f(x)) end return n end
function gpol.max_of(list, f) local n = -1/0 for _, x in ipairs(list) do n = gpol.max(n, f(x)) end return n end

"#;
