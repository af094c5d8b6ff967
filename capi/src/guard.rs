//! No panic crosses the boundary: every exported function's body runs inside
//! [`guarded`], which turns a panic into a [`Failure`] with `GPOL_STATUS_PANIC`.

use crate::error::Failure;
use crate::types::GpolStatus;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`, a panic in it becoming a failure.
///
/// `AssertUnwindSafe`: what a panic can leave half-changed is only ever a cluster, whose
/// state sits behind a mutex that the panic poisons, so later calls refuse it; policies,
/// diagnostics and errors are immutable once made, and results are written to C's
/// memory only after the work that could panic is done.
pub fn guarded<T>(f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(Failure::new(
                GpolStatus::Panic,
                format!("libgpol panicked ({what}); this is a bug in gpol, please report it"),
            ))
        }
    }
}

/// Runs `f`, which cannot fail but for a panic: `fallback` then.
pub fn quiet<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    guarded(|| Ok(f())).unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_failure_with_its_message() {
        let r: Result<(), Failure> = guarded(|| panic!("the test's own panic"));
        let f = r.expect_err("caught");
        assert_eq!(f.status, GpolStatus::Panic);
        assert!(f.message().contains("the test's own panic"), "{}", f.message());
        let formatted: Result<(), Failure> = guarded(|| panic!("formatted {}", 7));
        assert!(formatted.expect_err("caught").message().contains("formatted 7"));
        assert_eq!(quiet(3, || panic!("no")), 3);
        assert_eq!(quiet(3, || 4), 4);
    }

    #[test]
    fn a_panic_inside_a_cluster_poisons_it() {
        let (policy, _) =
            crate::policy::compile("p.gpol", b"policy p\n".to_vec(), gpol_compiler::engine::EngineKind::Interp);
        let policy = policy.expect("compiles");
        let cluster = crate::cluster::GpolCluster::new(&policy.compiled, Vec::new()).expect("empty cluster");
        let r: Result<(), Failure> = guarded(|| {
            let _inner = cluster.lock()?;
            panic!("inside the cluster")
        });
        assert_eq!(r.expect_err("caught").status, GpolStatus::Panic);
        let later = cluster.lock().expect_err("poisoned");
        assert_eq!(later.status, GpolStatus::Panic);
        assert!(later.message().contains("earlier call panicked"), "{}", later.message());
    }
}
