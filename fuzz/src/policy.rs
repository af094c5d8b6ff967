//! A structure-aware generator of policies that check clean: from the fuzzer's bytes it
//! builds well-typed rules over the schema's fields, with units, `let`s, `if`s,
//! comprehensions over `node.cards_list`, built-ins and helper functions, so that the
//! engines are compared on programs that reach code generation (mutating text instead
//! mostly produces syntax and type errors).

use arbitrary::{Result, Unstructured};

/// Numeric fields of each record, with the unit to divide by to make them plain numbers.
const JOB_NUMBERS: &[(&str, &str)] = &[
    ("priority", ""),
    ("replicas", ""),
    ("min_replicas", ""),
    ("utilization", ""),
    ("evictions", ""),
    ("total_gpus", "1 gpu"),
    ("whole_cards", "1 gpu"),
    ("gpu_fraction", "1 gpu"),
    ("cpu", "1 cpu"),
    ("mem", "1GiB"),
    ("gpu_mem", "1GiB"),
    ("waiting", "1s"),
];
const NODE_NUMBERS: &[(&str, &str)] = &[
    ("max_clients", ""),
    ("cards", "1 gpu"),
    ("free_cards", "1 gpu"),
    ("free_gpu", "1 gpu"),
    ("largest_free_fraction", "1 gpu"),
    ("cpu", "1 cpu"),
    ("cpu_free", "1 cpu"),
    ("mem", "1GiB"),
    ("mem_free", "1GiB"),
    ("gpu_mem", "1GiB"),
];
const CARD_NUMBERS: &[(&str, &str)] =
    &[("index", ""), ("clients", ""), ("max_clients", ""), ("free", "1 gpu"), ("free_mem", "1GiB")];
const JOB_FLAGS: &[&str] = &["bursty", "latency_critical", "preemptible"];
const BUILTINS_1: &[&str] = &["abs", "sqrt", "log", "exp2", "floor", "ceil", "round", "trunc"];
const BUILTINS_2: &[&str] = &["min", "max", "pow", "mod"];
const COMPARISONS: &[&str] = &["<", "<=", ">", ">=", "==", "!="];
const ARITHMETIC: &[&str] = &["+", "-", "*", "/"];

/// What names are in scope while generating: numeric `let`s and comprehension variables.
struct Scope {
    numbers: Vec<String>,
    card: Option<String>,
    /// Whether records are in scope (a helper function sees only its parameters).
    records: bool,
    fresh: u32,
}

impl Scope {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }
}

/// A whole policy: a few helper functions, admits, filters, scores, a card score and
/// order keys, each over the records its rule may read.
pub fn policy(u: &mut Unstructured<'_>) -> Result<String> {
    let mut out = String::from("policy generated\n\nqueue team {}\n");
    let helpers = u.int_in_range(0..=2)?;
    for i in 0..helpers {
        let mut scope = Scope { numbers: vec!["x".into(), "y".into()], card: None, records: false, fresh: 0 };
        let body = number(u, &mut scope, &[], 3)?;
        out += &format!("\nfn helper{i}(x: number, y: number) -> number {{ {body} }}\n");
    }
    let fns: Vec<String> = (0..helpers).map(|i| format!("helper{i}")).collect();
    for i in 0..u.int_in_range(0..=2)? {
        let mut scope = Scope { numbers: Vec::new(), card: None, records: true, fresh: 0 };
        out += &format!("\nadmit a{i} {{ {} }}\n", boolean(u, &mut scope, Roots::Job, &fns, 3)?);
    }
    for i in 0..u.int_in_range(0..=3)? {
        let mut scope = Scope { numbers: Vec::new(), card: None, records: true, fresh: 0 };
        out += &format!("\nfilter f{i} {{ {} }}\n", boolean(u, &mut scope, Roots::JobNode, &fns, 4)?);
    }
    for i in 0..u.int_in_range(1..=3)? {
        let mut scope = Scope { numbers: Vec::new(), card: None, records: true, fresh: 0 };
        let tier = if u.ratio(1, 4)? { format!(" tier {}", u.int_in_range(1..=4)?) } else { String::new() };
        out += &format!("\nscore s{i}{tier} {{ {} }}\n", number(u, &mut scope, &fns, 4)?);
    }
    if u.ratio(1, 3)? {
        let mut scope = Scope { numbers: Vec::new(), card: Some("card".into()), records: true, fresh: 0 };
        out += &format!("\ncard_score c {{ {} }}\n", number(u, &mut scope, &fns, 3)?);
    }
    if u.ratio(1, 2)? {
        let key = job_number(u, 2)?;
        let dir = if u.arbitrary()? { "asc" } else { "desc" };
        out += &format!("\njob_order {{ {key} {dir} }}\n");
    }
    if u.ratio(1, 3)? {
        // Victim rules read two jobs: the generator's job expressions, renamed.
        let mut scope = Scope { numbers: Vec::new(), card: None, records: true, fresh: 0 };
        let when = boolean(u, &mut scope, Roots::Job, &fns, 3)?.replace("job.", "victim.");
        let cost = job_number(u, 2)?.replace("job.", "claimant.");
        out += &format!("\npreempt p {{ when {when} cost {cost} }}\n");
        let key = job_number(u, 2)?.replace("job.", "victim.");
        out += &format!("\nvictim_order {{ {key} desc }}\n");
        let protect = boolean(u, &mut scope, Roots::Job, &fns, 2)?.replace("job.", "victim.");
        out += &format!("\nprotect kept \"kept\" {{ when {protect} }}\n");
    }
    Ok(out)
}

/// Which records a boolean may read.
#[derive(Clone, Copy, PartialEq)]
enum Roots {
    Job,
    JobNode,
}

fn boolean(u: &mut Unstructured<'_>, s: &mut Scope, roots: Roots, fns: &[String], depth: u32) -> Result<String> {
    let num = |u: &mut Unstructured<'_>, s: &mut Scope| match roots {
        Roots::Job => job_number(u, depth.saturating_sub(1)),
        Roots::JobNode => number(u, s, fns, depth.saturating_sub(1)),
    };
    let choices = if depth == 0 { 2 } else { 7 };
    Ok(match u.choose_index(choices)? {
        0 => format!("job.{}", u.choose(JOB_FLAGS)?),
        1 => format!("{} {} {}", num(u, s)?, u.choose(COMPARISONS)?, num(u, s)?),
        2 => format!("({} and {})", boolean(u, s, roots, fns, depth - 1)?, boolean(u, s, roots, fns, depth - 1)?),
        3 => format!("({} or {})", boolean(u, s, roots, fns, depth - 1)?, boolean(u, s, roots, fns, depth - 1)?),
        4 => format!("not ({})", boolean(u, s, roots, fns, depth - 1)?),
        5 if roots == Roots::JobNode && s.card.is_none() => {
            let var = s.name("c");
            s.card = Some(var.clone());
            let body = boolean(u, s, roots, fns, depth - 1)?;
            s.card = None;
            let kind = if u.arbitrary()? { "any" } else { "all" };
            format!("{kind}({var} in node.cards_list: {body})")
        }
        _ => format!("{} {} {}", num(u, s)?, u.choose(COMPARISONS)?, num(u, s)?),
    })
}

/// A plain number over jobs, nodes and (inside a comprehension) cards.
fn number(u: &mut Unstructured<'_>, s: &mut Scope, fns: &[String], depth: u32) -> Result<String> {
    let leaf = |u: &mut Unstructured<'_>, s: &mut Scope| -> Result<String> {
        Ok(match u.choose_index(4)? {
            0 => literal(u)?,
            1 | 2 if !s.records => match s.numbers.is_empty() {
                false => u.choose(&s.numbers)?.clone(),
                true => literal(u)?,
            },
            1 => field("job", u.choose(JOB_NUMBERS)?),
            2 => field("node", u.choose(NODE_NUMBERS)?),
            _ => match (&s.card, s.numbers.is_empty()) {
                (Some(c), _) => field(&c.clone(), u.choose(CARD_NUMBERS)?),
                (None, false) => u.choose(&s.numbers)?.clone(),
                (None, true) => literal(u)?,
            },
        })
    };
    if depth == 0 {
        return leaf(u, s);
    }
    Ok(match u.choose_index(9)? {
        0 | 1 => leaf(u, s)?,
        2 => format!("({} {} {})", number(u, s, fns, depth - 1)?, u.choose(ARITHMETIC)?, number(u, s, fns, depth - 1)?),
        3 => format!("{}({})", u.choose(BUILTINS_1)?, number(u, s, fns, depth - 1)?),
        4 => format!("{}({}, {})", u.choose(BUILTINS_2)?, number(u, s, fns, depth - 1)?, number(u, s, fns, depth - 1)?),
        5 => {
            let cond = number(u, s, fns, depth - 1)?;
            let limit = literal(u)?;
            let (a, b) = (number(u, s, fns, depth - 1)?, number(u, s, fns, depth - 1)?);
            format!("(if {cond} > {limit} then {a} else {b})")
        }
        6 => {
            let name = s.name("v");
            let value = number(u, s, fns, depth - 1)?;
            s.numbers.push(name.clone());
            let body = number(u, s, fns, depth - 1)?;
            s.numbers.pop();
            format!("{{ let {name} = {value}; {body} }}")
        }
        7 if s.card.is_none() && s.records => {
            let var = s.name("c");
            s.card = Some(var.clone());
            let body = number(u, s, fns, depth - 1)?;
            s.card = None;
            let kind = u.choose(&["sum", "min", "max"])?;
            format!("{kind}({var} in node.cards_list: {body})")
        }
        8 if !fns.is_empty() && s.records => {
            let f = u.choose(fns)?;
            format!("{f}({}, {})", number(u, s, fns, depth - 1)?, number(u, s, fns, depth - 1)?)
        }
        _ => leaf(u, s)?,
    })
}

/// A plain number over the job alone (admit rules, order keys).
fn job_number(u: &mut Unstructured<'_>, depth: u32) -> Result<String> {
    if depth == 0 || u.ratio(1, 2)? {
        return if u.arbitrary()? { Ok(field("job", u.choose(JOB_NUMBERS)?)) } else { literal(u) };
    }
    Ok(match u.choose_index(3)? {
        0 => format!("({} {} {})", job_number(u, depth - 1)?, u.choose(ARITHMETIC)?, job_number(u, depth - 1)?),
        1 => format!("{}({})", u.choose(BUILTINS_1)?, job_number(u, depth - 1)?),
        _ => format!("max({}, {})", job_number(u, depth - 1)?, job_number(u, depth - 1)?),
    })
}

fn field(base: &str, (name, unit): &(&str, &str)) -> String {
    if unit.is_empty() { format!("{base}.{name}") } else { format!("({base}.{name} / {unit})") }
}

fn literal(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.choose_index(3)? {
        0 => u.int_in_range(0..=8u32)?.to_string(),
        1 => format!("{}.{}", u.int_in_range(0..=99u32)?, u.int_in_range(0..=9u32)?),
        _ => u.int_in_range(0..=100_000u32)?.to_string(),
    })
}
