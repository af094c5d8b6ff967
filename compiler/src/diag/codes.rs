//! Stable diagnostic codes. A code, once published, keeps its meaning forever; new
//! problems get new codes. `gpolc check --explain CODE` prints the long text.

macro_rules! codes {
    ($( $variant:ident = $code:literal, $title:literal, $explain:literal; )*) => {
        /// Every diagnostic gpol can report.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($variant),* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable code, e.g. `E0007`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code),* }
            }

            /// A one-line title.
            pub fn title(self) -> &'static str {
                match self { $(Code::$variant => $title),* }
            }

            /// The long explanation printed by `gpolc check --explain`.
            pub fn explanation(self) -> &'static str {
                match self { $(Code::$variant => $explain),* }
            }
        }
    };
}

impl Code {
    pub fn parse(s: &str) -> Option<Code> {
        let s = s.trim().to_ascii_uppercase();
        Code::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    pub fn is_warning(self) -> bool {
        self.as_str().starts_with('W')
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

codes! {
    Syntax = "E0001", "syntax error",
"The text does not follow gpol's grammar at the marked place. The message says what the
parser expected there and what it found instead.

    filter f { job.whole_cards > 0 and }
                                       ^ expected an expression after `and`

Common causes: a missing operand, an unclosed `{` or `(`, a misspelt keyword
(`filtre`), or a unit separated from its number by a line break.";

    TooDeep = "E0002", "nesting too deep",
"Expressions and blocks may nest at most 64 levels (brackets, braces, `if`), one
expression may hold at most 256 operators and operands, and no expression may be more
than 256 levels deep. Deeper nesting is almost always
generated text gone wrong; it is refused so that checking stays fast and bounded.

Split the expression with `let` bindings or a helper `fn`.";

    BadLiteral = "E0003", "invalid literal",
"A number, string or name range cannot be read: a number too large for a 64-bit float
(gpol numbers are IEEE doubles), an unknown escape in a string (`\\q`), or a node name
range whose end is before its start (`n[4..1]`).";

    UnknownName = "E0004", "unknown name",
"A name is not defined where it is used. Names come from `let` bindings, `fn`
parameters, comprehension variables, `const` declarations, enum values (`exclusive`,
`mig`, `timeslice`, `mps`) and the records a rule can see (`job`, `node`, `card`,
`queue`, `claimant`, `victim`, `cluster`).

    filter f { nodes.free_cards > 0 }   // `nodes` is not defined; did you mean `node`?";

    UnknownField = "E0005", "unknown field",
"The record has no field of that name. `docs/schema.md` lists every field of `job`,
`node`, `card`, `queue`, `domain`, `cluster`, `shape` and `resources`, with types and
units. A node also has one field per topology level (`node.rack`), and a queue's custom
attributes are read through `queue.attr.NAME`.";

    UnknownFunction = "E0006", "unknown function",
"No built-in, `fn` or imported library function has this name. Built-ins are `min`,
`max`, `abs`, `clamp`, `sqrt`, `exp2`, `log`, `pow`, `hash01`, `has` and `len`. Library
functions are called by their module path after a `use`: `use std.pack` then
`std.pack.binpack(job, node)` (or `pack.binpack(...)`).";

    UnknownModule = "E0007", "unknown or unimported module",
"A `use` names a module that does not exist, or a call goes through a module path that
was not imported. The standard library has `std.pack` and `std.topology`.

    score s { std.pack.binpack(job, node) }   // needs `use std.pack` first

Library modules are imported once at the top of the policy and then called by their
full path or by their last segment (`pack.binpack`). `use std.pack as p` gives a
different short name.";

    TypeMismatch = "E0008", "type mismatch",
"An expression has a different type than its place requires: a string where a number
is needed, a `node` where a `job` is expected, branches of an `if` with different
types, or an operator applied to values it does not work on. The message names both
types.";

    UnitMismatch = "E0009", "unit mismatch",
"Numbers in gpol carry units: gpu, cpu, bytes, duration, or none (counts and
fractions). Adding, subtracting and comparing need the same unit; multiplying and
dividing combine units (`bytes / bytes` is a plain fraction, `gpu * duration` is
GPU-time). The costs of all `preempt` rules are added up and compared, so they need one
unit too.

    filter f { node.gpu_mem > 40 }      // error: bytes compared with a plain number
    filter f { node.gpu_mem > 40GiB }   // fine

A plain number never converts to a unit silently: write the unit on the literal.";

    ArgCount = "E0010", "wrong number of arguments",
"A function was called with more or fewer arguments than it takes. The message gives
the signature.";

    Duplicate = "E0011", "duplicate definition",
"Two definitions share a name where names must be unique: rules of any kind, queues
(anywhere in the tree), constants, functions, priority classes, parameters, test names,
nodes and jobs of one test. The second definition is marked, the first is labelled.";

    Recursion = "E0012", "recursive function",
"gpol functions may not call themselves, directly or through other functions: every
rule must finish in time bounded by the size of its input. The message shows the cycle.
Rewrite the recursion as a comprehension (`sum(c in node.cards_list: ...)`).";

    GuaranteeExceedsParent = "E0013", "children's guarantees exceed the parent's",
"The guarantees of a queue's children add up to more than the queue's own guarantee
for the same resource, so the parent could not honour them all at once. Raise the
parent's guarantee or lower the children's. (A parent without an explicit guarantee
gets the sum of its children's.)";

    LimitBelowGuarantee = "E0014", "limit below guarantee",
"A queue's `limit` for a resource is smaller than its `guarantee`, so the guarantee could
never be used in full. A limit must be at least the guarantee.";

    NegativeQuantity = "E0015", "negative quantity",
"Guarantees, limits, borrow and lend limits, user limits, weights, half-lives and
priority-class values may not be negative (and weights and half-lives must be
positive where stated).";

    NoCohort = "E0016", "borrowing cannot happen here",
"`borrow_limit` and `lend_limit` only mean something for a queue that has a sibling to
borrow from or lend to. The root of the tree, and an only child, have none; the limit
would silently do nothing, so it is refused.";

    NotComparable = "E0017", "order key is not comparable",
"A `queue_order` or `job_order` key must be a number (of any unit) or a boolean
(false sorts before true). Strings, labels, enum values, records and optionals have no
order; convert them, e.g. `job.expected_duration ?? 1h`.";

    NotNumeric = "E0018", "expected a number",
"Scores, costs, weights and tiers are numbers. A `score` or `card_score` body must be a
plain number (no unit) expected in [0, 1]; a preemption `cost` may carry a unit
(`victim.total_gpus * victim.since_checkpoint` is GPU-time); weights are plain
numbers.";

    NotBool = "E0019", "expected a boolean",
"`admit`, `filter` bodies, `when` clauses, `if` conditions, `any`/`all`/`count`
predicates, the operands of `and`/`or`/`not`/`implies` and `expect` conditions must be
booleans.";

    OptionalMisuse = "E0020", "optional value used directly",
"A field marked optional (such as `job.mig_profile` or `job.expected_duration`) may be
absent. It can only be read through `??`, which supplies a default, or tested with
`has(...)`:

    job.expected_duration ?? 1h > 30m
    has(job.mig_profile)";

    UnknownQueue = "E0021", "unknown queue",
"A queue name does not match any queue of the policy's tree. Queue names appear in
string comparisons with `queue.name` (`job.queue.name == \"research\"`) and in tests
(`submit j { queue research }`).";

    UnknownLevel = "E0022", "unknown topology level",
"A topology level is not one the policy declares. Without a `topology` declaration the
levels are `nvlink_domain`, `rack`, `block` and `zone` (smallest first); declare others
with `topology nvlink_domain, rack, pod`.";

    UnknownRule = "E0023", "unknown rule",
"A test expects a job to be pending or rejected `because` of a rule that the policy does
not define. Use the name of an `admit` or `filter` rule, or one of the built-in reasons
`quota`, `capacity`, `order` and `gang`.";

    TestScenario = "E0024", "invalid test scenario",
"A `test` block refers to a node or job that it does not declare, sets a property that
nodes or jobs do not have, or gives a property a value of the wrong kind. The property
tables are in docs/language.md (Tests).";

    NotConstant = "E0025", "expected a constant",
"This place needs a value known when the policy is compiled: `const` values, quota
amounts, weights, tiers, priority-class values, settings and test properties. It may
use literals, other constants and arithmetic, but not `job`, `node`, `queue` or other
records.";

    OutOfScope = "E0026", "record not available in this rule",
"Each kind of rule sees a fixed set of records:

    admit               job, cluster
    filter, score       job, node, cluster
    card_score          job, node, card, cluster
    queue_order         queue, cluster
    job_order, gang     job, cluster
    preempt, reclaim    claimant, victim, cluster

An admit rule runs before any node is looked at, so it cannot read `node`; a
filter that needs a queue reads it through `job.queue`.";

    StringOp = "E0027", "strings only support equality and membership",
"Strings and labels can be compared with `==` and `!=`, tested with `in` / `not in`
against a list, and hashed with `hash01`. They have no order and no arithmetic.";

    BadAttr = "E0028", "queue attribute undefined or inconsistent",
"A rule reads `queue.attr.NAME` but some leaf queue neither defines the attribute nor
inherits it from an ancestor, or two queues give it values of different types. Define
a default on the root queue.";

    BadSetting = "E0029", "unknown or invalid setting",
"`settings { ... }` accepts `queueing strict|best_effort` (the default for leaf queues;
a queue may override it with its own `queueing`) and `reserve_after DURATION` (how long a
job waits before it may reserve its best domain). The same code reports clauses that
cannot take an option: a `weight` on a tiered score or on a `require` gang clause, and a
`cost` on a `reclaim` rule.";

    MissingHeader = "E0030", "missing or misplaced header",
"A policy file starts with `policy NAME`; a library module with `module PATH`. The
header tells tools what the file is, and names the policy in reports.";

    InvalidUtf8 = "E0031", "file is not UTF-8",
"gpol source files must be UTF-8 text. The first byte that is not valid UTF-8 is
reported. A leading byte-order mark is accepted and ignored; CRLF line ends are fine.";

    Unterminated = "E0032", "unterminated string or comment",
"A string (`\"...`) ends at the end of its line without a closing quote, or a block
comment (`/* ...`) is never closed. Strings cannot span lines; use `\\n` for a newline.";

    NotAList = "E0033", "expected a list",
"Comprehensions (`any`, `all`, `count`, `sum`, `min`, `max`) iterate over a list, and
`in`/`not in` test membership in one. Lists come from fields such as
`node.cards_list`, `job.allowed_models` and `cluster.task_shapes`, or from list
literals `[\"a100\", \"h100\"]`.";

    BadFlavour = "E0034", "GPU model in the wrong place",
"`gpu(MODEL)` (for example `256 gpu(h100)`) scopes a quota to one GPU model. It is only
meaningful in `guarantee`, `limit`, `borrow_limit`, `lend_limit` and `user_limit`
statements, and only on gpu quantities.";

    TierOutOfRange = "E0035", "score tier out of range",
"Score tiers are compared lexicographically before the weighted sum; there are at most
four, numbered 1 to 4 (tier 1 decides first). Scores without a tier are in the weighted
sum.";

    UnknownPriorityClass = "E0036", "unknown priority class",
"A test job names a `priority_class` that the policy does not declare.";

    BadQuota = "E0037", "invalid quota amount",
"A quota statement takes quantities of gpu, cpu or memory (bytes), such as
`guarantee 64 gpu, 256 cpu, 2TiB`. Each resource may appear once per statement.";

    UnknownType = "E0038", "unknown type",
"A type annotation names no type. Types are `number`, `count`, `fraction`, `gpu`,
`cpu`, `bytes`, `duration`, `bool`, `string`, `sharing`, `mig_profile`, the records
`job`, `node`, `card`, `queue`, `domain`, `cluster`, `shape`, `resources`, their lists
`list[T]`, optionals `T?`, and unit products such as `gpu*duration`.";

        NotInModule = "E0039", "declaration not allowed in a library module",
"A library module (`module PATH`) holds `use`, `const` and `fn` declarations only: it is
imported by policies, which own the queue tree, the rules and the tests. Move queues,
rules, settings and tests into a `policy` file that `use`s the module.";

        Backend = "E0040", "code generation failed",
"gpolc could not generate native code for a policy that checked clean. This is a bug in
gpolc, not in the policy: please report it with the policy. The interpreter
(`--engine interp`) runs the same policy without native code.";

        OverBudget = "E0041", "compile-time work over budget",
"Constants are evaluated, and function calls inlined, when the policy is compiled. A
function is copied at every call, so one that calls another twice doubles the work at
each level: twenty levels make a million copies. gpolc stops after 1,000,000 steps of
constant evaluation, or 1,000,000 expressions of inlined code for the whole policy, and
names the chain of calls it was in.

    fn f1(x: number) -> number { f0(x) + f0(x) }   # twice: doubles
    fn f1(x: number) -> number { let y = f0(x); y + y }   # once

Bind a repeated call to a `let` and use the name twice, or restructure the helpers.";

        CostBudget = "E0042", "rule too costly",
"Every rule runs for each job, node or pair of them in every scheduling cycle, so its cost
is bounded when the policy is compiled: loops count at the most elements their lists can
hold (64 cards per node, 64 allowed models, 64 task shapes: docs/limits.md), and a rule
that may take more than 100,000,000 operations per evaluation is refused. Six loops over
`node.cards_list` nested in one another could take 64^6 steps.

`gpolc check --costs` prints every rule's bound. Nest fewer loops, or loop over a
shorter list.";

    EvictionsCycle = "E0043", "evictions cycle",
"For eviction rules no argument proves safe (W0009), `gpolc check` runs small scenarios
on the reference interpreter — one node of 1 or 2 cards, two or three jobs of priority 0
or 10 in the policy's first two leaf queues, the clock advanced in steps of 1 s to 1 h —
and found one in which jobs evict each other until the running jobs are back where they
were, with nothing arriving or ending in between: a ping-pong. The message carries that
scenario as a `test` block that passes on the policy; paste it to watch it happen.

Make the rules asymmetric: require a strictly higher priority, or evict across queues
only by `reclaim` (a queue then takes back only what it was promised).";

    KueueInvalid = "E0044", "cannot be written as Kueue objects",
"`gpolc build --target kueue` writes the policy's queues, priority classes and GPU
models as Kubernetes objects, whose names and values Kubernetes restricts: object names
are lower-case letters, digits and `-` (a queue `team_a` becomes `team-a`; `Team_A`
cannot), GPU models and the products a ResourceFlavor selects (from `--cluster`) must be
valid label values (they select nodes by `nvidia.com/gpu.product`), and Kueue's
priorities are whole 32-bit numbers. Kueue reads every quota into a 64-bit count: CPU in
whole milli-cores, GPUs and memory in whole units, each below 2^63. An amount it would
round up or cannot hold is this error, naming the queue and the amount, never a
quantity written that Kueue reads otherwise; so is a fair-sharing weight finer than a
billionth.

    priority_class urgent = 1.5   // E0044: Kueue's priorities are whole numbers
    guarantee 1e19 gpu            // E0044: more GPUs than a 64-bit count holds
    guarantee 0.5 gpu             // E0044: Kueue would read it as 1

Rename the construct, or give the value Kueue can hold.";

    BadWindow = "E0045", "invalid quota window",
"A quota statement may apply only at certain times of the week, in the cluster clock's
local time (`settings { timezone \"Europe/Berlin\" }`, UTC by default):

    lend_limit 24 gpu from 22:00 to 07:00             // every night
    guarantee 8 gpu on sat, sun                       // all weekend
    limit 64 gpu from 08:00 to 20:00 on weekdays

Times are `HH:MM` on a 24-hour clock (`to 24:00` is midnight at the day's end); a window
that ends before it starts runs past midnight into the next day. Days are `mon` … `sun`,
`weekdays` and `weekends`. The window must not be empty (`from 08:00 to 08:00`). Where
two windows of one queue set the same amount at the same time, the one written later is
in force (`lend_limit 24 gpu from 22:00 to 07:00`, then `lend_limit 32 gpu on weekends`:
32 all weekend, nights included). A policy has at most 256 windowed quota statements.";

    UnusedLet = "W0001", "unused let binding",
"A `let` binding is never read. Remove it, or prefix its name with `_` to keep it.";

    UnusedConst = "W0002", "unused constant",
"A `const` is never read in this policy. Remove it, or prefix its name with `_`.";

    UnusedFn = "W0003", "unused function",
"A `fn` is never called in this policy. Remove it, or prefix its name with `_`.
Library modules may export unused functions freely.";

    ConstantRule = "W0004", "rule is constant",
"After constant folding, this `admit` or `filter` rule is always true (it never rejects
anything) or always false (it rejects everything). Either is almost certainly a mistake.";

    ZeroWeight = "W0005", "score weight is zero",
"A score with weight 0 never influences placement. Remove it, or give it a weight.";

    Shadowing = "W0006", "name shadows another",
"A `let`, parameter or comprehension variable reuses the name of a constant, an outer
binding or a record (`job`, `node`, ...). Reading the code, it is easy to mistake one
for the other; pick a different name.";

    UnusedUse = "W0007", "unused import",
"A `use` imports a module whose functions are never called. Remove it.";

    BidiControl = "W0008", "bidirectional control character",
"The file holds a Unicode bidirectional formatting character (U+202A–U+202E,
U+2066–U+2069, U+200E, U+200F or U+061C), in a comment or a string. Such characters
can make a reviewer see text in a different order than the compiler reads it (\"Trojan
Source\", CVE-2021-42574): a comment can appear to close early, hiding code. gpolc
shows them as `�`. Remove them, or write the text without them.";

    EvictionsNotProved = "W0009", "evictions not proved free of cycles",
"`gpolc check` looks for a proof that no sequence of evictions can bring the running
jobs back to where they were — the ping-pong reviewers fear, where two jobs or queues
evict each other over and over. It knows two arguments:

- an order: every `preempt`, `reclaim` and `borrow` rule's condition puts the claimant
  strictly above the victim in one order of static job fields
  (`claimant.priority > victim.priority`, or a higher priority and then an earlier
  submission), so running jobs only ever rise in it;
- reclaim: the only rules are `reclaim` rules, so every eviction lowers borrowing.

Neither applies to this policy. It may still be safe, but nothing shows it. Make every
eviction rule require a strictly higher priority (a strict `>`, or a gap above 0), or
limit evictions across queues to `reclaim`.

    preempt other_queue { when claimant.queue != victim.queue and victim.runtime >= 1m }
    // W0009: two queues evict each other every two minutes

    preempt by_priority { when claimant.priority > victim.priority }   // proved";

    KueueUnenforced = "W0010", "Kueue cannot enforce this construct",
"`gpolc build --target kueue` writes what Kueue can hold of the policy: the quota tree
(ClusterQueues, Cohorts, ResourceFlavors), priority classes and the preemption settings
whose conditions a victim rule states exactly (`victim.priority < claimant.priority` is
`LowerPriority`). Kueue admits by quota alone; everything else is named by this warning,
with who enforces it instead:

- `gpolc serve`, the kube-scheduler extender, pod by pod: admit, filter and score rules,
  card scores, user limits;
- `gpolc serve`'s preempt verb when kube-scheduler preempts pods: victim rules Kueue
  cannot state (Kueue then gets the widest setting that evicts nothing the rule keeps,
  often `Never`), victim costs and orders;
- nothing yet: gangs, job and queue orders, reservations, which need gpol to own
  admission (docs/kubernetes.md, the gated controller).

docs/kubernetes.md has the table of what each construct becomes.";
}
