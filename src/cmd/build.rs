//! `gpolc build`: compile a policy to a relocatable object file with C symbols, or
//! (`--target kueue`) write its quota tree as Kueue's objects.

use super::{CliError, FAILED, OK};
use gpol_compiler::diag::{Code, Diagnostic};
use gpol_compiler::load::CheckedPolicy;
use gpol_kubernetes::kueue::{self, Finding};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// What to build: `object` (a relocatable object file) or `kueue` (Kueue's objects
    /// as YAML).
    #[arg(long, default_value = "object")]
    target: Target,
    /// Where to write (default: the policy's name with `.o`, or `.kueue.yaml`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace a read-only output file.
    #[arg(long)]
    force: bool,
    /// `kueue`: the cluster (as `gpolc sim` reads it), whose capacity a root queue's unset
    /// guarantee is.
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// `kueue`: also write a LocalQueue per ClusterQueue in this namespace (repeatable).
    #[arg(long = "namespace")]
    namespaces: Vec<String>,
    /// `kueue`: write the quotas in force at this local date and time, in the policy's
    /// `timezone` (`2026-11-28T23:00`): the amounts of the quota windows open then
    /// (default: those with no window open).
    #[arg(long, value_name = "DATETIME", conflicts_with = "follow_windows")]
    at: Option<String>,
    /// `kueue`: make Kueue follow the policy's quota windows: a CronJob in this namespace
    /// per window edge applies the quotas of the phase beginning there (with its
    /// ConfigMap, and a ServiceAccount that may patch ClusterQueues and Cohorts).
    #[arg(long, value_name = "NAMESPACE")]
    follow_windows: Option<String>,
    /// `kueue`: the image those CronJobs run (it must have /bin/kubectl).
    #[arg(long, value_name = "IMAGE", default_value = gpol_kubernetes::kueue::windows::DEFAULT_IMAGE, requires = "follow_windows")]
    kubectl_image: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Target {
    Object,
    Kueue,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let kueue_only = args.cluster.is_some() || !args.namespaces.is_empty() || args.at.is_some();
    if args.target == Target::Object && (kueue_only || args.follow_windows.is_some()) {
        return Err(CliError::usage("--cluster, --namespace, --at and --follow-windows are for --target kueue"));
    }
    let extension = match args.target {
        Target::Object => "o",
        Target::Kueue => "kueue.yaml",
    };
    let path = args.output.clone().unwrap_or_else(|| args.policy.with_extension(extension));
    let mut inputs = vec![args.policy.as_path()];
    inputs.extend(args.cluster.as_deref());
    let out = super::output(&path, &inputs, args.force)?;
    let checked = super::check_policy(&args.policy, true, color)?;
    let bytes = match args.target {
        Target::Object => object(&checked)?,
        Target::Kueue => kueue_objects(&checked, &args, color)?,
    };
    super::write_output(&out, &bytes, None)?;
    eprintln!("wrote {} ({} bytes)", out.path().display(), bytes.len());
    Ok(OK)
}

fn object(checked: &CheckedPolicy) -> Result<Vec<u8>, CliError> {
    gpol_compiler::jit::object::object(&checked.analysed.program)
        .map_err(|e| CliError::failed(format!("code generation failed: {e}")).labelled(Code::Backend))
}

fn kueue_objects(checked: &CheckedPolicy, args: &Args, color: bool) -> Result<Vec<u8>, CliError> {
    for ns in args.namespaces.iter().chain(&args.follow_windows) {
        if !kueue::names::is_dns_subdomain(ns) || ns.contains('.') || ns.len() > 63 {
            return Err(CliError::usage(format!(
                "--namespace `{ns}`: not a Kubernetes namespace name (lower-case letters, digits and `-`)"
            )));
        }
    }
    let capacity = match &args.cluster {
        Some(_) => {
            let cluster = super::sim::read(
                &args.cluster,
                ("", ""),
                gpol_compiler::limits::MAX_CLUSTER_BYTES,
                gpol_sim::read_cluster,
            )?;
            // The nodes in service: a cordoned node starts drained (an event at time 0).
            let drained = |name: &str| {
                cluster
                    .events
                    .iter()
                    .any(|e| e.at_ms == 0 && e.node == name && e.kind == gpol_sim::cluster_file::NodeEventKind::Drain)
            };
            let nodes: Vec<_> =
                cluster.nodes.iter().filter(|n| !drained(&n.spec.name)).map(|n| n.spec.clone()).collect();
            Some(kueue::Capacity::of(&nodes))
        }
        None => None,
    };
    let minute = match &args.at {
        Some(text) => {
            let mut clock = gpol_compiler::clock::Clock::of_zone(checked.policy.settings.timezone.as_deref());
            clock.start_at_local(text).map_err(|m| CliError::usage(format!("--at: {m}")))?;
            Some(clock.minute_of_week(0))
        }
        None => None,
    };
    let windows_followed = args.follow_windows.is_some();
    let options = kueue::Options { namespaces: args.namespaces.clone(), capacity, minute, windows_followed };
    let mut translation = kueue::translate(&checked.policy, &options);
    if let Some(namespace) = &args.follow_windows {
        let schedule = kueue::windows::Schedule { namespace: namespace.clone(), image: args.kubectl_image.clone() };
        match kueue::windows::objects(&checked.policy, &options, &schedule, &translation.findings) {
            Ok((objects, _)) if objects.is_empty() => {
                eprintln!("note: the policy has no quota windows: nothing to follow")
            }
            Ok((objects, findings)) => {
                translation.objects.extend(objects);
                translation.findings.extend(findings);
            }
            Err(e) => return Err(CliError::failed(e)),
        }
    }
    let diagnostics: Vec<Diagnostic> = translation.findings.iter().filter_map(diagnostic).collect();
    super::print_diagnostics(&checked.sources, &diagnostics, color);
    // Findings about no one place (priority classes, models, settings), in the same shape.
    for f in translation.findings.iter().filter(|f| f.span.is_none()) {
        match f.enforcer {
            Some(by) => eprintln!(
                "[{}] Warning: Kueue cannot enforce {}\n    {}\n    Help: {}",
                Code::KueueUnenforced,
                f.construct,
                f.message,
                by.text()
            ),
            None => eprintln!(
                "[{}] Error: {} cannot be written as a Kueue object\n    {}",
                Code::KueueInvalid,
                f.construct,
                f.message
            ),
        }
    }
    if translation.findings.iter().any(Finding::is_error) {
        return Err(CliError::reported(FAILED));
    }
    let header = format!(
        "Kueue objects for policy `{}` ({}), written by gpolc {} build --target kueue.",
        checked.policy.name,
        args.policy.display(),
        env!("CARGO_PKG_VERSION")
    );
    kueue::yaml(&translation, &header).map(String::into_bytes).map_err(CliError::failed)
}

/// A finding with a place in the policy, as a diagnostic.
fn diagnostic(f: &Finding) -> Option<Diagnostic> {
    let span = f.span?;
    let code = if f.is_error() { Code::KueueInvalid } else { Code::KueueUnenforced };
    let message = match f.enforcer {
        Some(_) => format!("Kueue cannot enforce {}", f.construct),
        None => format!("{} cannot be written as a Kueue object", f.construct),
    };
    let d = Diagnostic::new(code, span, message).label(f.message.clone());
    Some(match f.enforcer {
        Some(by) => d.help(by.text()),
        None => d,
    })
}
