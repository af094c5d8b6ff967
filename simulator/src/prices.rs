//! GPU prices: what a GPU-hour of each model costs (the cluster spec's `[prices]` table,
//! `gpolc sim --price`), and the [`Cost`] of a run's GPU-hours at those prices.

use crate::report::{Cost, GpuHours};
use std::collections::BTreeMap;

/// Prices per GPU-hour, in whatever currency the user gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    /// By model as written (`h100`, `NVIDIA-H100-80GB-HBM3`): a node's model matches
    /// through gpol's model table, so either spelling prices the other.
    by_model: BTreeMap<String, f64>,
    /// For every model without a price of its own.
    default: Option<f64>,
}

/// A price that cannot be taken.
#[derive(Clone, Debug, PartialEq)]
pub enum PriceError {
    /// Negative, infinite or not a number.
    Negative(f64),
    /// `--price` text that is neither `MODEL=PRICE` nor `PRICE`.
    Malformed(String),
}

impl std::fmt::Display for PriceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PriceError::Negative(price) => write!(f, "a price per GPU-hour is a number of 0 or more, not {price}"),
            PriceError::Malformed(text) => write!(f, "expected MODEL=PRICE (h100=2.50) or PRICE, found `{text}`"),
        }
    }
}

impl std::error::Error for PriceError {}

/// The key of a `[prices]` table and the model of `--price PRICE` that prices every
/// model without its own.
pub const DEFAULT_KEY: &str = "default";

impl Prices {
    pub fn is_empty(&self) -> bool {
        self.by_model.is_empty() && self.default.is_none()
    }

    /// Sets the price of `model` (`default`: of every model without its own), replacing
    /// any before it.
    pub fn set(&mut self, model: &str, price: f64) -> Result<(), PriceError> {
        if !price.is_finite() || price < 0.0 {
            return Err(PriceError::Negative(price));
        }
        if model == DEFAULT_KEY {
            self.default = Some(price);
        } else {
            self.by_model.insert(model.to_string(), price);
        }
        Ok(())
    }

    /// Reads `MODEL=PRICE`, or `PRICE` for every model without its own, as `--price`
    /// takes them.
    pub fn parse_arg(text: &str) -> Result<(String, f64), PriceError> {
        let malformed = || PriceError::Malformed(text.to_string());
        let (model, price) = match text.split_once('=') {
            Some((model, price)) if !model.trim().is_empty() => (model.trim(), price),
            Some(_) => return Err(malformed()),
            None => (DEFAULT_KEY, text),
        };
        let price: f64 = price.trim().parse().map_err(|_| malformed())?;
        let mut probe = Prices::default();
        probe.set(model, price)?;
        Ok((model.to_string(), price))
    }

    /// The price of a GPU-hour of `model`: its own (as written, or the same model by
    /// gpol's table), else the default.
    pub fn of(&self, model: &str) -> Option<f64> {
        if let Some(&p) = self.by_model.get(model) {
            return Some(p);
        }
        let name = gpol_compiler::models::name(model);
        let same = |key: &String| gpol_compiler::models::name(key).eq_ignore_ascii_case(&name);
        self.by_model.iter().find(|(key, _)| same(key)).map(|(_, &p)| p).or(self.default)
    }

    /// Priced models that are none of `models` (a misspelt name prices nothing).
    pub fn unmatched<'p>(&'p self, models: &[&str]) -> Vec<&'p str> {
        let matches = |key: &str| {
            let name = gpol_compiler::models::name(key);
            models.iter().any(|m| *m == key || gpol_compiler::models::name(m).eq_ignore_ascii_case(&name))
        };
        self.by_model.keys().map(String::as_str).filter(|k| !matches(k)).collect()
    }

    /// What each model's GPU-hours cost; `None` without prices. Models with no price
    /// are named in [`Cost::unpriced`] and left out of the sums.
    pub fn cost(&self, hours: &BTreeMap<String, GpuHours>) -> Option<Cost> {
        if self.is_empty() {
            return None;
        }
        let mut cost = Cost::default();
        for (model, h) in hours {
            let Some(price) = self.of(model) else {
                cost.unpriced.push(model.clone());
                continue;
            };
            cost.price_per_gpu_hour.insert(model.clone(), price);
            cost.capacity += h.capacity * price;
            cost.allocated += h.allocated * price;
            cost.idle += h.idle * price;
            cost.allocated_unused += h.allocated_unused * price;
            cost.lost += h.lost * price;
        }
        Some(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours(capacity: f64, allocated: f64, used: f64, lost: f64) -> GpuHours {
        GpuHours { capacity, allocated, used, idle: capacity - allocated, allocated_unused: allocated - used, lost }
    }

    #[test]
    fn each_models_hours_cost_its_price_and_unpriced_models_are_named() {
        let mut p = Prices::default();
        p.set("NVIDIA-H100-80GB-HBM3", 2.5).expect("a price");
        let by_model = BTreeMap::from([
            ("h100".to_string(), hours(100.0, 60.0, 30.0, 2.0)),
            ("a100".to_string(), hours(50.0, 50.0, 50.0, 0.0)),
        ]);
        let c = p.cost(&by_model).expect("priced");
        assert_eq!((c.capacity, c.allocated, c.idle, c.allocated_unused, c.lost), (250.0, 150.0, 100.0, 75.0, 5.0));
        assert_eq!(c.unpriced, vec!["a100".to_string()]);
        assert_eq!(c.price_per_gpu_hour, BTreeMap::from([("h100".to_string(), 2.5)]));
        p.set(DEFAULT_KEY, 1.0).expect("a price");
        let c = p.cost(&by_model).expect("priced");
        assert_eq!((c.idle, c.allocated_unused, c.unpriced.len()), (100.0, 75.0, 0));
        assert_eq!(Prices::default().cost(&by_model), None);
    }

    #[test]
    fn arguments_name_a_model_or_price_every_model() {
        assert_eq!(Prices::parse_arg("h100=2.50"), Ok(("h100".into(), 2.5)));
        assert_eq!(Prices::parse_arg("1.25"), Ok((DEFAULT_KEY.into(), 1.25)));
        for bad in ["h100=", "=2", "h100=cheap", "-1", "h100=NaN", "inf"] {
            assert!(Prices::parse_arg(bad).is_err(), "{bad}");
        }
        let mut p = Prices::default();
        p.set("h100", 2.0).expect("a price");
        p.set("h10", 2.0).expect("a price");
        assert_eq!(p.unmatched(&["NVIDIA-H100-80GB-HBM3", "a100"]), vec!["h10"]);
    }
}
