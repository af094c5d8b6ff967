//! A policy as the scheduling loop holds it from one load to the next: compiled once, and
//! what `job_submit.lua` enforces of it worked out once — the Lua translation of every rule
//! ([`crate::submit::rules`]) — rather than on every pass. Loading the policy again makes a
//! new one.

use crate::lua::Policy;
use gpol_compiler::engine::CompiledPolicy;

/// A compiled policy and what of it Slurm enforces at submission.
#[derive(Clone)]
pub struct LoadedPolicy {
    compiled: CompiledPolicy,
    enforced_at_submission: Vec<String>,
}

impl LoadedPolicy {
    /// Works out, once, which admit rules `job_submit.lua` carries.
    pub fn new(compiled: CompiledPolicy) -> LoadedPolicy {
        let view = Policy { program: &compiled.program, hir: &compiled.policy };
        let enforced_at_submission = crate::submit::rules(view, false)
            .into_iter()
            .filter(|r| r.kind == "admit" && r.condition.is_ok())
            .map(|r| r.name)
            .collect();
        LoadedPolicy { compiled, enforced_at_submission }
    }

    pub fn compiled(&self) -> &CompiledPolicy {
        &self.compiled
    }

    /// The admit rules `job_submit.lua` carries, by name: a job the loop finds refused by
    /// one of them got past the script (Slurm filled in a default after submission, say),
    /// so it is held for a person to look at rather than cancelled on a disagreement.
    pub fn enforced_at_submission(&self) -> &[String] {
        &self.enforced_at_submission
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::engine::EngineKind;
    use gpol_compiler::load::Checked;

    #[test]
    fn the_rules_job_submit_lua_carries_are_named_once() {
        let text = "policy t\nqueue a { limit 8 gpu }\n\
                    admit small \"at most 16 GPUs\" { job.total_gpus <= 16 gpu }\n\
                    admit waited { job.waiting < 10m }\n";
        let compiled =
            Checked::from_text("t.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
        let loaded = LoadedPolicy::new(compiled);
        assert_eq!(loaded.enforced_at_submission(), ["small"]);
    }
}
