//! Kubernetes quantities (`64`, `500m`, `256Gi`, `1e9`, `263567868Ki`), as the API server
//! writes them in `resources` and `allocatable`.

/// A quantity as a number, or `None` when it is not one (or negative, or not finite).
pub fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E').unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    let v = value * factor;
    (v.is_finite() && v >= 0.0).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_follow_kubernetes_suffixes() {
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("2Ki"), Some(2048.0));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("3G"), Some(3e9));
        assert_eq!(quantity("12"), Some(12.0));
        assert_eq!(quantity("-1"), None);
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("5Zi"), None);
    }
}
