//! The `errors` list every JSON document of Slurm's commands and of slurmrestd carries
//! besides its data. A command whose slurmctld does not answer still exits 0 and prints a
//! document: measured on 22.05 with slurmctld stopped, `sinfo --json` prints
//! `"errors": [{"error": "Unspecified error", "errno": -1}]` and no nodes, `squeue --json`
//! `[{"description": "Failed while looking for jobs", "error_number": -1, "error":
//! "Unspecified error", "source": "slurm_load_jobs"}]` and no jobs. A reader that skipped
//! the list would take the empty document for an empty cluster or queue.

use serde_json::Value;

/// The messages of an `errors` list: each entry's `description`, `error` and `source`
/// (v0.0.38 to v0.0.45 write some of these), with its error number when not 0; a string
/// entry as it is. Control characters are escaped: the text is the server's.
pub fn messages(list: &[Value]) -> Vec<String> {
    list.iter().map(message).map(|m| crate::command::printable(&m)).collect()
}

/// The messages of a document's `errors` list, if the text is a JSON object that has one.
pub fn of_text(text: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<Value>(text) else { return Vec::new() };
    doc.get("errors").and_then(Value::as_array).map_or_else(Vec::new, |list| messages(list))
}

fn message(entry: &Value) -> String {
    let Value::Object(o) = entry else {
        return entry.as_str().map_or_else(|| entry.to_string(), str::to_string);
    };
    let words: Vec<&str> = ["description", "error", "source"]
        .iter()
        .filter_map(|k| o.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()))
        .collect();
    let number = ["error_number", "errno"].iter().find_map(|k| o.get(*k).and_then(Value::as_i64)).filter(|&n| n != 0);
    match (words.is_empty(), number) {
        (false, Some(n)) => format!("{} (error {n})", words.join(": ")),
        (false, None) => words.join(": "),
        (true, Some(n)) => format!("error {n}"),
        (true, None) => entry.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_data_parsers_errors_read_as_messages() {
        // As Slurm 22.05 printed them with slurmctld stopped.
        let sinfo = json!([{"error": "Unspecified error", "errno": -1}]);
        assert_eq!(messages(sinfo.as_array().expect("a list")), ["Unspecified error (error -1)"]);
        let squeue = json!([{"description": "Failed while looking for jobs", "error_number": -1,
                             "error": "Unspecified error", "source": "slurm_load_jobs"}]);
        assert_eq!(
            messages(squeue.as_array().expect("a list")),
            ["Failed while looking for jobs: Unspecified error: slurm_load_jobs (error -1)"]
        );
        let odd = json!(["plain", {"errno": 5}, {}, 7, {"error": "a\u{1b}[2Jb"}]);
        assert_eq!(messages(odd.as_array().expect("a list")), ["plain", "error 5", "{}", "7", "a\\u{1b}[2Jb"]);
        assert_eq!(of_text(r#"{"errors": [], "jobs": []}"#), Vec::<String>::new());
        assert_eq!(of_text("not JSON"), Vec::<String>::new());
    }
}
