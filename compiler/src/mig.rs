//! NVIDIA's MIG geometry: the instance profiles of every data-centre GPU with MIG, from
//! NVIDIA's MIG user guide ("Supported MIG Profiles") and, for boards it does not table
//! (GB200, B300, GB300, GH200 144 GB, H20), mig-parted's default configuration. docs/
//! schema.md ("MIG") prints these tables; the sources are listed there.
//!
//! A profile's name says its compute slices (`3g`) and its memory (`40gb`); how many of
//! the GPU's memory slices it spans, and so where it may start, depends on the GPU: an
//! A100 40 GB's `1g.10gb` spans two of eight, an H100 80 GB's one. So profiles are
//! checked and charged against a [`Gpu`]'s table, chosen by the node's model and card
//! memory.

/// Every MIG profile gpol knows, the values of the `mig_profile` enum. The first six are
/// the A100/H100 80 GB profiles (their indices are stable); `+me` media-extension
/// variants are not separate profiles (importers read them as their base profile, with
/// a warning).
pub(crate) const PROFILES: &[&str] = &[
    "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", // A100/H100 80 GB
    "1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", // A100 40 GB
    "1g.6gb", "2g.12gb", "4g.24gb", // A30
    "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb", // H100 NVL 94 GB
    "3g.48gb", "4g.48gb", "7g.96gb", // H100 96 GB (GH200), H20
    "1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb", // GH200 144 GB
    "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", // H200
    "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb", // B200
    "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb", // GB200
    "1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb", // B300
    "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb", // GB300
    "2g.48gb", "4g.96gb", // RTX PRO 6000 Blackwell
];

/// How many profiles there are: the length of a MIG count vector.
pub const PROFILE_COUNT: usize = PROFILES.len();

/// One profile on one GPU: its memory slices and how many instances fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub profile: &'static str,
    /// Memory slices it spans (of [`Gpu::memory_slices`]).
    pub memory: u8,
    /// Most instances of it on one GPU.
    pub max: u8,
}

/// A GPU model's MIG geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// gpol's model name ([`crate::models`]).
    pub model: &'static str,
    /// Its memory as NVIDIA names it, GB; picks among a model's variants.
    pub memory_gb: u32,
    /// Compute slices: 7, or 4 on the A30 and RTX PRO 6000.
    pub compute_slices: u8,
    /// Memory slices: 8, or 4 where compute is 4.
    pub memory_slices: u8,
    pub slots: &'static [Slot],
}

const fn s(profile: &'static str, memory: u8, max: u8) -> Slot {
    Slot { profile, memory, max }
}

/// A seven-slice GPU: its 1g (one memory slice), 1g (two), 2g, 3g, 4g and 7g profiles,
/// which every such GPU lays out alike (NVIDIA's tables differ only in the names).
macro_rules! gpu7 {
    ($model:literal, $gb:literal, $one:literal, $one_big:literal, $two:literal, $three:literal, $four:literal, $seven:literal) => {
        Gpu {
            model: $model,
            memory_gb: $gb,
            compute_slices: 7,
            memory_slices: 8,
            slots: &[s($one, 1, 7), s($one_big, 2, 4), s($two, 2, 3), s($three, 4, 2), s($four, 4, 1), s($seven, 8, 1)],
        }
    };
}

/// A four-slice GPU (four memory slices too): its 1g, 2g and 4g profiles.
macro_rules! gpu4 {
    ($model:literal, $gb:literal, $one:literal, $two:literal, $four:literal) => {
        Gpu {
            model: $model,
            memory_gb: $gb,
            compute_slices: 4,
            memory_slices: 4,
            slots: &[s($one, 1, 4), s($two, 2, 2), s($four, 4, 1)],
        }
    };
}

/// Every GPU with MIG, most common first: a layout on a node of a model gpol has no
/// table for is read against the first GPU that has all its profiles.
pub const GPUS: &[Gpu] = &[
    gpu7!("a100", 80, "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    gpu7!("h100", 80, "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    gpu7!("a100", 40, "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    gpu4!("a30", 24, "1g.6gb", "2g.12gb", "4g.24gb"),
    gpu7!("h100", 94, "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    gpu7!("gh200", 96, "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    gpu7!("h100", 96, "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    gpu7!("h20", 96, "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    gpu7!("gh200", 144, "1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"),
    gpu7!("h200", 141, "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    gpu7!("b200", 180, "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    gpu7!("gb200", 186, "1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
    gpu7!("b300", 269, "1g.34gb", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
    gpu7!("gb300", 278, "1g.35gb", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
    gpu4!("rtx-pro-6000", 96, "1g.24gb", "2g.48gb", "4g.96gb"),
];

/// A profile's index in the table of profiles ([`crate::schema::MIG_PROFILES`]).
pub fn profile(name: &str) -> Option<u8> {
    PROFILES.iter().position(|p| *p == name).and_then(|i| u8::try_from(i).ok())
}

/// A profile's name.
pub fn name(profile: u8) -> &'static str {
    PROFILES.get(usize::from(profile)).copied().unwrap_or("?")
}

/// Compute slices in a profile's name (`3g.40gb`: 3).
pub(crate) fn compute(profile: u8) -> u32 {
    name(profile).split_once('g').and_then(|(c, _)| c.parse().ok()).unwrap_or(0)
}

/// Memory of an instance as its name gives it, in GB (`3g.40gb`: 40).
pub fn memory_gb(profile: u8) -> u64 {
    name(profile).split_once('.').and_then(|(_, m)| m.strip_suffix("gb")).and_then(|m| m.parse().ok()).unwrap_or(0)
}

impl Gpu {
    /// This GPU's slot for a profile, if it has the profile.
    pub fn slot(&self, profile: u8) -> Option<&'static Slot> {
        let n = name(profile);
        self.slots.iter().find(|s| s.profile == n)
    }

    /// A profile's share of this GPU in milli-GPU: its compute slices of the GPU's
    /// (rounded up, so seven 1g instances charge at least a card).
    pub fn milli(&self, profile: u8) -> u32 {
        (1000 * compute(profile)).div_ceil(u32::from(self.compute_slices.max(1)))
    }

    /// Whether instances of these profiles fit on one GPU together: each a profile of
    /// this GPU within its count, at most its compute slices in all, on memory slices
    /// that do not overlap, each starting where NVIDIA's placement rules allow.
    pub fn fits(&self, layout: &[u8]) -> bool {
        self.misfit(layout).is_none()
    }

    /// Why a layout does not fit on one GPU ([`Gpu::fits`]), or `None` when it does.
    pub(crate) fn misfit(&self, layout: &[u8]) -> Option<String> {
        let compute_used: u32 = layout.iter().map(|&p| compute(p)).sum();
        // Every instance takes a compute slice: this also turns a long layout from a
        // malformed input away before any quadratic work.
        if compute_used > u32::from(self.compute_slices) || layout.len() > usize::from(self.compute_slices) {
            return Some(format!("it needs {compute_used} compute slices; a card has {}", self.compute_slices));
        }
        let mut slots = Vec::with_capacity(layout.len());
        for &p in layout {
            let Some(slot) = self.slot(p) else {
                return Some(format!("{} is not one of this GPU's profiles", name(p)));
            };
            if layout.iter().filter(|&&q| q == p).count() > usize::from(slot.max) {
                return Some(format!("a card holds at most {} {}", slot.max, slot.profile));
            }
            slots.push((slot.memory, compute(p)));
        }
        // Largest first, each where it may start (backtracking over at most seven).
        slots.sort_by_key(|(m, _)| std::cmp::Reverse(*m));
        let total = self.memory_slices;
        fn place(items: &[(u8, u32)], used: u16, total: u8) -> bool {
            let Some((&(size, compute), rest)) = items.split_first() else { return true };
            starts(size, compute, total).into_iter().any(|s| {
                let mask = ((1u16 << size) - 1) << s;
                used & mask == 0 && place(rest, used | mask, total)
            })
        }
        let memory: u8 = slots.iter().map(|(m, _)| m).sum();
        (!place(&slots, 0, total)).then(|| {
            format!(
                "its instances need {memory} of the card's {total} memory slices where NVIDIA's placement rules let them start"
            )
        })
    }
}

/// Where an instance spanning `size` memory slices may start. On eight-slice GPUs
/// (NVIDIA's placement tables): one-slice instances at 0–6, two-slice 1g at 0, 2, 4, 6,
/// 2g at 0, 2, 4, 3g at 0 and 4, 4g and 7g at 0. On four-slice GPUs at any multiple of
/// their size.
fn starts(size: u8, compute: u32, total: u8) -> Vec<u8> {
    if total != 8 {
        return (0..total).step_by(usize::from(size.max(1))).filter(|s| s + size <= total).collect();
    }
    match (size, compute) {
        (1, _) => (0..7).collect(),
        (2, 1) => vec![0, 2, 4, 6],
        (2, _) => vec![0, 2, 4],
        (4, 3) => vec![0, 4],
        _ => vec![0],
    }
}

/// The table a node's cards are read against: its model's (the variant nearest its card
/// memory; with no card memory, the first variant holding the layout) when gpol has one,
/// else the first GPU holding every profile of `layout`.
pub fn gpu_for(model: &str, card_mem: u64, layout: &[u8]) -> Result<&'static Gpu, NoMigTable> {
    let variants = GPUS.iter().filter(|g| g.model == model);
    let holds = |g: &&Gpu| layout.iter().all(|&p| g.slot(p).is_some());
    // NVIDIA's "80GB" is nearer 80 GiB than 80 GB (an H100 reports 81,559 MiB).
    let gib = card_mem as f64 / f64::from(1u32 << 30);
    let chosen = if card_mem == 0 { variants.clone().find(holds) } else { nearest(variants.clone(), gib) };
    if let Some(g) = chosen {
        return match layout.iter().find(|&&p| g.slot(p).is_none()) {
            None => Ok(g),
            Some(&profile) => Err(NoMigTable::NoProfile { model: model.to_string(), gpu: g, profile }),
        };
    }
    GPUS.iter().find(holds).ok_or_else(|| NoMigTable::NoGpu { layout: layout.to_vec() })
}

/// Why no MIG table holds a node's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoMigTable {
    /// The table of the node's model (the variant `gpu`) lacks `profile`.
    NoProfile { model: String, gpu: &'static Gpu, profile: u8 },
    /// No GPU has every profile of the layout together.
    NoGpu { layout: Vec<u8> },
}

impl std::fmt::Display for NoMigTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoMigTable::NoProfile { model, gpu, profile } => write!(
                f,
                "{model} ({} GB) has no MIG profile {}; its profiles: {}",
                gpu.memory_gb,
                name(*profile),
                gpu.slots.iter().map(|s| s.profile).collect::<Vec<_>>().join(", ")
            ),
            NoMigTable::NoGpu { layout } => {
                let names: Vec<&str> = layout.iter().map(|&p| name(p)).collect();
                write!(f, "no GPU has the MIG profiles {} together", names.join(", "))
            }
        }
    }
}

impl std::error::Error for NoMigTable {}

/// The table of a card seen only through one instance profile (a MIG "single strategy"
/// node, whose memory label is the instance's): the model's variant with the profile
/// nearest `memory_gb` (the memory the product name gives, if any), else the first GPU
/// with the profile.
pub fn gpu_for_profile(model: &str, memory_gb: Option<u32>, profile: u8) -> Option<&'static Gpu> {
    let has = |g: &&Gpu| g.slot(profile).is_some();
    let own = GPUS.iter().filter(|g| g.model == model).filter(has);
    let chosen = match memory_gb {
        Some(gb) => nearest(own, f64::from(gb)),
        None => own.clone().next(),
    };
    chosen.or_else(|| GPUS.iter().find(has))
}

/// The GPU whose memory is nearest `gib` (the first of equals).
fn nearest<'a>(gpus: impl Iterator<Item = &'a Gpu>, gib: f64) -> Option<&'a Gpu> {
    gpus.min_by(|a, b| (f64::from(a.memory_gb) - gib).abs().total_cmp(&(f64::from(b.memory_gb) - gib).abs()))
}

/// What a job asking for one instance of `profile` is charged in GPU quota before it is
/// placed: the profile's compute slices of the first GPU that has it (docs/semantics.md).
pub(crate) fn nominal_milli(profile: u8) -> u32 {
    GPUS.iter().find(|g| g.slot(profile).is_some()).map_or(1000, |g| g.milli(profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> u8 {
        profile(name).expect("a known profile")
    }

    #[test]
    fn every_table_names_known_profiles_and_every_profile_has_a_table() {
        for g in GPUS {
            let compute: u32 = g.slots.iter().map(|s| compute(p(s.profile))).max().unwrap_or(0);
            assert_eq!(compute, u32::from(g.compute_slices), "{} {} GB: the full profile", g.model, g.memory_gb);
            for s in g.slots {
                assert!(profile(s.profile).is_some(), "{}: {} unknown", g.model, s.profile);
                assert!(g.fits(&vec![p(s.profile); usize::from(s.max)]), "{} {}×{}", g.model, s.profile, s.max);
                assert!(!g.fits(&vec![p(s.profile); usize::from(s.max) + 1]), "{} {}×{}+1", g.model, s.profile, s.max);
            }
        }
        for name in PROFILES {
            assert!(GPUS.iter().any(|g| g.slot(p(name)).is_some()), "{name} on no GPU");
        }
        assert!(PROFILE_COUNT <= usize::from(u8::MAX));
    }

    #[test]
    fn layouts_follow_nvidias_placement_rules() {
        let h100 = gpu_for("h100", 80 << 30, &[]).expect("h100");
        assert!(h100.fits(&[p("7g.80gb")]));
        assert!(h100.fits(&[p("4g.40gb"), p("3g.40gb")]));
        assert!(h100.fits(&[p("3g.40gb"), p("2g.20gb"), p("1g.10gb"), p("1g.10gb")]));
        assert!(!h100.fits(&[p("7g.80gb"), p("1g.10gb")]));
        assert!(!h100.fits(&[p("4g.40gb"), p("4g.40gb")]), "a 4g instance starts only at 0");
        assert!(!h100.fits(&[p("1g.20gb"); 5]), "ten memory slices");
        assert!(!h100.fits(&[p("1g.5gb")]), "an A100 40 GB profile");
        let why = |layout: &[u8]| h100.misfit(layout).unwrap_or_default();
        assert_eq!(why(&[p("7g.80gb"), p("1g.10gb")]), "it needs 8 compute slices; a card has 7");
        assert_eq!(why(&[p("3g.40gb"); 3]), "it needs 9 compute slices; a card has 7");
        assert_eq!(why(&[p("4g.40gb"), p("2g.20gb")]), "");
        assert_eq!(why(&[p("4g.40gb"); 2]), "it needs 8 compute slices; a card has 7");
        assert_eq!(why(&[p("1g.20gb"); 5]), "a card holds at most 4 1g.20gb");
        assert_eq!(
            why(&[p("3g.40gb"), p("3g.40gb"), p("1g.10gb")]),
            "its instances need 9 of the card's 8 memory slices where NVIDIA's placement rules let them start"
        );
        let a100_40 = gpu_for("a100", 40 << 30, &[]).expect("a100 40");
        assert_eq!(a100_40.memory_gb, 40);
        assert!(a100_40.fits(&[p("3g.20gb"), p("2g.10gb"), p("1g.5gb"), p("1g.5gb")]));
        assert!(!a100_40.fits(&[p("1g.10gb"); 5]), "1g.10gb spans two slices on a 40 GB card");
        let a30 = gpu_for("a30", 24 << 30, &[]).expect("a30");
        assert!(a30.fits(&[p("2g.12gb"), p("1g.6gb"), p("1g.6gb")]));
        assert!(!a30.fits(&[p("4g.24gb"), p("1g.6gb")]));
        assert_eq!((a30.milli(p("1g.6gb")), h100.milli(p("1g.10gb")), h100.milli(p("3g.40gb"))), (250, 143, 429));
    }

    #[test]
    fn a_nodes_table_comes_from_its_model_and_memory_else_from_its_layout() {
        const MIB: u64 = 1 << 20;
        // Card memory as GPU feature discovery reports it (MiB).
        let cases = [("a100", 40_960, 40), ("a100", 81_920, 80), ("h100", 81_559, 80), ("h100", 95_830, 94)];
        for (model, mib, gb) in cases {
            assert_eq!(gpu_for(model, mib * MIB, &[]).map(|g| g.memory_gb), Ok(gb), "{model} {mib} MiB");
        }
        assert_eq!(gpu_for("h200", 143_771 * MIB, &[p("3g.71gb")]).map(|g| g.model), Ok("h200"));
        let e = gpu_for("h200", 143_771 * MIB, &[p("3g.40gb")]).expect_err("not an H200 profile").to_string();
        assert!(e.starts_with("h200 (141 GB) has no MIG profile 3g.40gb; its profiles: 1g.18gb"), "{e}");
        // A model without MIG tables (a test's default `gpu`): the first GPU with the layout.
        assert_eq!(gpu_for("gpu", 80 << 30, &[p("3g.40gb")]).map(|g| (g.model, g.memory_gb)), Ok(("a100", 80)));
        assert_eq!(gpu_for("gpu", 80 << 30, &[p("1g.5gb")]).map(|g| g.memory_gb), Ok(40));
        let e = gpu_for("gpu", 80 << 30, &[p("1g.5gb"), p("1g.6gb")]).expect_err("no such GPU").to_string();
        assert_eq!(e, "no GPU has the MIG profiles 1g.5gb, 1g.6gb together");
        assert_eq!((nominal_milli(p("3g.40gb")), nominal_milli(p("4g.24gb"))), (429, 1000));
        assert_eq!(gpu_for("a100", 0, &[p("3g.40gb")]).map(|g| g.memory_gb), Ok(80), "no card memory: by the layout");
        let single = |model, gb, profile| gpu_for_profile(model, gb, p(profile)).map(|g| (g.model, g.memory_gb));
        assert_eq!(single("a100", Some(40), "1g.10gb"), Some(("a100", 40)), "the name's memory picks the variant");
        assert_eq!(single("a100", None, "1g.10gb"), Some(("a100", 80)));
        assert_eq!(single("gh200", Some(480), "1g.12gb"), Some(("gh200", 96)), "only the 96 GB GH200 has it");
        assert_eq!(single("acme", None, "1g.6gb"), Some(("a30", 24)));
    }
}
