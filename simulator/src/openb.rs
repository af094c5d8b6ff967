//! The Alibaba GPU cluster trace 2023 ("openb", from "Beware of Fragmentation", ATC '23):
//! its node lists (`sn,cpu_milli,memory_mib,gpu,model`) become clusters and its pod lists
//! (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time`; some files stop after `gpu_milli`) become traces.
//!
//! Every GPU node shares its cards by fractions (pods ask for `gpu_milli` of one card),
//! with no limit on pods per card but the shares; GPU memory is not in the trace.

use crate::cluster_file::{ClusterSpec, NodeDef};
use crate::input::InputError;
use crate::trace::TraceJob;
use gpol_compiler::spec::Request;
use gpol_compiler::spec::{NodeSpec, Sharing};

const MIB: u64 = 1024 * 1024;

/// Whether a CSV header is an openb node list.
pub fn is_node_list(text: &str) -> bool {
    header(text).starts_with("sn,cpu_milli,memory_mib,gpu")
}

/// Whether a CSV header is an openb pod list.
pub fn is_pod_list(text: &str) -> bool {
    header(text).starts_with("name,cpu_milli,memory_mib,num_gpu,gpu_milli")
}

fn header(text: &str) -> &str {
    text.trim_start_matches('\u{feff}').lines().next().unwrap_or("").trim()
}

/// A CSV file with named columns; lookups name the line and column on failure.
struct Table<'t> {
    file: &'t str,
    columns: Vec<String>,
    rows: csv::StringRecordsIntoIter<&'t [u8]>,
}

impl<'t> Table<'t> {
    fn new(text: &'t str, file: &'t str, required: &[&str]) -> Result<Table<'t>, InputError> {
        let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
        let columns: Vec<String> = reader
            .headers()
            .map_err(|e| InputError::new(file, Some(1), None, format!("unreadable header: {e}")))?
            .iter()
            .map(|c| c.trim_start_matches('\u{feff}').to_string())
            .collect();
        for r in required {
            if !columns.iter().any(|c| c == r) {
                return Err(InputError::new(file, Some(1), Some(r), "the header lacks this column"));
            }
        }
        Ok(Table { file, columns, rows: reader.into_records() })
    }

    /// The next row as (line, record).
    fn next(&mut self) -> Option<Result<Row<'_>, InputError>> {
        let record = self.rows.next()?;
        Some(match record {
            Ok(r) => {
                let line = r.position().map_or(0, |p| p.line() as usize);
                Ok(Row { table: self, record: r, line })
            }
            Err(e) => {
                let line = e.position().map(|p| p.line() as usize);
                Err(InputError::new(self.file, line, None, e.to_string()))
            }
        })
    }
}

struct Row<'r> {
    table: &'r Table<'r>,
    record: csv::StringRecord,
    line: usize,
}

impl Row<'_> {
    fn text(&self, column: &str) -> &str {
        self.table.columns.iter().position(|c| c == column).and_then(|i| self.record.get(i)).unwrap_or("")
    }

    fn error(&self, column: &str, message: String) -> InputError {
        InputError::new(self.table.file, Some(self.line), Some(column), message)
    }

    /// A whole number; an empty cell is `None`.
    fn number(&self, column: &str) -> Result<Option<u64>, InputError> {
        let t = self.text(column);
        if t.is_empty() {
            return Ok(None);
        }
        t.parse::<u64>().map(Some).map_err(|_| self.error(column, format!("expected a whole number, found `{t}`")))
    }

    fn required(&self, column: &str) -> Result<u64, InputError> {
        self.number(column)?.ok_or_else(|| self.error(column, "missing".into()))
    }
}

/// Reads an openb node list.
pub fn parse_nodes(text: &str, file: &str) -> Result<ClusterSpec, InputError> {
    let mut table = Table::new(text, file, &["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let mut spec = ClusterSpec { name: file.to_string(), ..ClusterSpec::default() };
    while let Some(row) = table.next() {
        let row = row?;
        let name = row.text("sn").to_string();
        if name.is_empty() {
            return Err(row.error("sn", "missing".into()));
        }
        let cards = row.required("gpu")?;
        let cards = u32::try_from(cards)
            .ok()
            .filter(|&c| c <= 64)
            .ok_or_else(|| row.error("gpu", format!("expected a GPU count of at most 64, found {cards}")))?;
        let model = row.text("model").to_string();
        if cards > 0 && model.is_empty() {
            return Err(row.error("model", "a node with GPUs needs a model".into()));
        }
        spec.nodes.push(NodeDef {
            spec: NodeSpec {
                name,
                model,
                cards,
                card_mem: 0,
                sharing: if cards > 0 { Sharing::Mps } else { Sharing::Exclusive },
                mig: Vec::new(),
                max_clients: if cards > 0 { 1000 } else { 1 },
                cpu_milli: row.required("cpu_milli")?,
                mem: row.required("memory_mib")?.saturating_mul(MIB),
                domains: Vec::new(),
                labels: Vec::new(),
            },
            topology: Vec::new(),
        });
    }
    if spec.nodes.is_empty() {
        return Err(InputError::new(file, None, None, "the node list has no nodes"));
    }
    Ok(spec)
}

/// Reads an openb pod list. A pod arrives at `creation_time` and runs from when it was
/// scheduled until `deletion_time`; files without times give every pod arrival 0 and
/// no end (they are for fill mode). `gpu_spec` limits the GPU models; `qos` becomes the
/// label `qos`.
pub fn parse_pods(text: &str, file: &str) -> Result<Vec<TraceJob>, InputError> {
    let mut table = Table::new(text, file, &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])?;
    let mut jobs = Vec::new();
    while let Some(row) = table.next() {
        let row = row?;
        let created = row.number("creation_time")?.unwrap_or(0);
        let mut j = TraceJob::new(row.text("name"), created.saturating_mul(1000));
        j.line = row.line;
        let ran_from = row.number("scheduled_time")?.unwrap_or(created);
        j.job.duration_ms = row.number("deletion_time")?.map(|end| end.saturating_sub(ran_from).saturating_mul(1000));
        let (gpus, milli) = (row.required("num_gpu")?, row.required("gpu_milli")?);
        j.job.request = match (gpus, milli) {
            (0, _) => Request::None,
            (1, m) if m > 0 && m < 1000 => Request::Fraction(m as u32),
            (k, 1000) => Request::Whole(u32::try_from(k).map_err(|_| row.error("num_gpu", "too many GPUs".into()))?),
            (_, m) => {
                return Err(row.error(
                    "gpu_milli",
                    format!("expected 1–999 for one shared GPU or 1000 for whole GPUs, found {m} with {gpus} GPUs"),
                ));
            }
        };
        j.job.cpu_milli = row.required("cpu_milli")?;
        j.job.mem = row.required("memory_mib")?.saturating_mul(MIB);
        j.job.models = row.text("gpu_spec").split('|').filter(|s| !s.is_empty()).map(str::to_string).collect();
        let qos = row.text("qos");
        if !qos.is_empty() {
            j.job.labels.push(("qos".into(), qos.to_string()));
        }
        jobs.push(j);
    }
    if jobs.is_empty() {
        return Err(InputError::new(file, None, None, "the pod list has no pods"));
    }
    jobs.sort_by_key(|j| j.arrival_ms);
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixtures written for these tests in the trace's format (the real files are only
    // read from ../shared/data when present, never copied).
    const NODES: &str =
        "sn,cpu_milli,memory_mib,gpu,model\nn-0,96000,393216,8,G2\nn-1,64000,262144,2,T4\nc-0,32000,131072,0,\n";
    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
        p-0,12000,16384,1,1000,,LS,Running,100,1100,200\n\
        p-1,6000,12288,1,460,G2|T4,BE,Succeeded,50,150,\n\
        p-2,4000,8192,0,0,,LS,Running,0,10,0\n\
        p-3,8000,8192,8,1000,,Burstable,Pending,300,,\n";

    #[test]
    fn node_lists_become_shared_gpu_nodes() {
        assert!(is_node_list(NODES) && !is_pod_list(NODES));
        let spec = parse_nodes(NODES, "nodes.csv").expect("nodes");
        assert_eq!(spec.nodes.len(), 3);
        assert_eq!(spec.total_gpus(), 10);
        let n = &spec.nodes[0].spec;
        assert_eq!(
            (n.name.as_str(), n.model.as_str(), n.cards, n.cpu_milli, n.mem),
            ("n-0", "G2", 8, 96_000, 384 << 30)
        );
        assert_eq!(n.sharing, Sharing::Mps);
        assert_eq!(spec.nodes[2].spec.cards, 0);
    }

    #[test]
    fn pod_lists_become_traces() {
        assert!(is_pod_list(PODS));
        let jobs = parse_pods(PODS, "pods.csv").expect("pods");
        let names: Vec<&str> = jobs.iter().map(|j| j.job.name.as_str()).collect();
        assert_eq!(names, ["p-2", "p-1", "p-0", "p-3"]);
        let p0 = &jobs[2];
        assert_eq!((p0.arrival_ms, p0.job.duration_ms, p0.job.request), (100_000, Some(900_000), Request::Whole(1)));
        let p1 = &jobs[1];
        assert_eq!((p1.job.duration_ms, p1.job.request), (Some(100_000), Request::Fraction(460)));
        assert_eq!(p1.job.models, ["G2", "T4"]);
        assert_eq!(p1.job.labels, [("qos".to_string(), "BE".to_string())]);
        assert_eq!(jobs[0].job.request, Request::None);
        assert_eq!((jobs[3].job.request, jobs[3].job.duration_ms), (Request::Whole(8), None));
    }

    #[test]
    fn bad_rows_name_line_and_column() {
        let e = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n", "pods.csv")
            .expect_err("bad input");
        assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("gpu_milli")));
        let e = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,x,G2\n", "nodes.csv").expect_err("bad input");
        assert_eq!(e.to_string(), "nodes.csv:2: field `gpu`: expected a whole number, found `x`");
        let e = parse_nodes("sn,cpu_milli,gpu,model\n", "nodes.csv").expect_err("bad input");
        assert_eq!(e.field.as_deref(), Some("memory_mib"));
    }
}
