//! GPU model names: the one table that turns what NVIDIA's tools print (`nvidia-smi`,
//! GPU feature discovery's `nvidia.com/gpu.product` label: `NVIDIA-H100-80GB-HBM3`,
//! `NVIDIA-A100-SXM4-40GB-MIG-3g.20gb`, `Tesla-V100-SXM2-16GB-SHARED`) into the short
//! names policies write (`gpu(h100)`, `node.gpu_model == "h100"`). Kubernetes nodes,
//! pods' allow-lists and the GRES types of Slurm node lists are read through
//! [`normalise`]. docs/schema.md ("GPU models") prints the table.

/// Product-name stems, most specific first, and gpol's name for each. A product matches
/// when its cleaned name (lower case, no `nvidia`/`tesla` prefix, `_` and spaces as `-`)
/// is the stem or starts with the stem and a `-`.
pub const TABLE: &[(&str, &str)] = &[
    ("gh200", "gh200"),
    ("gb300", "gb300"),
    ("gb200", "gb200"),
    ("b300", "b300"),
    ("b200", "b200"),
    ("h200", "h200"),
    ("h100", "h100"),
    ("h800", "h800"),
    ("h20", "h20"),
    ("a100", "a100"),
    ("a800", "a800"),
    ("a30", "a30"),
    ("a40", "a40"),
    ("a10g", "a10g"),
    ("a10", "a10"),
    ("a16", "a16"),
    ("a2", "a2"),
    ("l40s", "l40s"),
    ("l40", "l40"),
    ("l20", "l20"),
    ("l4", "l4"),
    ("rtx-pro-6000", "rtx-pro-6000"),
    ("rtx-6000-ada", "rtx-6000-ada"),
    ("rtx-a6000", "rtx-a6000"),
    ("v100", "v100"),
    ("v100s", "v100"),
    ("p100", "p100"),
    ("p40", "p40"),
    ("p4", "p4"),
    ("t4", "t4"),
    ("k80", "k80"),
];

/// A product name read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// gpol's name: the table's, else the cleaned product name.
    pub name: String,
    /// Whether the table knows it (an importer warns when not).
    pub known: bool,
    /// The MIG profile of a single-strategy product (`…-MIG-1g.10gb`), as written.
    pub mig_profile: Option<String>,
    /// The product carries the device plugin's `-SHARED` suffix (time-slicing or MPS).
    pub shared: bool,
    /// Memory the name gives (`A100-SXM4-40GB`: 40), GB.
    pub memory_gb: Option<u32>,
}

/// Reads a product name as NVIDIA's tools print it (either spelling: label or
/// `nvidia-smi`), or a name already gpol's (`h100` stays `h100`).
pub fn normalise(product: &str) -> Model {
    let mut text = product.trim().to_string();
    let shared = text.ends_with("-SHARED");
    if shared {
        text.truncate(text.len() - "-SHARED".len());
    }
    let mig_profile = text.find("-MIG-").map(|i| {
        let profile = text[i + "-MIG-".len()..].to_string();
        text.truncate(i);
        profile
    });
    let cleaned: String = text.to_ascii_lowercase().replace([' ', '_'], "-");
    let memory_gb = cleaned.split('-').find_map(|t| t.strip_suffix("gb")?.parse().ok());
    let mut stem = cleaned.as_str();
    for prefix in ["nvidia-", "tesla-", "geforce-"] {
        stem = stem.strip_prefix(prefix).unwrap_or(stem);
    }
    let found = TABLE.iter().find(|(s, _)| stem == *s || stem.strip_prefix(s).is_some_and(|r| r.starts_with('-')));
    let (name, known) = match found {
        Some((_, name)) => (name.to_string(), true),
        None => (stem.to_string(), false),
    };
    Model { name, known, mig_profile, shared, memory_gb }
}

/// gpol's name for a product, whatever the table says (see [`normalise`]).
pub fn name(product: &str) -> String {
    normalise(product).name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidias_product_names_become_gpols_model_names() {
        let cases = [
            ("NVIDIA-H100-80GB-HBM3", "h100"),
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA-H100-NVL", "h100"),
            ("NVIDIA-A100-SXM4-40GB", "a100"),
            ("NVIDIA-A100-80GB-PCIe", "a100"),
            ("A100-SXM4-40GB", "a100"),
            ("NVIDIA-H200", "h200"),
            ("NVIDIA-H20", "h20"),
            ("NVIDIA-GH200-480GB", "gh200"),
            ("NVIDIA-GB200", "gb200"),
            ("NVIDIA-B200", "b200"),
            ("NVIDIA-L40S", "l40s"),
            ("NVIDIA-L4", "l4"),
            ("NVIDIA-A10G", "a10g"),
            ("Tesla-T4", "t4"),
            ("Tesla-V100-SXM2-16GB", "v100"),
            ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtx-pro-6000"),
            ("h100", "h100"),
        ];
        for (product, name) in cases {
            let m = normalise(product);
            assert_eq!((m.name.as_str(), m.known), (name, true), "{product}");
        }
        assert_eq!(
            (normalise("NVIDIA-A100-SXM4-40GB").memory_gb, normalise("NVIDIA-H100-NVL").memory_gb),
            (Some(40), None)
        );
        let single = normalise("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb");
        assert_eq!(
            (single.name.as_str(), single.mig_profile.as_deref(), single.shared),
            ("h100", Some("1g.10gb"), false)
        );
        let shared = normalise("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED");
        assert_eq!(
            (shared.name.as_str(), shared.mig_profile.as_deref(), shared.shared),
            ("a100", Some("1g.5gb"), true)
        );
        let unknown = normalise("NVIDIA-Quantum-X1");
        assert_eq!((unknown.name.as_str(), unknown.known), ("quantum-x1", false));
        // A stem only matches whole: `a10` is not `a100`, `h20` not `h200`.
        assert_eq!((name("NVIDIA-A10"), name("NVIDIA-H200-NVL")), ("a10".to_string(), "h200".to_string()));
    }
}
