//! What the simulator's readers share: errors that name the file, line and field, and
//! quantities written with the language's units (`80GiB`, `90m`).

// The range checks every reader shares live with the limits they check.
use gpol_compiler::limits::{LimitError, MAX_CLOCK_MS};
pub use gpol_compiler::limits::{count, whole, within_bytes, within_cores};
use gpol_compiler::terminal::escape;
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

/// For people: text from the input (a job's name, a field) is escaped, so that a trace
/// cannot drive the terminal it is reported on.
impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", escape(&self.file))?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{}`", escape(field))?;
        }
        write!(f, ": {}", escape(&self.message))
    }
}

impl std::error::Error for InputError {}

/// A quantity that cannot be read; the text is the input's, unescaped (an
/// [`InputError`] escapes it where it is shown).
#[derive(Clone, Debug, PartialEq)]
pub enum QuantityError {
    NotANumber(String),
    /// Negative, infinite or not a number at all (`NaN`).
    NotNonNegative(String),
    WrongUnit {
        unit: String,
        dim: Dim,
    },
    /// A time past the clock's limit.
    TooLong(String),
    /// Past a limit the compiler checks (`limits`), in its words.
    OverLimit(LimitError),
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityError::NotANumber(text) => write!(f, "expected a number, found `{text}`"),
            QuantityError::NotNonNegative(text) => write!(f, "expected a finite, non-negative number, found `{text}`"),
            QuantityError::WrongUnit { unit, dim } => {
                write!(f, "`{unit}` is not a unit of {}; expected one of {}", dim_name(*dim), units_of(*dim))
            }
            QuantityError::TooLong(text) => {
                write!(f, "`{text}` is too large, at most {}s (100 years)", MAX_CLOCK_MS / 1000)
            }
            QuantityError::OverLimit(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for QuantityError {}

/// A quantity of dimension `dim` in base units (seconds, bytes, cores): a plain number
/// is already in base units; otherwise a number followed by a unit of that dimension.
pub fn quantity(text: &str, dim: Dim) -> Result<f64, QuantityError> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'));
    let (number, unit) = match split {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let value: f64 = number.trim().parse().map_err(|_| QuantityError::NotANumber(text.to_string()))?;
    if !value.is_finite() || value < 0.0 {
        return Err(QuantityError::NotNonNegative(text.to_string()));
    }
    let unit = unit.trim();
    if unit.is_empty() {
        return Ok(value);
    }
    match Unit::from_symbol(unit) {
        Some(u) if u.dim() == dim => Ok(u.to_base(value)),
        _ => Err(QuantityError::WrongUnit { unit: unit.to_string(), dim }),
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

/// Seconds (or a time with a unit) as whole milliseconds, at most the clock's limit.
pub fn millis(text: &str) -> Result<u64, QuantityError> {
    let ms = (quantity(text, Dim::TIME)? * 1000.0).round();
    if ms > MAX_CLOCK_MS as f64 {
        return Err(QuantityError::TooLong(text.to_string()));
    }
    Ok(ms as u64)
}

/// Bytes (or a size with a unit) as a whole number of bytes, at most the memory limit.
pub fn bytes(text: &str) -> Result<u64, QuantityError> {
    let b = quantity(text, Dim::BYTES)?.round();
    within_bytes(b, text).map_err(QuantityError::OverLimit)
}

/// CPU cores (fractions allowed) as milli-cores, at most the CPU limit.
pub fn milli_cpu(text: &str) -> Result<u64, QuantityError> {
    within_cores(quantity(text, Dim::CPU)?, text).map_err(QuantityError::OverLimit)
}

/// Where each line of a text starts, counting `\n`, `\r\n` and a lone `\r` as line
/// breaks, to name the line of a byte offset whatever the file's line endings.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub fn new(text: &str) -> Lines {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
                starts.push(i + 1);
            }
        }
        Lines { starts }
    }

    /// The 1-based line holding byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset).max(1)
    }

    /// Each line's text, without its line break, with its 1-based number.
    pub fn iter<'t>(&'t self, text: &'t str) -> impl Iterator<Item = (usize, &'t str)> + 't {
        self.starts.iter().enumerate().map(move |(i, &start)| {
            let end = self.starts.get(i + 1).copied().unwrap_or(text.len());
            let line = &text[start..end];
            (i + 1, line.strip_suffix('\n').unwrap_or(line).trim_end_matches('\r'))
        })
    }
}

/// The longest line a streamed input may have: a trace row is a few hundred bytes, so
/// anything near this is not a trace (docs/limits.md).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Lines read one at a time from a stream, counting `\n`, `\r\n` and a lone `\r` as line
/// breaks (as [`Lines`] does for a text in memory), each at most [`MAX_LINE_BYTES`].
pub struct LineReader<R> {
    inner: R,
    /// The number of the line read last.
    line: usize,
}

/// Why a line could not be read.
#[derive(Debug)]
pub enum LineError {
    Io(std::io::Error),
    /// The line is longer than [`MAX_LINE_BYTES`].
    TooLong,
}

impl<R: std::io::BufRead> LineReader<R> {
    pub fn new(inner: R) -> LineReader<R> {
        LineReader { inner, line: 0 }
    }

    /// Reads the next line into `buf` (cleared first, without its line break) and returns
    /// its 1-based number, or `None` at the end of the input.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<usize>, LineError> {
        buf.clear();
        let mut any = false;
        loop {
            let chunk = self.inner.fill_buf().map_err(LineError::Io)?;
            if chunk.is_empty() {
                return Ok(any.then(|| self.bump()));
            }
            any = true;
            match chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    let cr = chunk[i] == b'\r';
                    buf.extend_from_slice(&chunk[..i]);
                    self.inner.consume(i + 1);
                    if cr && self.inner.fill_buf().map_err(LineError::Io)?.first() == Some(&b'\n') {
                        self.inner.consume(1);
                    }
                    return if buf.len() > MAX_LINE_BYTES { Err(LineError::TooLong) } else { Ok(Some(self.bump())) };
                }
                None => {
                    let n = chunk.len();
                    buf.extend_from_slice(chunk);
                    self.inner.consume(n);
                    if buf.len() > MAX_LINE_BYTES {
                        return Err(LineError::TooLong);
                    }
                }
            }
        }
    }

    /// The number of the line read last (0 before the first).
    pub fn line(&self) -> usize {
        self.line
    }

    fn bump(&mut self) -> usize {
        self.line += 1;
        self.line
    }
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
        assert!(millis("2GiB").expect_err("bad input").to_string().contains("not a unit of time"));
        assert!(bytes("-1").is_err());
        assert!(millis("soon").expect_err("bad input").to_string().contains("expected a number"));
        assert!(millis("NaN").is_err());
    }

    #[test]
    fn limits_are_errors_never_clamps() {
        let said = |e: QuantityError| e.to_string();
        assert_eq!(
            said(millis("1e300w").expect_err("too long")),
            "`1e300w` is too large, at most 3155760000s (100 years)"
        );
        assert_eq!(said(milli_cpu("1e300").expect_err("too many")), "`1e300` is too large, at most 100000 cores");
        assert_eq!(said(bytes("65TiB").expect_err("too much")), "`65TiB` is too large, at most 64TiB");
        assert_eq!(count("2.7", 64).expect_err("fraction").to_string(), "expected a whole number, found `2.7`");
        assert_eq!(count("1e12", 64).expect_err("too many").to_string(), "`1e12` is too large, at most 64");
        assert_eq!(count("64", 64), Ok(64));
    }

    #[test]
    fn streamed_lines_count_every_kind_of_line_break() {
        let text = "a\nb\r\nc\rd\r\r\ne";
        // A small buffer, so that a `\r\n` is split between two reads.
        let mut reader = LineReader::new(std::io::BufReader::with_capacity(3, text.as_bytes()));
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        while let Some(n) = reader.next_line(&mut buf).expect("reads") {
            lines.push((n, String::from_utf8(buf.clone()).expect("utf-8")));
        }
        let expected: Vec<(usize, String)> = Lines::new(text).iter(text).map(|(n, l)| (n, l.to_string())).collect();
        assert_eq!(lines, expected);
        let long = "x".repeat(MAX_LINE_BYTES + 1);
        let mut reader = LineReader::new(std::io::BufReader::new(long.as_bytes()));
        assert!(matches!(reader.next_line(&mut buf), Err(LineError::TooLong)));
    }

    #[test]
    fn lines_count_every_kind_of_line_break() {
        for (text, third) in [("a\nb\nc", 4), ("a\r\nb\r\nc", 6), ("a\rb\rc", 4)] {
            let lines = Lines::new(text);
            assert_eq!(lines.line_of(0), 1);
            assert_eq!(lines.line_of(third), 3, "{text:?}");
            let all: Vec<(usize, &str)> = lines.iter(text).collect();
            assert_eq!(all, vec![(1, "a"), (2, "b"), (3, "c")], "{text:?}");
        }
    }
}
