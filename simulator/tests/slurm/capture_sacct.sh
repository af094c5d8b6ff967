#!/usr/bin/env bash
# Captures simulator/tests/fixtures/slurm/sacct.json, the `sacct --json` history the
# simulator's Slurm history importer (simulator/src/sacct.rs) is tested on, from a real
# Slurm 22.05 (Debian 12 `slurm-wlm`, with slurmdbd and MariaDB) started by
# slurm/tests/slurm/cluster.sh with accounting on, comments kept
# (AccountingStoreFlags=job_comment) and a second partition. The jobs are sacct/scenario.sh's:
# typed and untyped GPUs per node and per job, a two-node gang, a CPU-only job, a failed
# one, one that waited for its begin time, and one cancelled while it waited.
# Run as root: `simulator/tests/slurm/capture_sacct.sh` (about 30 s).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/../fixtures/slurm/sacct.json}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
touch "$DIR/accounting"
cat >"$DIR/slurm-extra.conf" <<CONF
AccountingStoreFlags=job_comment
PartitionName=debug Nodes=gpu-[0-3] MaxTime=60 State=UP
CONF
{ echo "OUT=$DIR/sacct.json"; cat "$HERE/sacct/scenario.sh"; } >"$DIR/scenario.sh"
bash "$HERE/../../../slurm/tests/slurm/cluster.sh" "$DIR" "$DIR/scenario.sh"
mkdir -p "$(dirname "$OUT")"
cp "$DIR/sacct.json" "$OUT"
echo "wrote $OUT"
