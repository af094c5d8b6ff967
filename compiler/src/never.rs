//! Internal invariants that must never fail: loud in debug builds, defined in release.

/// Marks a state an internal invariant rules out — a bug in gpol, not in the input.
/// Debug builds (and so every test) panic with the message; release builds go on with
/// the fallback the caller writes right after it, so a user's run never aborts on it.
///
/// ```
/// # use gpol_compiler::never;
/// fn local(values: &[f64], i: usize) -> f64 {
///     match values.get(i) {
///         Some(v) => *v,
///         None => {
///             never!("local {i} read before it was defined");
///             f64::NAN
///         }
///     }
/// }
/// assert_eq!(local(&[1.0], 0), 1.0);
/// ```
#[macro_export]
macro_rules! never {
    ($($message:tt)+) => {
        debug_assert!(false, "internal error: {}", format_args!($($message)+))
    };
}
