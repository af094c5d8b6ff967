//! What `gpolc slurm emit` writes for every example policy (`job_submit.lua`,
//! `accounts.sh`), as golden files: a change to it shows up in review.

use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_slurm::lua::Policy;
use gpol_slurm::submit;
use std::path::Path;

#[test]
fn every_example_emits_its_golden_artefacts() {
    let mut names: Vec<String> = std::fs::read_dir("../policies")
        .expect("the examples")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".gpol"))
        .collect();
    names.push("../slurm/tests/policies/submit_rules.gpol".into());
    names.sort();
    assert!(names.len() >= 10);
    for name in names {
        let text = std::fs::read_to_string(Path::new("../policies").join(&name)).expect("readable");
        let policy = Checked::from_text(&name, &text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("{name}"));
        let label = name.trim_start_matches("../slurm/tests/policies/").trim_end_matches(".gpol").to_string();
        let lua = submit::emit(
            Policy { program: &policy.program, hir: &policy.policy },
            &format!("{label}.gpol"),
            false,
            None,
            gpol_slurm::jobs::QueueFrom::Account,
        )
        .lua;
        insta::assert_snapshot!(format!("job_submit_{label}"), lua);
        let accounts = gpol_slurm::accounts::emit(&policy.policy, &format!("{label}.gpol")).script;
        insta::assert_snapshot!(format!("accounts_{label}"), accounts);
    }
}
