//! Kubernetes quantities (`64`, `500m`, `256Gi`, `1e9`, `263567868Ki`), read exactly as
//! the API server reads them (`resource.ParseQuantity` in k8s.io/apimachinery, its scanner
//! and suffix.go), so that gpol never holds a value Kubernetes does not:
//!
//! - the form is `^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`: a sign, digits with at
//!   most one point (`.5`, `5.` and `.` are numbers), then a suffix; no spaces;
//! - suffixes are decimal (`n u m "" k M G T P E`), binary (`Ki Mi Gi Ti Pi Ei`) or a
//!   decimal exponent (`e3`, `E-2`, `e+6`): `1E` is exa (10^18), `1E3` is 1000, and `1e`,
//!   `1K` or `1mi` are no quantity;
//! - the value is exact, then rounded up (away from zero) to a whole number of
//!   billionths (`0.5n` is `1n`), Kubernetes' finest unit;
//! - a binary value above 2^63-1 is that (`9Ei`), as Kubernetes caps it;
//! - an exponent beyond 32 bits wraps around as Go's `int32` conversion does
//!   (`1e4294967296` is 1): Kubernetes' own reading, kept so that no value differs.
//!
//! Where gpol parts from Kubernetes it refuses, never guesses: text longer than
//! [`MAX_QUANTITY_BYTES`] characters, and values beyond 10^29 units (Kubernetes takes
//! `1e400`; no gpol limit comes near), are errors. Kubernetes' integer readings round up
//! too (`MilliValue` and `Value`): [`Quantity::ceil_milli`] and [`Quantity::ceil_units`]
//! are them, and [`Quantity::is_whole_milli`] and [`Quantity::is_whole`] say whether
//! they rounded.

use gpol_compiler::limits::{MAX_CPU_CORES, MAX_MEMORY_BYTES};
use std::fmt;

pub use gpol_compiler::limits::MAX_QUANTITY_BYTES;

/// Billionths of a unit in one unit.
const NANO_PER_UNIT: i128 = 1_000_000_000;

/// Billionths in a thousandth.
const NANO_PER_MILLI: i128 = 1_000_000;

/// The most a binary quantity holds, in billionths: 2^63-1 units (`maxAllowed`).
const MAX_BINARY_NANO: i128 = i64::MAX as i128 * NANO_PER_UNIT;

/// A quantity's value as Kubernetes holds it once parsed: a whole number of billionths
/// of its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    nano: i128,
    /// Kubernetes rounded digits below 1n up (`3.001n` is `4n`).
    rounded: bool,
    /// A binary quantity over 2^63-1 that Kubernetes caps there (`9Ei`).
    capped: bool,
}

/// Why text is not a quantity gpol reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// Not of the form above (`1.1.M`, `aoeu`, ` 1`); Kubernetes' `ErrFormatWrong`.
    Format,
    /// A suffix Kubernetes does not know (`1i`, `0.1mi`, `5Zi`); its `ErrSuffix`.
    Suffix,
    /// More than gpol holds: 10^29 units (Kubernetes takes up to `1e400` and beyond, but
    /// no gpol limit comes near), or text longer than [`MAX_QUANTITY_BYTES`].
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Format => "not a quantity (a number with a suffix such as `500m`, `16Gi` or `1e3`)",
            QuantityError::Suffix => {
                "not a quantity: its suffix is none of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent"
            }
            QuantityError::TooLarge => "too large",
        })
    }
}

impl std::error::Error for QuantityError {}

/// The value as a plain decimal number (`2.7`, `1000`, `0.000000001`), for messages.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nano < 0 { "-" } else { "" };
        let (whole, frac) =
            (self.nano.unsigned_abs() / NANO_PER_UNIT as u128, self.nano.unsigned_abs() % NANO_PER_UNIT as u128);
        if frac == 0 {
            return write!(f, "{sign}{whole}");
        }
        let digits = format!("{frac:09}");
        write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl Quantity {
    /// Parses `text` as `resource.ParseQuantity` does (no surrounding spaces: JSON readers
    /// trim them first, as `Quantity.UnmarshalJSON` does).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::Format);
        }
        if text.len() > MAX_QUANTITY_BYTES {
            return Err(QuantityError::TooLarge);
        }
        let parts = split(text)?;
        let suffix = suffix(parts.suffix)?;
        let (magnitude, rounded, capped) = magnitude(&parts, suffix)?;
        let nano = if parts.positive { magnitude } else { -magnitude };
        Ok(Quantity { nano, rounded, capped })
    }

    /// A quantity of `nano` billionths (for tests and sums).
    pub fn from_nano(nano: i128) -> Quantity {
        Quantity { nano, rounded: false, capped: false }
    }

    /// The value in billionths of its unit.
    pub fn nano(&self) -> i128 {
        self.nano
    }

    pub fn is_negative(&self) -> bool {
        self.nano < 0
    }

    /// Whether Kubernetes rounded digits below a billionth up when it read the text.
    pub fn rounded(&self) -> bool {
        self.rounded
    }

    /// Whether Kubernetes capped a binary quantity at 2^63-1 when it read the text.
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// The value as a number (exact up to `f64`'s 53 bits).
    pub fn to_f64(&self) -> f64 {
        self.nano as f64 / NANO_PER_UNIT as f64
    }

    /// The value in thousandths, rounded up away from zero: `Quantity.MilliValue`, how
    /// Kubernetes counts CPU (`0.0001` is `1m`).
    pub fn ceil_milli(&self) -> i128 {
        ceil_div(self.nano, NANO_PER_MILLI)
    }

    /// The value in units, rounded up away from zero: `Quantity.Value`, how Kubernetes
    /// counts bytes, GPUs and other resources (`0.5` is 1).
    pub fn ceil_units(&self) -> i128 {
        ceil_div(self.nano, NANO_PER_UNIT)
    }

    /// Whether the value is a whole number of thousandths (else `ceil_milli` rounds).
    pub fn is_whole_milli(&self) -> bool {
        self.nano % NANO_PER_MILLI == 0
    }

    /// Whether the value is a whole number (else `ceil_units` rounds).
    pub fn is_whole(&self) -> bool {
        self.nano % NANO_PER_UNIT == 0
    }

    /// The sum, as Kubernetes adds quantities (exactly); `None` past what gpol holds.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        Some(Quantity {
            nano: self.nano.checked_add(other.nano)?,
            rounded: self.rounded || other.rounded,
            capped: self.capped || other.capped,
        })
    }
}

// ---- Reading objects' quantities against gpol's limits -----------------------------------

/// A quantity in an object that gpol cannot take; the text is the object's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadQuantity {
    Negative(String),
    NotAQuantity(String),
    NotWhole(String),
    /// Past a limit: the text, and the limit in words (`64`, `100000 cores`).
    TooLarge {
        text: String,
        most: String,
    },
}

impl fmt::Display for BadQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadQuantity::Negative(text) => write!(f, "`{text}` is negative"),
            BadQuantity::NotAQuantity(text) => write!(f, "`{text}` is not a quantity"),
            BadQuantity::NotWhole(text) => write!(f, "expected a whole number, found `{text}`"),
            BadQuantity::TooLarge { text, most } => write!(f, "`{text}` is too large, at most {most}"),
        }
    }
}

impl std::error::Error for BadQuantity {}

fn too_large(text: &str, most: impl fmt::Display) -> BadQuantity {
    BadQuantity::TooLarge { text: text.to_string(), most: most.to_string() }
}

/// A quantity as the API server reads it (trimmed, as `Quantity.UnmarshalJSON` trims).
/// One past what gpol holds at all (`1e400`) reads as past every limit, so that the
/// field's own check names its limit.
pub fn read(text: &str) -> Result<Quantity, BadQuantity> {
    match Quantity::parse(text.trim()) {
        Ok(q) if q.is_negative() => Err(BadQuantity::Negative(text.to_string())),
        Ok(q) => Ok(q),
        Err(QuantityError::TooLarge) => Ok(Quantity::from_nano(i128::MAX)),
        Err(_) => Err(BadQuantity::NotAQuantity(text.to_string())),
    }
}

/// A count: whole and at most `max`, never rounded, never clamped.
pub fn whole_count(q: &Quantity, text: &str, max: u64) -> Result<u32, BadQuantity> {
    let units = q.ceil_units();
    if units > i128::from(max) {
        return Err(too_large(text, max));
    }
    if !q.is_whole() {
        return Err(BadQuantity::NotWhole(text.to_string()));
    }
    u32::try_from(units).map_err(|_| too_large(text, u32::MAX))
}

/// CPU in milli-cores as Kubernetes counts it (`MilliValue`: finer values round up).
pub fn milli_cores(q: &Quantity, text: &str) -> Result<u64, BadQuantity> {
    let milli = q.ceil_milli();
    match u64::try_from(milli) {
        Ok(m) if m <= MAX_CPU_CORES * 1000 => Ok(m),
        _ => Err(too_large(text, format_args!("{MAX_CPU_CORES} cores"))),
    }
}

/// Bytes as Kubernetes counts them (`Value`: a fraction of a byte rounds up).
pub fn bytes(q: &Quantity, text: &str) -> Result<u64, BadQuantity> {
    match u64::try_from(q.ceil_units()) {
        Ok(b) if b <= MAX_MEMORY_BYTES => Ok(b),
        _ => Err(too_large(text, format_args!("{}TiB", MAX_MEMORY_BYTES >> 40))),
    }
}

/// `n / d` rounded away from zero (`d` positive).
fn ceil_div(n: i128, d: i128) -> i128 {
    let (q, r) = (n / d, n % d);
    match r.signum() {
        1 => q + 1,
        -1 => q - 1,
        _ => q,
    }
}

/// The text cut as Kubernetes' scanner cuts it.
#[derive(Debug, PartialEq)]
struct Parts<'a> {
    positive: bool,
    /// The digits before the point, leading zeros stripped ("0" for none).
    num: &'a str,
    /// The digits after the point.
    denom: &'a str,
    suffix: &'a str,
}

/// Characters a suffix may start with (`parseQuantityString`'s set).
const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";

/// `parseQuantityString`: sign, digits, point, digits, suffix letters, an exponent's
/// sign and digits, and nothing after them.
fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let b = text.as_bytes();
    let mut pos = 0;
    let positive = b.first() != Some(&b'-');
    if matches!(b.first(), Some(b'-' | b'+')) {
        pos = 1;
    }
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    // Zeros to the end (or a bare sign) are zero, whatever came before.
    if pos == b.len() {
        return Ok(Parts { positive, num: "0", denom: "", suffix: "" });
    }
    let digits = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let start = pos;
    pos = digits(pos);
    let num = if pos == start { "0" } else { &text[start..pos] };
    let mut denom = "";
    if b.get(pos) == Some(&b'.') {
        let from = pos + 1;
        pos = digits(from);
        denom = &text[from..pos];
    }
    let suffix_start = pos;
    pos += b[pos..].iter().take_while(|c| SUFFIX_CHARS.contains(c)).count();
    if matches!(b.get(pos), Some(b'+' | b'-')) {
        pos += 1;
    }
    pos = digits(pos);
    if pos < b.len() {
        return Err(QuantityError::Format);
    }
    Ok(Parts { positive, num, denom, suffix: &text[suffix_start..] })
}

/// A suffix's base and exponent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Suffix {
    Decimal(i32),
    Binary(u32),
}

/// suffix.go's tables, then a decimal exponent (`e3`, `E-2`).
fn suffix(s: &str) -> Result<Suffix, QuantityError> {
    let decimal = [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15)];
    if let Some((_, e)) = decimal.iter().chain(&[("E", 18)]).find(|(name, _)| *name == s) {
        return Ok(Suffix::Decimal(*e));
    }
    let binary = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
    if let Some((_, e)) = binary.iter().find(|(name, _)| *name == s) {
        return Ok(Suffix::Binary(*e));
    }
    match s.as_bytes() {
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            // Go's `strconv.ParseInt(…, 10, 64)`: an optional sign and digits.
            let parsed: i64 = s[1..].parse().map_err(|_| QuantityError::Suffix)?;
            // Kubernetes converts it with Go's `int32(…)`, which wraps; so does `as`.
            Ok(Suffix::Decimal(parsed as i32))
        }
        _ => Err(QuantityError::Suffix),
    }
}

/// The value's magnitude in billionths, rounded up; whether it was rounded, and
/// whether it was capped.
fn magnitude(parts: &Parts<'_>, suffix: Suffix) -> Result<(i128, bool, bool), QuantityError> {
    let mut m = Digits::parse(parts.num, parts.denom);
    // value = digits × 10^-len(denom) × suffix; in billionths, × 10^9.
    let mut exp10 = 9 - parts.denom.len() as i64;
    match suffix {
        Suffix::Decimal(e) => exp10 += i64::from(e),
        Suffix::Binary(e) => m.mul_pow2(e),
    }
    let binary = matches!(suffix, Suffix::Binary(_));
    let over = if binary { Ok((MAX_BINARY_NANO, false, true)) } else { Err(QuantityError::TooLarge) };
    let mut rounded = false;
    if exp10 >= 0 {
        if !m.mul_pow10(exp10) {
            return over;
        }
    } else {
        rounded = m.div_pow10(-exp10);
    }
    let Some(whole) = m.to_i128() else { return over };
    let nano = whole + i128::from(rounded);
    if binary && nano > MAX_BINARY_NANO {
        return Ok((MAX_BINARY_NANO, rounded, true));
    }
    Ok((nano, rounded, false))
}

/// A non-negative integer of any size (the quantity's digits, then scaled), in base
/// 10^9 limbs, least significant first: enough arithmetic for an exact reading.
#[derive(Clone, Debug, PartialEq)]
struct Digits(Vec<u64>);

const LIMB: u64 = 1_000_000_000;

/// Limbs past which no value fits an `i128` (10^45 > 2^127).
const MAX_LIMBS: usize = 5;

impl Digits {
    /// The integer the digits of `num` and `denom` spell together.
    fn parse(num: &str, denom: &str) -> Digits {
        let all: Vec<u8> = num.bytes().chain(denom.bytes()).map(|c| c - b'0').collect();
        let significant = &all[all.iter().take_while(|&&d| d == 0).count()..];
        let mut limbs = Vec::with_capacity(significant.len() / 9 + 1);
        for chunk in significant.rchunks(9) {
            limbs.push(chunk.iter().fold(0u64, |v, &d| v * 10 + u64::from(d)));
        }
        Digits(limbs)
    }

    fn is_zero(&self) -> bool {
        self.0.iter().all(|&l| l == 0)
    }

    /// × `k`, `k` at most 2^32.
    fn mul_small(&mut self, k: u64) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = *limb * k + carry;
            *limb = v % LIMB;
            carry = v / LIMB;
        }
        while carry > 0 {
            self.0.push(carry % LIMB);
            carry /= LIMB;
        }
    }

    /// ÷ `k` (at most 10^9); whether a remainder was lost.
    fn div_small(&mut self, k: u64) -> bool {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let v = rem * LIMB + *limb;
            *limb = v / k;
            rem = v % k;
        }
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        rem != 0
    }

    /// × 2^e, `e` at most 60.
    fn mul_pow2(&mut self, mut e: u32) {
        while e > 0 {
            let step = e.min(30);
            self.mul_small(1 << step);
            e -= step;
        }
    }

    /// × 10^e; false once the value cannot fit an `i128` (the work stops there).
    fn mul_pow10(&mut self, mut e: i64) -> bool {
        while e > 0 && !self.is_zero() {
            let step = e.min(9);
            self.mul_small(10u64.pow(step as u32));
            e -= step;
            if self.0.len() > MAX_LIMBS {
                return false;
            }
        }
        self.0.len() <= MAX_LIMBS
    }

    /// ÷ 10^e, truncated; whether anything non-zero was cut off. Stops once the value is
    /// zero, so a huge negative exponent costs nothing.
    fn div_pow10(&mut self, mut e: i64) -> bool {
        let mut lost = false;
        while e > 0 && !self.is_zero() {
            let step = e.min(9);
            lost |= self.div_small(10u64.pow(step as u32));
            e -= step;
        }
        lost
    }

    fn to_i128(&self) -> Option<i128> {
        if self.0.len() > MAX_LIMBS {
            return None;
        }
        self.0.iter().rev().try_fold(0i128, |v, &l| v.checked_mul(LIMB as i128)?.checked_add(l as i128))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: i128 = NANO_PER_UNIT;

    /// Known answers, each reasoned from `ParseQuantity` and checked against
    /// apimachinery's quantity_test.go (`TestQuantityParse`): text → billionths.
    #[test]
    fn quantities_read_as_kubernetes_reads_them() {
        let ki = 1024i128;
        let cases: &[(&str, i128)] = &[
            // Zeros, with any suffix.
            ("0", 0),
            ("0n", 0),
            ("0Ki", 0),
            ("0T", 0),
            ("1", N),
            // Binary suffixes.
            ("1Ki", ki * N),
            ("7Mi", 7 * ki.pow(2) * N),
            ("6Gi", 6 * ki.pow(3) * N),
            ("5Ti", 5 * ki.pow(4) * N),
            ("4Pi", 4 * ki.pow(5) * N),
            ("3Ei", 3 * ki.pow(6) * N),
            // Decimal suffixes: `E` alone is exa.
            ("5n", 5),
            ("4u", 4_000),
            ("3m", 3_000_000),
            ("8k", 8_000 * N),
            ("7M", 7_000_000 * N),
            ("6G", 6 * 10i128.pow(9) * N),
            ("40T", 40 * 10i128.pow(12) * N),
            ("2P", 2 * 10i128.pow(15) * N),
            ("1E", 10i128.pow(18) * N),
            ("12E", 12 * 10i128.pow(18) * N),
            // Decimal exponents: `E` followed by digits is one.
            ("1E-3", 1_000_000),
            ("1e3", 1_000 * N),
            ("1E6", 10i128.pow(6) * N),
            ("1e15", 10i128.pow(15) * N),
            ("1E18", 10i128.pow(18) * N),
            ("1.3E+6", 1_300_000 * N),
            ("1.7E18", 17 * 10i128.pow(17) * N),
            ("0.5e-2", 5_000_000),
            // Things that look like floating point.
            ("100.035k", 100_035 * N),
            ("0.001", 1_000_000),
            ("0.0005k", N / 2),
            ("0.50000", N / 2),
            ("9.01", 9_010_000_000),
            ("6.987654321G", 6_987_654_321 * N),
            ("1.01E", 101 * 10i128.pow(16) * N),
            // Rounded up to 1n, away from zero.
            ("3.001n", 4),
            ("1.1E-9", 2),
            ("0.0000000001", 1),
            ("0.00000000050", 1),
            ("0.9n", 1),
            ("0.00000012345", 124),
            ("0.00000012354", 124),
            ("-3.001n", -4),
            // Binary quantities above 2^63-1 are capped there.
            ("9Ei", MAX_BINARY_NANO),
            ("9223372036854775807Ki", MAX_BINARY_NANO),
            ("-9Ei", -MAX_BINARY_NANO),
            // Fractional binary quantities, exactly.
            ("100.035Ki", 10_243_584 * N / 100),
            ("0.5Mi", 512 * ki * N),
            ("0.05Gi", 53_687_091_200_000_000),
            ("0.000000000001Ki", 2),
            // Things written by trolls.
            (".001", 1_000_000),
            (".0001k", N / 10),
            ("1.", N),
            ("1.G", 10i128.pow(9) * N),
            (".", 0),
            ("-", 0),
            ("+5", 5 * N),
            ("-0.5", -N / 2),
            ("007", 7 * N),
            // The exponent wraps as Go's int32 conversion does: 2^32 is 0.
            ("1e4294967296", N),
            // A huge negative exponent leaves a positive value: 1n.
            ("1e-400", 1),
        ];
        for &(text, nano) in cases {
            assert_eq!(Quantity::parse(text).map(|q| q.nano()), Ok(nano), "{text}");
        }
    }

    #[test]
    fn what_kubernetes_refuses_is_refused() {
        let cases: &[(&str, QuantityError)] = &[
            ("", QuantityError::Format),
            ("1.1.M", QuantityError::Format),
            ("1+1.0M", QuantityError::Format),
            ("aoeu", QuantityError::Format),
            (" 1", QuantityError::Format),
            ("1 ", QuantityError::Format),
            ("1e3m", QuantityError::Format),
            ("0.1mi", QuantityError::Suffix),
            ("0.1am", QuantityError::Format),
            (".5i", QuantityError::Suffix),
            ("1i", QuantityError::Suffix),
            ("-3.01i", QuantityError::Suffix),
            ("-3.01e-", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1K", QuantityError::Suffix),
            ("5Zi", QuantityError::Format),
            ("1e99999999999999999999", QuantityError::Suffix),
            // Past 10^29 units: Kubernetes takes it, gpol holds nothing so large.
            ("1e400", QuantityError::TooLarge),
            ("1e30", QuantityError::TooLarge),
            ("1000000000000000000000000000000", QuantityError::TooLarge),
        ];
        for &(text, error) in cases {
            assert_eq!(Quantity::parse(text), Err(error), "{text}");
        }
        assert_eq!(Quantity::parse(&"1".repeat(MAX_QUANTITY_BYTES + 1)), Err(QuantityError::TooLarge));
        assert!(Quantity::parse(&format!("0.{}", "0".repeat(MAX_QUANTITY_BYTES - 3))).is_ok());
    }

    #[test]
    fn kubernetes_rounds_its_integer_readings_up() {
        let q = |t: &str| Quantity::parse(t).expect(t);
        // MilliValue: CPU.
        assert_eq!((q("0.0001").ceil_milli(), q("0.0001").is_whole_milli()), (1, false));
        assert_eq!((q("1.0001").ceil_milli(), q("1.5").ceil_milli()), (1001, 1500));
        assert_eq!((q("100u").ceil_milli(), q("250m").is_whole_milli()), (1, true));
        // Value: bytes and counts.
        assert_eq!((q("0.5").ceil_units(), q("0.5").is_whole()), (1, false));
        assert_eq!((q("1.5Gi").ceil_units(), q("1.5Gi").is_whole()), (1_610_612_736, true));
        assert_eq!(q("1.1Gi").ceil_units(), 1_181_116_007, "1.1 × 2^30 is 1181116006.4");
        assert_eq!(q("-0.5").ceil_units(), -1, "away from zero");
        // What was rounded or capped is said.
        assert!(q("3.001n").rounded() && !q("3n").rounded());
        assert!(q("9Ei").capped() && !q("7Ei").capped());
        assert_eq!(q("2Ki").to_f64(), 2048.0);
        assert_eq!(q("1").checked_add(&q("500m")).map(|s| s.ceil_milli()), Some(1500));
    }

    #[test]
    fn the_scanner_cuts_as_kubernetes_cuts() {
        let p = |t| split(t).expect(t);
        assert_eq!(p("-0012.50Ki"), Parts { positive: false, num: "12", denom: "50", suffix: "Ki" });
        assert_eq!(p("1.3E+6"), Parts { positive: true, num: "1", denom: "3", suffix: "E+6" });
        assert_eq!(p(".5"), Parts { positive: true, num: "0", denom: "5", suffix: "" });
        assert_eq!(p("000"), Parts { positive: true, num: "0", denom: "", suffix: "" });
    }
}
