//! Scalar semantics of gpol (decision D1), in one place: constant folding uses these
//! and so will the interpreter, so the engines cannot drift.

/// `min` propagates NaN; between equal values (including -0.0 and 0.0) the first wins.
pub fn min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// `max` propagates NaN; between equal values the first wins.
pub fn max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

pub fn clamp(x: f64, lo: f64, hi: f64) -> f64 {
    min(max(x, lo), hi)
}

/// Rounds to the nearest integer, halves away from zero (`round(2.5)` is 3, `round(-2.5)`
/// is −3), as C's `round`.
pub fn round(x: f64) -> f64 {
    x.round()
}

/// Floored modulo, `x − y·floor(x / y)`: the sign of `y` (`mod(-1h, 1d)` is 23h). Written
/// as these three IEEE operations so the JIT, which emits the same ones, gives the same bits.
pub fn modulo(x: f64, y: f64) -> f64 {
    x - y * (x / y).floor()
}

pub fn exp2(x: f64) -> f64 {
    libm::exp2(x)
}

pub fn log(x: f64) -> f64 {
    libm::log(x)
}

pub fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// A deterministic pseudo-random value in [0, 1) from two 64-bit keys (splitmix64 mixing).
pub(crate) fn hash01(a: u64, b: u64) -> f64 {
    let mut z = a ^ b.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The 64-bit key of a string for `hash01` (FNV-1a).
pub fn str_key(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The 64-bit key of a number for `hash01`: its bits, with -0.0 and all NaNs canonical.
pub(crate) fn num_key(x: f64) -> u64 {
    if x.is_nan() {
        f64::NAN.to_bits()
    } else if x == 0.0 {
        0
    } else {
        x.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_propagate_nan_and_keep_first_of_equals() {
        assert!(min(f64::NAN, 1.0).is_nan());
        assert!(max(1.0, f64::NAN).is_nan());
        assert_eq!(min(2.0, 1.0), 1.0);
        assert!(min(-0.0, 0.0).is_sign_negative());
        assert!(max(0.0, -0.0).is_sign_positive());
    }

    #[test]
    fn hash01_is_in_unit_interval_and_deterministic() {
        for i in 0..1000u64 {
            let h = hash01(i, str_key("node-1"));
            assert!((0.0..1.0).contains(&h));
            assert_eq!(h, hash01(i, str_key("node-1")));
        }
        assert_ne!(hash01(1, 2), hash01(2, 1));
    }
}
