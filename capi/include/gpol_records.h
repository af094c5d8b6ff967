/* gpol_records.h: the records a `gpolc build` object reads, and its entry points.
 *
 * Generated from gpol's schema (compiler/src/schema) by the gpol-capi crate; do not
 * edit. Regenerate with `GPOL_BLESS=1 cargo test -p gpol-capi --test header`.
 *
 * Every value is in base units as a double (cards, cores, bytes, seconds); strings are
 * interned symbols (GpolSym, 0 for "no value"), enumerations uint8_t, references to
 * queues and domains indices into the context's tables, lists a pointer and a length.
 * The object's code bounds-checks every table and list read against the lengths given,
 * and writes only through its out-pointers. docs/capi.md shows how to link an object.
 */

#ifndef GPOL_RECORDS_H
#define GPOL_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The layout of the records below: an object's `gpol_layout_hash` must equal it. */
#define GPOL_RECORDS_LAYOUT_HASH UINT64_C(0x82e922a35d0125a3)

/* Topology levels a node record holds a domain for. */
#define GPOL_RECORDS_MAX_LEVELS 8

/* Score tiers in GpolEngineResult. */
#define GPOL_RECORDS_MAX_TIERS 4

/* An interned string: the runtime's symbol; 0 is "no value" (a missing label). */
typedef uint32_t GpolSym;

/* A value that may be absent. */
typedef struct GpolOptF64 { double value; bool present; } GpolOptF64;
typedef struct GpolOptU8 { uint8_t value; bool present; } GpolOptU8;
typedef struct GpolOptU32 { uint32_t value; bool present; } GpolOptU32;

struct GpolCardRec;
struct GpolShapeRec;

/* Lists: a pointer and a length. */
typedef struct GpolCardList { const struct GpolCardRec *ptr; size_t len; } GpolCardList;
typedef struct GpolShapeList { const struct GpolShapeRec *ptr; size_t len; } GpolShapeList;
typedef struct GpolSymList { const GpolSym *ptr; size_t len; } GpolSymList;

/* An amount of each resource: a quota, an allocation. */
typedef struct GpolResourcesRec {
    /* GPUs (any model). [GPUs] */
    double gpu;
    /* CPU cores. [cores] */
    double cpu;
    /* Memory. [bytes] */
    double mem;
} GpolResourcesRec;

/* One GPU of a node (`node.cards_list`). */
typedef struct GpolCardRec {
    /* Position of the card in its node, from 0. */
    double index;
    /* GPU model. */
    GpolSym model;
    /* Card memory. [bytes] */
    double mem;
    /* Unallocated card memory. [bytes] */
    double free_mem;
    /* Unallocated share of the card (1 gpu when idle). [GPUs] */
    double free;
    /* Jobs sharing the card. */
    double clients;
    /* Whole cards per replica of the job holding this card (0 when free, shared or partitioned). [GPUs] */
    double holder_cards;
    /* Most jobs that may share the card. */
    double max_clients;
    /* Free MIG instances per profile on this card. [per MIG profile, in the order of gpol's mig_profile enum] */
    double free_mig[58];
} GpolCardRec;

/* A popular request shape of the current workload (`cluster.task_shapes`). */
typedef struct GpolShapeRec {
    /* Whole cards per replica. [GPUs] */
    double whole_cards;
    /* Fraction of one card per replica. [GPUs] */
    double gpu_fraction;
    /* MIG profile, if any. [mig_profile: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb, 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb, 1g.6gb, 2g.12gb, 4g.24gb, 1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb, 3g.48gb, 4g.48gb, 7g.96gb, 1g.18gb, 1g.36gb, 2g.36gb, 3g.72gb, 4g.72gb, 7g.144gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb, 1g.23gb, 1g.45gb, 2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb, 1g.47gb, 2g.47gb, 3g.93gb, 4g.93gb, 7g.186gb, 1g.34gb, 1g.67gb, 2g.67gb, 3g.135gb, 4g.135gb, 7g.269gb, 1g.70gb, 2g.70gb, 3g.139gb, 4g.139gb, 7g.278gb, 2g.48gb, 4g.96gb] */
    GpolOptU8 mig_profile;
    /* CPU cores per replica. [cores] */
    double cpu;
    /* Host memory per replica. [bytes] */
    double mem;
    /* Share of the workload with this shape; weights sum to 1. */
    double weight;
    /* GPU models the shape's jobs may run on (empty: any). */
    GpolSymList allowed_models;
} GpolShapeRec;

/* One topology domain (a rack, an NVLink domain, …) with aggregate free capacity; reached as `node.LEVEL`. */
typedef struct GpolDomainRec {
    /* The domain's name, e.g. "rack-12". */
    GpolSym name;
    /* Nodes in the domain. */
    double nodes;
    /* GPUs in the domain. [GPUs] */
    double cards;
    /* Wholly free cards in the domain. [GPUs] */
    double free_cards;
    /* Free GPU capacity including partly used cards. [GPUs] */
    double free_gpu;
    /* The most wholly free cards on any one node of the domain. [GPUs] */
    double max_free_cards;
} GpolDomainRec;

/* A queue of the policy's quota tree, with its live accounting. */
typedef struct GpolQueueRec {
    /* The queue's name. */
    GpolSym name;
    /* The parent queue (absent at the root). */
    GpolOptU32 parent;
    /* Depth in the tree; the root is 0. */
    double depth;
    /* Guaranteed (nominal) quota, as in force now (quota windows change it). */
    GpolResourcesRec guarantee;
    /* Maximum allocation (infinite when unset), as in force now. */
    GpolResourcesRec limit;
    /* Most it may borrow above its guarantee, as in force now. */
    GpolResourcesRec borrow_limit;
    /* Most of its unused guarantee others may borrow, as in force now. */
    GpolResourcesRec lend_limit;
    /* Fair-share weight (default 1). */
    double weight;
    /* Resources its running jobs hold. */
    GpolResourcesRec allocated;
    /* max(0, allocated − guarantee) per resource. */
    GpolResourcesRec borrowed;
    /* Decayed GPU-time used. [GPUs*seconds] */
    double usage;
    /* max over resources of allocated / cluster total. */
    double dominant_share;
    /* KAI's fair share of the cluster's GPUs: guarantee up to demand, plus what is left split by weight up to demand. */
    double fair_share;
    /* Dominant share if the job in scope were admitted or the victim evicted. */
    double share_after;
    /* `allocated` if the job in scope were admitted or the victim evicted. */
    GpolResourcesRec allocated_after;
    /* `borrowed` if the job in scope were admitted or the victim evicted. */
    GpolResourcesRec borrowed_after;
    /* What the queue's cohort can lend: its parent's pool (a root's own), Kueue's lendable capacity. */
    GpolResourcesRec lendable;
    /* In `queue_order`: how long the queue's next job has waited (0 without one). [seconds] */
    double head_waiting;
    /* In `queue_order`: the GPUs the queue's next job asks for, every replica (0 without one). [GPUs] */
    double head_gpus;
    /* In `queue_order`: the priority of the queue's next job (0 without one). */
    double head_priority;
    /* In `queue_order`: whether the queue's next job fits within its guarantee of what the tree governs. */
    bool head_fits_guarantee;
    /* Jobs waiting in the queue (and its descendants). */
    double pending;
    /* Jobs running in the queue (and its descendants). */
    double running;
} GpolQueueRec;

/* The whole cluster, and the clock. */
typedef struct GpolClusterRec {
    /* The clock: seconds since the start of the run. [seconds] */
    double time;
    /* Time since midnight on the cluster clock, in the policy's `timezone` (UTC by default): `cluster.time_of_day >= 22h`. [seconds] */
    double time_of_day;
    /* The day of the week on the cluster clock: 1 is Monday, 7 is Sunday (ISO 8601). */
    double weekday;
    /* Nodes in the cluster. */
    double nodes;
    /* Capacity of the whole cluster. */
    GpolResourcesRec total;
    /* Unallocated capacity. */
    GpolResourcesRec free;
    /* Popular request shapes of the workload. */
    GpolShapeList task_shapes;
} GpolClusterRec;

/* A node being considered for a job. */
typedef struct GpolNodeRec {
    /* The node's name. */
    GpolSym name;
    /* The node's labels: `node.labels["nvidia.com/gpu.product"]`. [values by the policy's label slots; GpolSym 0: absent] */
    GpolSymList labels;
    /* GPU model, e.g. "h100". */
    GpolSym gpu_model;
    /* GPUs on the node. [GPUs] */
    double cards;
    /* Wholly free cards. [GPUs] */
    double free_cards;
    /* Free GPU capacity including partly used cards. [GPUs] */
    double free_gpu;
    /* The largest free fraction on any single card. [GPUs] */
    double largest_free_fraction;
    /* Free MIG instances per profile: `node.free_mig[1g.10gb]`. [per MIG profile, in the order of gpol's mig_profile enum] */
    double free_mig[58];
    /* Memory per card. [bytes] */
    double gpu_mem;
    /* How the node's cards are shared. [sharing: exclusive, mig, timeslice, mps] */
    uint8_t sharing;
    /* Clients per card under time-slicing or MPS (1 otherwise). */
    double max_clients;
    /* CPU cores. [cores] */
    double cpu;
    /* Unallocated CPU cores. [cores] */
    double cpu_free;
    /* Host memory. [bytes] */
    double mem;
    /* Unallocated host memory. [bytes] */
    double mem_free;
    /* The node's cards, for comprehensions. */
    GpolCardList cards_list;
    /* The node's domain at each topology level: an index into GpolCtx.domains (UINT32_MAX: none, the node is its own domain there). */
    uint32_t domains[8];
} GpolNodeRec;

/* A job waiting to be placed (or, in preemption rules, a running job). */
typedef struct GpolJobRec {
    /* Unique job id. */
    GpolSym id;
    /* The job's name. */
    GpolSym name;
    /* The submitting user. */
    GpolSym user;
    /* The leaf queue the job was submitted to. */
    uint32_t queue;
    /* Numeric priority (from its priority class unless set). */
    double priority;
    /* Name of the job's priority class. */
    GpolSym priority_class;
    /* Whole cards per replica (0 for fractional or MIG jobs). [GPUs] */
    double whole_cards;
    /* Fraction of one card per replica (0 unless fractional). [GPUs] */
    double gpu_fraction;
    /* The MIG profile requested per replica, if any. [mig_profile: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb, 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb, 1g.6gb, 2g.12gb, 4g.24gb, 1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb, 3g.48gb, 4g.48gb, 7g.96gb, 1g.18gb, 1g.36gb, 2g.36gb, 3g.72gb, 4g.72gb, 7g.144gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb, 1g.23gb, 1g.45gb, 2g.45gb, 3g.90gb, 4g.90gb, 7g.180gb, 1g.47gb, 2g.47gb, 3g.93gb, 4g.93gb, 7g.186gb, 1g.34gb, 1g.67gb, 2g.67gb, 3g.135gb, 4g.135gb, 7g.269gb, 1g.70gb, 2g.70gb, 3g.139gb, 4g.139gb, 7g.278gb, 2g.48gb, 4g.96gb] */
    GpolOptU8 mig_profile;
    /* Replicas of a gang (1 for a single-node job). */
    double replicas;
    /* Fewest replicas the job can start with (elastic gangs). */
    double min_replicas;
    /* GPUs over all replicas (a MIG profile counts its compute slices of its GPU's, 3/7 for 3g.40gb). [GPUs] */
    double total_gpus;
    /* GPU memory needed per replica on its card(s). [bytes] */
    double gpu_mem;
    /* GPU models the job may run on (empty: any). */
    GpolSymList allowed_models;
    /* CPU cores per replica. [cores] */
    double cpu;
    /* Host memory per replica. [bytes] */
    double mem;
    /* The job's GPU use comes in bursts (a poor fit for hard MIG slices). */
    bool bursty;
    /* Serving work that must not be time-sliced. */
    bool latency_critical;
    /* Whether the job may be evicted at all. */
    bool preemptible;
    /* Submission time (seconds on the cluster clock). [seconds] */
    double submitted;
    /* Time since submission, or since requeue after an eviction. [seconds] */
    double waiting;
    /* Time since the job started (0 while pending). [seconds] */
    double runtime;
    /* Work that an eviction now would lose. [seconds] */
    double since_checkpoint;
    /* The user's runtime estimate, if given. [seconds] */
    GpolOptF64 expected_duration;
    /* Fraction of its allocation the job really uses (default 1.0). */
    double utilization;
    /* How many times the job has been evicted. */
    double evictions;
    /* The decayed usage of the job's user in its leaf queue (billed as `settings` says; GPU-seconds by default). [GPUs*seconds] */
    double user_usage;
    /* Slurm Fair Tree's FairShare factor of the job's user: its rank ÷ the number of users, in (0, 1]. */
    double fair_tree;
    /* The job's labels: `job.labels["team"]`. [values by the policy's label slots; GpolSym 0: absent] */
    GpolSymList labels;
} GpolJobRec;

/* The evaluation context of one call: the cluster record and the tables rules reach
 * through it. `literals` holds the runtime symbol of each of the policy's string
 * literals, `sym_hashes` a 64-bit hash of each symbol's text (indexed by symbol, for
 * hash01), `attrs` the queues' attribute values as bits (attrs[queue * n_attrs + attr]).
 * A table may be empty (its pointer NULL, its length 0): reads out of range give zero,
 * or the all-zero record `zero_queue` / `zero_domain` point to (required). */
typedef struct GpolCtx {
    const GpolClusterRec *cluster;
    const GpolQueueRec *queues;
    size_t n_queues;
    const GpolDomainRec *domains;
    size_t n_domains;
    const GpolSym *literals;
    size_t n_literals;
    const uint64_t *sym_hashes;
    size_t n_hashes;
    const uint64_t *attrs;
    size_t n_attr_rows;
    size_t n_attrs;
    const GpolQueueRec *zero_queue;
    const GpolDomainRec *zero_domain;
} GpolCtx;

/* What the fused filter and score call writes for each node. */
typedef struct GpolEngineResult {
    /* The node passed every filter. */
    bool feasible;
    /* The filter that rejected it (an index in declaration order; the first that failed
     * in the order the code runs them, cheapest first), 65535 if feasible. */
    uint16_t rejected_by;
    /* The sum of clamped scores per tier, tier 1 first. */
    double tiers[GPOL_RECORDS_MAX_TIERS];
    /* The weighted sum of the untiered clamped scores. */
    double score;
    /* Scores that were NaN or outside [0, 1] (clamped; NaN counts as 0). */
    uint32_t faults;
} GpolEngineResult;

/* The layout checks: a C compiler that lays a record out otherwise stops here. */
_Static_assert(offsetof(GpolOptF64, value) == 0, "GpolOptF64.value is at byte 0 in gpol");
_Static_assert(offsetof(GpolOptF64, present) == 8, "GpolOptF64.present is at byte 8 in gpol");
_Static_assert(sizeof(GpolOptF64) == 16, "GpolOptF64 is 16 bytes in gpol");
_Static_assert(offsetof(GpolOptU8, value) == 0, "GpolOptU8.value is at byte 0 in gpol");
_Static_assert(offsetof(GpolOptU8, present) == 1, "GpolOptU8.present is at byte 1 in gpol");
_Static_assert(sizeof(GpolOptU8) == 2, "GpolOptU8 is 2 bytes in gpol");
_Static_assert(offsetof(GpolOptU32, value) == 0, "GpolOptU32.value is at byte 0 in gpol");
_Static_assert(offsetof(GpolOptU32, present) == 4, "GpolOptU32.present is at byte 4 in gpol");
_Static_assert(sizeof(GpolOptU32) == 8, "GpolOptU32 is 8 bytes in gpol");
_Static_assert(offsetof(GpolCardList, ptr) == 0, "GpolCardList.ptr is at byte 0 in gpol");
_Static_assert(offsetof(GpolCardList, len) == 8, "GpolCardList.len is at byte 8 in gpol");
_Static_assert(sizeof(GpolCardList) == 16, "GpolCardList is 16 bytes in gpol");
_Static_assert(offsetof(GpolShapeList, ptr) == 0, "GpolShapeList.ptr is at byte 0 in gpol");
_Static_assert(offsetof(GpolShapeList, len) == 8, "GpolShapeList.len is at byte 8 in gpol");
_Static_assert(sizeof(GpolShapeList) == 16, "GpolShapeList is 16 bytes in gpol");
_Static_assert(offsetof(GpolSymList, ptr) == 0, "GpolSymList.ptr is at byte 0 in gpol");
_Static_assert(offsetof(GpolSymList, len) == 8, "GpolSymList.len is at byte 8 in gpol");
_Static_assert(sizeof(GpolSymList) == 16, "GpolSymList is 16 bytes in gpol");
_Static_assert(sizeof(GpolSym) == 4, "GpolSym is 4 bytes in gpol");
_Static_assert(offsetof(GpolResourcesRec, gpu) == 0, "GpolResourcesRec.gpu is at byte 0 in gpol");
_Static_assert(offsetof(GpolResourcesRec, cpu) == 8, "GpolResourcesRec.cpu is at byte 8 in gpol");
_Static_assert(offsetof(GpolResourcesRec, mem) == 16, "GpolResourcesRec.mem is at byte 16 in gpol");
_Static_assert(sizeof(GpolResourcesRec) == 24, "GpolResourcesRec is 24 bytes in gpol");
_Static_assert(offsetof(GpolCardRec, index) == 0, "GpolCardRec.index is at byte 0 in gpol");
_Static_assert(offsetof(GpolCardRec, model) == 8, "GpolCardRec.model is at byte 8 in gpol");
_Static_assert(offsetof(GpolCardRec, mem) == 16, "GpolCardRec.mem is at byte 16 in gpol");
_Static_assert(offsetof(GpolCardRec, free_mem) == 24, "GpolCardRec.free_mem is at byte 24 in gpol");
_Static_assert(offsetof(GpolCardRec, free) == 32, "GpolCardRec.free is at byte 32 in gpol");
_Static_assert(offsetof(GpolCardRec, clients) == 40, "GpolCardRec.clients is at byte 40 in gpol");
_Static_assert(offsetof(GpolCardRec, holder_cards) == 48, "GpolCardRec.holder_cards is at byte 48 in gpol");
_Static_assert(offsetof(GpolCardRec, max_clients) == 56, "GpolCardRec.max_clients is at byte 56 in gpol");
_Static_assert(offsetof(GpolCardRec, free_mig) == 64, "GpolCardRec.free_mig is at byte 64 in gpol");
_Static_assert(sizeof(GpolCardRec) == 528, "GpolCardRec is 528 bytes in gpol");
_Static_assert(offsetof(GpolShapeRec, whole_cards) == 0, "GpolShapeRec.whole_cards is at byte 0 in gpol");
_Static_assert(offsetof(GpolShapeRec, gpu_fraction) == 8, "GpolShapeRec.gpu_fraction is at byte 8 in gpol");
_Static_assert(offsetof(GpolShapeRec, mig_profile) == 16, "GpolShapeRec.mig_profile is at byte 16 in gpol");
_Static_assert(offsetof(GpolShapeRec, cpu) == 24, "GpolShapeRec.cpu is at byte 24 in gpol");
_Static_assert(offsetof(GpolShapeRec, mem) == 32, "GpolShapeRec.mem is at byte 32 in gpol");
_Static_assert(offsetof(GpolShapeRec, weight) == 40, "GpolShapeRec.weight is at byte 40 in gpol");
_Static_assert(offsetof(GpolShapeRec, allowed_models) == 48, "GpolShapeRec.allowed_models is at byte 48 in gpol");
_Static_assert(sizeof(GpolShapeRec) == 64, "GpolShapeRec is 64 bytes in gpol");
_Static_assert(offsetof(GpolDomainRec, name) == 0, "GpolDomainRec.name is at byte 0 in gpol");
_Static_assert(offsetof(GpolDomainRec, nodes) == 8, "GpolDomainRec.nodes is at byte 8 in gpol");
_Static_assert(offsetof(GpolDomainRec, cards) == 16, "GpolDomainRec.cards is at byte 16 in gpol");
_Static_assert(offsetof(GpolDomainRec, free_cards) == 24, "GpolDomainRec.free_cards is at byte 24 in gpol");
_Static_assert(offsetof(GpolDomainRec, free_gpu) == 32, "GpolDomainRec.free_gpu is at byte 32 in gpol");
_Static_assert(offsetof(GpolDomainRec, max_free_cards) == 40, "GpolDomainRec.max_free_cards is at byte 40 in gpol");
_Static_assert(sizeof(GpolDomainRec) == 48, "GpolDomainRec is 48 bytes in gpol");
_Static_assert(offsetof(GpolQueueRec, name) == 0, "GpolQueueRec.name is at byte 0 in gpol");
_Static_assert(offsetof(GpolQueueRec, parent) == 4, "GpolQueueRec.parent is at byte 4 in gpol");
_Static_assert(offsetof(GpolQueueRec, depth) == 16, "GpolQueueRec.depth is at byte 16 in gpol");
_Static_assert(offsetof(GpolQueueRec, guarantee) == 24, "GpolQueueRec.guarantee is at byte 24 in gpol");
_Static_assert(offsetof(GpolQueueRec, limit) == 48, "GpolQueueRec.limit is at byte 48 in gpol");
_Static_assert(offsetof(GpolQueueRec, borrow_limit) == 72, "GpolQueueRec.borrow_limit is at byte 72 in gpol");
_Static_assert(offsetof(GpolQueueRec, lend_limit) == 96, "GpolQueueRec.lend_limit is at byte 96 in gpol");
_Static_assert(offsetof(GpolQueueRec, weight) == 120, "GpolQueueRec.weight is at byte 120 in gpol");
_Static_assert(offsetof(GpolQueueRec, allocated) == 128, "GpolQueueRec.allocated is at byte 128 in gpol");
_Static_assert(offsetof(GpolQueueRec, borrowed) == 152, "GpolQueueRec.borrowed is at byte 152 in gpol");
_Static_assert(offsetof(GpolQueueRec, usage) == 176, "GpolQueueRec.usage is at byte 176 in gpol");
_Static_assert(offsetof(GpolQueueRec, dominant_share) == 184, "GpolQueueRec.dominant_share is at byte 184 in gpol");
_Static_assert(offsetof(GpolQueueRec, fair_share) == 192, "GpolQueueRec.fair_share is at byte 192 in gpol");
_Static_assert(offsetof(GpolQueueRec, share_after) == 200, "GpolQueueRec.share_after is at byte 200 in gpol");
_Static_assert(offsetof(GpolQueueRec, allocated_after) == 208, "GpolQueueRec.allocated_after is at byte 208 in gpol");
_Static_assert(offsetof(GpolQueueRec, borrowed_after) == 232, "GpolQueueRec.borrowed_after is at byte 232 in gpol");
_Static_assert(offsetof(GpolQueueRec, lendable) == 256, "GpolQueueRec.lendable is at byte 256 in gpol");
_Static_assert(offsetof(GpolQueueRec, head_waiting) == 280, "GpolQueueRec.head_waiting is at byte 280 in gpol");
_Static_assert(offsetof(GpolQueueRec, head_gpus) == 288, "GpolQueueRec.head_gpus is at byte 288 in gpol");
_Static_assert(offsetof(GpolQueueRec, head_priority) == 296, "GpolQueueRec.head_priority is at byte 296 in gpol");
_Static_assert(offsetof(GpolQueueRec, head_fits_guarantee) == 304, "GpolQueueRec.head_fits_guarantee is at byte 304 in gpol");
_Static_assert(offsetof(GpolQueueRec, pending) == 312, "GpolQueueRec.pending is at byte 312 in gpol");
_Static_assert(offsetof(GpolQueueRec, running) == 320, "GpolQueueRec.running is at byte 320 in gpol");
_Static_assert(sizeof(GpolQueueRec) == 328, "GpolQueueRec is 328 bytes in gpol");
_Static_assert(offsetof(GpolClusterRec, time) == 0, "GpolClusterRec.time is at byte 0 in gpol");
_Static_assert(offsetof(GpolClusterRec, time_of_day) == 8, "GpolClusterRec.time_of_day is at byte 8 in gpol");
_Static_assert(offsetof(GpolClusterRec, weekday) == 16, "GpolClusterRec.weekday is at byte 16 in gpol");
_Static_assert(offsetof(GpolClusterRec, nodes) == 24, "GpolClusterRec.nodes is at byte 24 in gpol");
_Static_assert(offsetof(GpolClusterRec, total) == 32, "GpolClusterRec.total is at byte 32 in gpol");
_Static_assert(offsetof(GpolClusterRec, free) == 56, "GpolClusterRec.free is at byte 56 in gpol");
_Static_assert(offsetof(GpolClusterRec, task_shapes) == 80, "GpolClusterRec.task_shapes is at byte 80 in gpol");
_Static_assert(sizeof(GpolClusterRec) == 96, "GpolClusterRec is 96 bytes in gpol");
_Static_assert(offsetof(GpolNodeRec, name) == 0, "GpolNodeRec.name is at byte 0 in gpol");
_Static_assert(offsetof(GpolNodeRec, labels) == 8, "GpolNodeRec.labels is at byte 8 in gpol");
_Static_assert(offsetof(GpolNodeRec, gpu_model) == 24, "GpolNodeRec.gpu_model is at byte 24 in gpol");
_Static_assert(offsetof(GpolNodeRec, cards) == 32, "GpolNodeRec.cards is at byte 32 in gpol");
_Static_assert(offsetof(GpolNodeRec, free_cards) == 40, "GpolNodeRec.free_cards is at byte 40 in gpol");
_Static_assert(offsetof(GpolNodeRec, free_gpu) == 48, "GpolNodeRec.free_gpu is at byte 48 in gpol");
_Static_assert(offsetof(GpolNodeRec, largest_free_fraction) == 56, "GpolNodeRec.largest_free_fraction is at byte 56 in gpol");
_Static_assert(offsetof(GpolNodeRec, free_mig) == 64, "GpolNodeRec.free_mig is at byte 64 in gpol");
_Static_assert(offsetof(GpolNodeRec, gpu_mem) == 528, "GpolNodeRec.gpu_mem is at byte 528 in gpol");
_Static_assert(offsetof(GpolNodeRec, sharing) == 536, "GpolNodeRec.sharing is at byte 536 in gpol");
_Static_assert(offsetof(GpolNodeRec, max_clients) == 544, "GpolNodeRec.max_clients is at byte 544 in gpol");
_Static_assert(offsetof(GpolNodeRec, cpu) == 552, "GpolNodeRec.cpu is at byte 552 in gpol");
_Static_assert(offsetof(GpolNodeRec, cpu_free) == 560, "GpolNodeRec.cpu_free is at byte 560 in gpol");
_Static_assert(offsetof(GpolNodeRec, mem) == 568, "GpolNodeRec.mem is at byte 568 in gpol");
_Static_assert(offsetof(GpolNodeRec, mem_free) == 576, "GpolNodeRec.mem_free is at byte 576 in gpol");
_Static_assert(offsetof(GpolNodeRec, cards_list) == 584, "GpolNodeRec.cards_list is at byte 584 in gpol");
_Static_assert(offsetof(GpolNodeRec, domains) == 600, "GpolNodeRec.domains is at byte 600 in gpol");
_Static_assert(sizeof(GpolNodeRec) == 632, "GpolNodeRec is 632 bytes in gpol");
_Static_assert(offsetof(GpolJobRec, id) == 0, "GpolJobRec.id is at byte 0 in gpol");
_Static_assert(offsetof(GpolJobRec, name) == 4, "GpolJobRec.name is at byte 4 in gpol");
_Static_assert(offsetof(GpolJobRec, user) == 8, "GpolJobRec.user is at byte 8 in gpol");
_Static_assert(offsetof(GpolJobRec, queue) == 12, "GpolJobRec.queue is at byte 12 in gpol");
_Static_assert(offsetof(GpolJobRec, priority) == 16, "GpolJobRec.priority is at byte 16 in gpol");
_Static_assert(offsetof(GpolJobRec, priority_class) == 24, "GpolJobRec.priority_class is at byte 24 in gpol");
_Static_assert(offsetof(GpolJobRec, whole_cards) == 32, "GpolJobRec.whole_cards is at byte 32 in gpol");
_Static_assert(offsetof(GpolJobRec, gpu_fraction) == 40, "GpolJobRec.gpu_fraction is at byte 40 in gpol");
_Static_assert(offsetof(GpolJobRec, mig_profile) == 48, "GpolJobRec.mig_profile is at byte 48 in gpol");
_Static_assert(offsetof(GpolJobRec, replicas) == 56, "GpolJobRec.replicas is at byte 56 in gpol");
_Static_assert(offsetof(GpolJobRec, min_replicas) == 64, "GpolJobRec.min_replicas is at byte 64 in gpol");
_Static_assert(offsetof(GpolJobRec, total_gpus) == 72, "GpolJobRec.total_gpus is at byte 72 in gpol");
_Static_assert(offsetof(GpolJobRec, gpu_mem) == 80, "GpolJobRec.gpu_mem is at byte 80 in gpol");
_Static_assert(offsetof(GpolJobRec, allowed_models) == 88, "GpolJobRec.allowed_models is at byte 88 in gpol");
_Static_assert(offsetof(GpolJobRec, cpu) == 104, "GpolJobRec.cpu is at byte 104 in gpol");
_Static_assert(offsetof(GpolJobRec, mem) == 112, "GpolJobRec.mem is at byte 112 in gpol");
_Static_assert(offsetof(GpolJobRec, bursty) == 120, "GpolJobRec.bursty is at byte 120 in gpol");
_Static_assert(offsetof(GpolJobRec, latency_critical) == 121, "GpolJobRec.latency_critical is at byte 121 in gpol");
_Static_assert(offsetof(GpolJobRec, preemptible) == 122, "GpolJobRec.preemptible is at byte 122 in gpol");
_Static_assert(offsetof(GpolJobRec, submitted) == 128, "GpolJobRec.submitted is at byte 128 in gpol");
_Static_assert(offsetof(GpolJobRec, waiting) == 136, "GpolJobRec.waiting is at byte 136 in gpol");
_Static_assert(offsetof(GpolJobRec, runtime) == 144, "GpolJobRec.runtime is at byte 144 in gpol");
_Static_assert(offsetof(GpolJobRec, since_checkpoint) == 152, "GpolJobRec.since_checkpoint is at byte 152 in gpol");
_Static_assert(offsetof(GpolJobRec, expected_duration) == 160, "GpolJobRec.expected_duration is at byte 160 in gpol");
_Static_assert(offsetof(GpolJobRec, utilization) == 176, "GpolJobRec.utilization is at byte 176 in gpol");
_Static_assert(offsetof(GpolJobRec, evictions) == 184, "GpolJobRec.evictions is at byte 184 in gpol");
_Static_assert(offsetof(GpolJobRec, user_usage) == 192, "GpolJobRec.user_usage is at byte 192 in gpol");
_Static_assert(offsetof(GpolJobRec, fair_tree) == 200, "GpolJobRec.fair_tree is at byte 200 in gpol");
_Static_assert(offsetof(GpolJobRec, labels) == 208, "GpolJobRec.labels is at byte 208 in gpol");
_Static_assert(sizeof(GpolJobRec) == 224, "GpolJobRec is 224 bytes in gpol");
_Static_assert(offsetof(GpolCtx, cluster) == 0, "GpolCtx.cluster is at byte 0 in gpol");
_Static_assert(offsetof(GpolCtx, queues) == 8, "GpolCtx.queues is at byte 8 in gpol");
_Static_assert(offsetof(GpolCtx, n_queues) == 16, "GpolCtx.n_queues is at byte 16 in gpol");
_Static_assert(offsetof(GpolCtx, domains) == 24, "GpolCtx.domains is at byte 24 in gpol");
_Static_assert(offsetof(GpolCtx, n_domains) == 32, "GpolCtx.n_domains is at byte 32 in gpol");
_Static_assert(offsetof(GpolCtx, literals) == 40, "GpolCtx.literals is at byte 40 in gpol");
_Static_assert(offsetof(GpolCtx, n_literals) == 48, "GpolCtx.n_literals is at byte 48 in gpol");
_Static_assert(offsetof(GpolCtx, sym_hashes) == 56, "GpolCtx.sym_hashes is at byte 56 in gpol");
_Static_assert(offsetof(GpolCtx, n_hashes) == 64, "GpolCtx.n_hashes is at byte 64 in gpol");
_Static_assert(offsetof(GpolCtx, attrs) == 72, "GpolCtx.attrs is at byte 72 in gpol");
_Static_assert(offsetof(GpolCtx, n_attr_rows) == 80, "GpolCtx.n_attr_rows is at byte 80 in gpol");
_Static_assert(offsetof(GpolCtx, n_attrs) == 88, "GpolCtx.n_attrs is at byte 88 in gpol");
_Static_assert(offsetof(GpolCtx, zero_queue) == 96, "GpolCtx.zero_queue is at byte 96 in gpol");
_Static_assert(offsetof(GpolCtx, zero_domain) == 104, "GpolCtx.zero_domain is at byte 104 in gpol");
_Static_assert(sizeof(GpolCtx) == 112, "GpolCtx is 112 bytes in gpol");
_Static_assert(offsetof(GpolEngineResult, feasible) == 0, "GpolEngineResult.feasible is at byte 0 in gpol");
_Static_assert(offsetof(GpolEngineResult, rejected_by) == 2, "GpolEngineResult.rejected_by is at byte 2 in gpol");
_Static_assert(offsetof(GpolEngineResult, tiers) == 8, "GpolEngineResult.tiers is at byte 8 in gpol");
_Static_assert(offsetof(GpolEngineResult, score) == 40, "GpolEngineResult.score is at byte 40 in gpol");
_Static_assert(offsetof(GpolEngineResult, faults) == 48, "GpolEngineResult.faults is at byte 48 in gpol");
_Static_assert(sizeof(GpolEngineResult) == 56, "GpolEngineResult is 56 bytes in gpol");

/* The object's entry points (one policy each). */

/* The first admit rule (index in declaration order) that refuses the job, or -1. */
int32_t gpol_admit(const GpolCtx *ctx, const GpolJobRec *job);

/* Every filter and score of the policy on `n` nodes for one job: out[i] for nodes[i]. */
void gpol_filter_score(const GpolCtx *ctx, const GpolJobRec *job, const GpolNodeRec *nodes, size_t n,
                       GpolEngineResult *out);

/* The weighted sum of the card_score rules for one card; clamping faults are added to *faults. */
double gpol_card_score(const GpolCtx *ctx, const GpolJobRec *job, const GpolNodeRec *node,
                       const GpolCardRec *card, uint32_t *faults);

/* The queue_order keys of queue `queue` (an index into ctx->queues), one per key. */
void gpol_queue_keys(const GpolCtx *ctx, uint32_t queue, double *keys);

/* The job_order keys of a job, one per key. */
void gpol_job_keys(const GpolCtx *ctx, const GpolJobRec *job, double *keys);

/* Whether gang clause `clause` applies to the job (1) or not (0). */
uint8_t gpol_gang_applies(const GpolCtx *ctx, const GpolJobRec *job, uint32_t clause);

/* Whether victim rule `rule` allows evicting `victim` for `claimant` (1) or not (0), and its cost. */
uint8_t gpol_victim(const GpolCtx *ctx, uint32_t rule, const GpolJobRec *claimant, const GpolJobRec *victim,
                    double *cost);

/* The victim_order keys of `victim` for `claimant`, one per key. */
void gpol_victim_keys(const GpolCtx *ctx, const GpolJobRec *claimant, const GpolJobRec *victim, double *keys);

/* The layout the object was compiled against: compare with GPOL_RECORDS_LAYOUT_HASH (or
 * libgpol's gpol_schema_layout_hash()) before calling anything. */
extern const uint64_t gpol_layout_hash;

/* The functions the object imports, exported by libgpol (declared in gpol.h too). */
double gpol_exp2(double x);
double gpol_log(double x);
double gpol_pow(double x, double y);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* GPOL_RECORDS_H */
