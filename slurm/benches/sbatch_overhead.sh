#!/usr/bin/env bash
# What gpol's job_submit.lua adds to each `sbatch`: `sbatch_overhead.sh [POLICY] [N]`
# (default: slurm/tests/policies/submit_rules.gpol, the policy with the most submit-time
# rules, and 100 submissions). Starts the 16-node test Slurm twice (run as root, with
# slurm-wlm, munge and lua5.1 installed): once with no job_submit plugin, once with the
# policy's job_submit.lua, and times N submissions in each, in rounds that alternate with
# a pass-through script (Slurm's job_submit/lua reloads a script whose file changed), so
# the plugin's own cost and the policy's rules show apart; then the script's own time per
# submission in lua5.1 (job_submit_time.lua). Results are in docs/performance.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
POLICY=${1:-$ROOT/slurm/tests/policies/submit_rules.gpol}
N=${2:-100}
ROUNDS=${ROUNDS:-5}
cd "$ROOT" && cargo build --release --quiet
TMP=$(mktemp -d)
chmod 755 "$TMP" # nobody submits, and reads slurm.conf inside
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bare" "$TMP/lua"
./target/release/gpolc slurm emit "$POLICY" --out "$TMP/lua" >/dev/null 2>&1
printf 'function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end\nfunction slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end\n' >"$TMP/pass.lua"

# times LABEL: N held submissions as an unprivileged user, each a job every rule admits;
# prints LABEL, the mean microseconds per sbatch, and the first and last job ids.
cat >"$TMP/times.sh" <<'SH'
times() {
    local start end before id first=""
    before=$(squeue -h -u nobody -t PD | wc -l)
    start=$(date +%s%N)
    for i in $(seq "$N"); do
        id=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
            sbatch --hold --parsable -J "train$i" -A prod -N 1 --gres=gpu:h100:2 -c 8 --mem=64G \
            -t 60 -o /dev/null --wrap true)
        first=${first:-$id}
    done
    end=$(date +%s%N)
    # Every job admitted (none rejected), so each submission took the same path.
    [ "$(squeue -h -u nobody -t PD | wc -l)" = "$((before + N))" ] || { echo "$1: not every job was admitted" >&2; exit 1; }
    echo "$1 $(( (end - start) / N / 1000 )) $first $id"
}
SH

cat >"$TMP/bare.sh" <<SH
N=$N; . "$TMP/times.sh"
for r in \$(seq $ROUNDS); do times none; scancel --user=nobody; done
SH
cat >"$TMP/lua.sh" <<SH
N=$N; . "$TMP/times.sh"
LUA=\$(dirname "\$SLURM_CONF")/job_submit.lua
cp "\$LUA" "$TMP/gpol.lua"
for r in \$(seq $ROUNDS); do
    cp "$TMP/pass.lua" "\$LUA"; touch -d "+\$r minutes" "\$LUA"; times pass-through
    cp "$TMP/gpol.lua" "\$LUA"; touch -d "+\$r minutes 30 seconds" "\$LUA"; times gpol
    scancel --user=nobody
done
SH
# rounds CLUSTER: each round's wall time per sbatch, and slurmctld's own time for its
# jobs (the `usec=` it logs for each submission RPC, job_submit.lua included).
rounds() {
    bash "$ROOT/slurm/tests/slurm/cluster.sh" "$TMP/$1" "$TMP/$1.sh" >"$TMP/$1.rounds"
    awk 'FNR == NR { if (match($0, /JobId=[0-9]+ .*usec=[0-9]+/)) {
             split(substr($0, RSTART, RLENGTH), f, /[= ]/); usec[f[2]] = f[length(f)] }; next }
         { s = 0; for (i = $3; i <= $4; i++) s += usec[i]; print $1, $2, s / ($4 - $3 + 1) }' \
        "$TMP/$1/work/log/slurmctld.log" "$TMP/$1.rounds"
}
{ rounds bare; rounds lua; } | awk '{ wall[$1] += $2; ctld[$1] += $3; n[$1]++ }
    END { printf "%-13s %12s %14s   (%d rounds of %d)\n", "job_submit", "sbatch wall", "slurmctld RPC", n["none"], N
          for (k in n) printf "%-13s %9.0f µs %11.0f µs\n", k, wall[k] / n[k], ctld[k] / n[k] }' N="$N"
echo "gpol's job_submit.lua alone (lua5.1, one job, 20,000 calls): $(lua5.1 "$ROOT/slurm/benches/job_submit_time.lua" "$TMP/lua/job_submit.lua") µs per submission"
