//! What the simulator's readers share: errors that name the file, line and field, and
//! quantities written with the language's units (`80GiB`, `90m`).

use gpol_compiler::units::{Dim, Unit};
use std::fmt;

/// Bad input: where it is and what was expected.
#[derive(Clone, Debug, PartialEq)]
pub struct InputError {
    pub file: String,
    /// 1-based line, when the input has lines.
    pub line: Option<usize>,
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn new(file: &str, line: Option<usize>, field: Option<&str>, message: impl Into<String>) -> InputError {
        InputError { file: file.to_string(), line, field: field.map(str::to_string), message: message.into() }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for InputError {}

/// A quantity of dimension `dim` in base units (seconds, bytes, cores): a plain number
/// is already in base units; otherwise a number followed by a unit of that dimension.
pub fn quantity(text: &str, dim: Dim) -> Result<f64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'));
    let (number, unit) = match split {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("expected a number, found `{text}`"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("expected a finite, non-negative number, found `{text}`"));
    }
    let unit = unit.trim();
    if unit.is_empty() {
        return Ok(value);
    }
    match Unit::from_symbol(unit) {
        Some(u) if u.dim() == dim => Ok(u.to_base(value)),
        _ => Err(format!("`{unit}` is not a unit of {}; expected one of {}", dim_name(dim), units_of(dim))),
    }
}

fn dim_name(dim: Dim) -> &'static str {
    if dim == Dim::TIME {
        "time"
    } else if dim == Dim::BYTES {
        "memory"
    } else {
        "this quantity"
    }
}

fn units_of(dim: Dim) -> String {
    Unit::ALL.iter().filter(|u| u.dim() == dim).map(|u| u.symbol()).collect::<Vec<_>>().join(", ")
}

/// Seconds (or a time with a unit) as whole milliseconds.
pub fn millis(text: &str) -> Result<u64, String> {
    let s = quantity(text, Dim::TIME)?;
    let ms = (s * 1000.0).round();
    if ms > 2f64.powi(53) {
        return Err(format!("`{text}` is too long a time"));
    }
    Ok(ms as u64)
}

/// Bytes (or a size with a unit) as a whole number of bytes.
pub fn bytes(text: &str) -> Result<u64, String> {
    let b = quantity(text, Dim::BYTES)?.round();
    if b > 2f64.powi(62) {
        return Err(format!("`{text}` is too large"));
    }
    Ok(b as u64)
}

/// CPU cores (fractions allowed) as milli-cores.
pub fn milli_cpu(text: &str) -> Result<u64, String> {
    let c = quantity(text, Dim::CPU)?;
    if c > 1e12 {
        return Err(format!("`{text}` is too many cores"));
    }
    Ok((c * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_take_units_of_their_dimension() {
        assert_eq!(millis("90"), Ok(90_000));
        assert_eq!(millis("1.5h"), Ok(5_400_000));
        assert_eq!(millis("250ms"), Ok(250));
        assert_eq!(bytes("80GiB"), Ok(80 << 30));
        assert_eq!(bytes("1e3"), Ok(1000));
        assert_eq!(milli_cpu("0.5"), Ok(500));
        assert!(millis("2GiB").expect_err("bad input").contains("not a unit of time"));
        assert!(bytes("-1").is_err());
        assert!(millis("soon").expect_err("bad input").contains("expected a number"));
        assert!(millis("NaN").is_err());
    }
}
