//! Units of measure. A [`Dim`] is a product of powers of the four base quantities;
//! a [`Unit`] is a literal suffix with its dimension and its scale to base units.
//!
//! Base units (what a number means once units are erased): GPU amounts in cards, CPU in
//! cores, memory in bytes, time in seconds. Dimensionless numbers are counts and fractions.

use std::fmt;

/// Exponents of gpu, cpu, bytes and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Dim {
    pub gpu: i8,
    pub cpu: i8,
    pub bytes: i8,
    pub time: i8,
}

impl Dim {
    pub(crate) const NONE: Dim = Dim { gpu: 0, cpu: 0, bytes: 0, time: 0 };
    pub const GPU: Dim = Dim { gpu: 1, ..Dim::NONE };
    pub const CPU: Dim = Dim { cpu: 1, ..Dim::NONE };
    pub const BYTES: Dim = Dim { bytes: 1, ..Dim::NONE };
    pub const TIME: Dim = Dim { time: 1, ..Dim::NONE };
    pub(crate) const GPU_TIME: Dim = Dim { gpu: 1, time: 1, ..Dim::NONE };

    pub fn is_none(self) -> bool {
        self == Dim::NONE
    }

    pub fn times(self, o: Dim) -> Dim {
        Dim {
            gpu: self.gpu.saturating_add(o.gpu),
            cpu: self.cpu.saturating_add(o.cpu),
            bytes: self.bytes.saturating_add(o.bytes),
            time: self.time.saturating_add(o.time),
        }
    }

    pub fn per(self, o: Dim) -> Dim {
        self.times(o.inv())
    }

    pub(crate) fn inv(self) -> Dim {
        Dim { gpu: -self.gpu, cpu: -self.cpu, bytes: -self.bytes, time: -self.time }
    }

    /// The name of a base unit, for type annotations.
    pub(crate) fn from_name(name: &str) -> Option<Dim> {
        Some(match name {
            "gpu" => Dim::GPU,
            "cpu" => Dim::CPU,
            "bytes" => Dim::BYTES,
            "duration" | "time" => Dim::TIME,
            "number" | "count" | "fraction" => Dim::NONE,
            _ => return None,
        })
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            return f.write_str("number");
        }
        let parts = [("gpu", self.gpu), ("cpu", self.cpu), ("bytes", self.bytes), ("duration", self.time)];
        let mut num = Vec::new();
        let mut den = Vec::new();
        for (name, exp) in parts {
            let side = if exp > 0 { &mut num } else { &mut den };
            for _ in 0..exp.unsigned_abs() {
                side.push(name);
            }
        }
        let num = if num.is_empty() { "1".to_string() } else { num.join("*") };
        if den.is_empty() { write!(f, "{num}") } else { write!(f, "{num}/{}", den.join("/")) }
    }
}

/// A unit suffix on a literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    Gpu,
    Cpu,
    B,
    KB,
    MB,
    GB,
    TB,
    KiB,
    MiB,
    GiB,
    TiB,
    Ms,
    S,
    M,
    H,
    D,
    W,
    Percent,
}

impl Unit {
    pub const ALL: [Unit; 18] = [
        Unit::Gpu,
        Unit::Cpu,
        Unit::B,
        Unit::KB,
        Unit::MB,
        Unit::GB,
        Unit::TB,
        Unit::KiB,
        Unit::MiB,
        Unit::GiB,
        Unit::TiB,
        Unit::Ms,
        Unit::S,
        Unit::M,
        Unit::H,
        Unit::D,
        Unit::W,
        Unit::Percent,
    ];

    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Gpu => "gpu",
            Unit::Cpu => "cpu",
            Unit::B => "B",
            Unit::KB => "KB",
            Unit::MB => "MB",
            Unit::GB => "GB",
            Unit::TB => "TB",
            Unit::KiB => "KiB",
            Unit::MiB => "MiB",
            Unit::GiB => "GiB",
            Unit::TiB => "TiB",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::M => "m",
            Unit::H => "h",
            Unit::D => "d",
            Unit::W => "w",
            Unit::Percent => "%",
        }
    }

    pub fn from_symbol(s: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.symbol() == s)
    }

    pub fn dim(self) -> Dim {
        match self {
            Unit::Gpu => Dim::GPU,
            Unit::Cpu => Dim::CPU,
            Unit::B | Unit::KB | Unit::MB | Unit::GB | Unit::TB => Dim::BYTES,
            Unit::KiB | Unit::MiB | Unit::GiB | Unit::TiB => Dim::BYTES,
            Unit::Ms | Unit::S | Unit::M | Unit::H | Unit::D | Unit::W => Dim::TIME,
            Unit::Percent => Dim::NONE,
        }
    }

    /// Multiply a literal by this to get base units. Every factor is exact in f64
    /// except `%` and `ms`, which divide (see [`Unit::to_base`]).
    fn factor(self) -> f64 {
        const K: f64 = 1024.0;
        match self {
            Unit::Gpu | Unit::Cpu | Unit::B | Unit::S => 1.0,
            Unit::KB => 1e3,
            Unit::MB => 1e6,
            Unit::GB => 1e9,
            Unit::TB => 1e12,
            Unit::KiB => K,
            Unit::MiB => K * K,
            Unit::GiB => K * K * K,
            Unit::TiB => K * K * K * K,
            Unit::M => 60.0,
            Unit::H => 3600.0,
            Unit::D => 86_400.0,
            Unit::W => 604_800.0,
            Unit::Ms | Unit::Percent => 1.0,
        }
    }

    /// The literal's value in base units.
    pub fn to_base(self, value: f64) -> f64 {
        match self {
            Unit::Percent => value / 100.0,
            Unit::Ms => value / 1000.0,
            _ => value * self.factor(),
        }
    }
}
