//! Internal invariants that must never fail: loud in debug builds, logged and survived in
//! release builds, as rust-analyzer's `never!` is.

/// The `tracing` target release builds log broken invariants under.
pub const TARGET: &str = "gpol::never";

/// Marks a state an internal invariant rules out — a bug in gpol, not in the input.
/// Debug builds (and so every test) panic with the message; release builds log it as an
/// error (`tracing`, target [`TARGET`], with the file and line) and go on with the
/// fallback the caller writes right after it, so a user's run never aborts on it.
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
        // `cfg!` here is the calling crate's: the same switch `debug_assert!` reads.
        if cfg!(debug_assertions) {
            panic!("internal error: {}", format_args!($($message)+))
        } else {
            $crate::never::report(format_args!($($message)+))
        }
    };
}

/// The release half of [`never!`]: the broken invariant as an error event, at the place
/// the macro was written.
#[doc(hidden)]
#[cold]
#[track_caller]
pub fn report(message: std::fmt::Arguments<'_>) {
    let at = std::panic::Location::caller();
    tracing::error!(target: TARGET, file = at.file(), line = at.line(), "internal error: {message}");
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "internal error: card 3 of node 1 has no record")]
    fn debug_builds_panic_with_the_message() {
        let (card, node) = (3, 1);
        crate::never!("card {card} of node {node} has no record");
    }

    #[test]
    fn release_builds_report_without_panicking() {
        // What `never!` calls when debug assertions are off; with no subscriber it is silent.
        super::report(format_args!("a state ruled out, {}", 42));
    }
}
