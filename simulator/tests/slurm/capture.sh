#!/usr/bin/env bash
# Captures the Slurm fixtures the simulator's importer (simulator/src/slurm.rs) is
# tested on, from a real Slurm 22.05 (Debian 12 `slurm-wlm`) started on this host with
# fake GPUs: simulator/tests/fixtures/slurm/sinfo.json, the output of `sinfo --json`.
# It also asks slurmrestd for GET /slurm/v0.0.38/nodes and checks the answer is the same
# document (both come from the openapi/v0.0.38 plugin). Slurm 22.05's scontrol has no
# --json (`scontrol show nodes --json` arrived in 23.02), so there is no scontrol capture.
#
# Run as root: `simulator/tests/slurm/capture.sh` (about 20 s). It is idempotent: every run
# wipes its work directory ($WORK), starts munged, slurmctld and one slurmd per node
# inside a fresh network namespace (loopback only), captures the JSON, and on exit kills
# every process it started. No systemd is needed; nothing outside $WORK and $OUT is
# written.
#
# The cluster (6 nodes, 3 partitions, 2 racks under one spine switch):
#   a100-[1-2]  64 CPUs, 500 GiB, gpu:a100:8 bound to sockets; a100-2 is drained idle (DRAINED)
#   h100-1      96 CPUs, 1 TiB,   gpu:h100:4 and shard:16 (4 shards per card)
#   gpu-1       16 CPUs, 64 GiB,  gpu:2 without a type; runs a job, then is drained (DRAINING)
#   cpu-[1-2]   32 CPUs, 125 GiB, no GPUs; cpu-2's slurmd never starts (NOT_RESPONDING),
#               and it is then set DOWN
# Partitions: gpu (GPU nodes, default), cpu (CPU nodes), all (every node). topology/tree
# with topology.conf (rack1 = a100-*, rack2 = the rest): the node JSON does not show it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../../slurm/tests/slurm/common.sh
. "$HERE/../../../slurm/tests/slurm/common.sh"
OUT=${OUT:-$HERE/../fixtures/slurm}
WORK=${WORK:-/tmp/gpol-slurm-capture}

if [ "${1:-}" != "--inside" ]; then
    for tool in slurmctld munged slurmrestd; do
        if ! command -v "$tool" >/dev/null; then
            apt-get install -y --no-install-recommends slurm-wlm munge slurmrestd
            break
        fi
    done
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    # A fresh network namespace per run: the daemons' ports never clash with anything.
    exec env OUT="$OUT" WORK="$WORK" unshare --net "$0" --inside
fi

# --- inside the namespace -------------------------------------------------------------

stop_daemons() {
    set +e
    stop_namespace "$(readlink /proc/$$/ns/net)"
    return 0
}
trap stop_daemons EXIT

# An earlier run killed before its trap ran leaves its daemons in its own namespace: find
# it from their pid files (if the pid still names a Slurm or munge daemon) and stop it.
for pidfile in "$WORK"/run/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -Eq '^(slurmctld|slurmd|munged)( |$)'; then
        stale=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
        [ "$stale" = "$(readlink /proc/$$/ns/net)" ] || stop_namespace "$stale" || true
    fi
done

# Slurm cannot resolve its addresses with only 127.0.0.1 up.
ip link set lo up
ip addr add 127.0.0.2/8 dev lo 2>/dev/null || true

rm -rf "$WORK"
mkdir -p "$WORK"/{etc,run,log,state,spool,dev,munge}
# slurmrestd runs as nobody and must reach the munge socket.
chmod 755 "$WORK" "$WORK/munge"

# Fake GPU device nodes: slurmd drops GPUs without a File= ("Removing file-less GPU").
for i in $(seq 0 7); do mknod "$WORK/dev/nvidia$i" c 1 3; done

start_munge "$WORK"

HOST=$(hostname)
{
    slurm_conf_base "$WORK" "$HOST"
    cat <<EOF
TopologyPlugin=topology/tree
# cpu-2 never starts: Slurm flags it NOT_RESPONDING after about this many seconds.
SlurmdTimeout=10

NodeName=a100-1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:a100:8 Features=a100,nvlink
NodeName=a100-2 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17002 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:a100:8 Features=a100,nvlink
NodeName=h100-1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17003 CPUs=96 RealMemory=1048576 Gres=gpu:h100:4,shard:16 Features=h100,nvlink,ib
NodeName=gpu-1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17004 CPUs=16 RealMemory=65536 Gres=gpu:2 Features=t4
NodeName=cpu-1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17005 CPUs=32 RealMemory=128000 Features=cpu
NodeName=cpu-2 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17006 CPUs=32 RealMemory=128000 Features=cpu

PartitionName=gpu Nodes=a100-[1-2],h100-1,gpu-1 Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=cpu-[1-2] MaxTime=INFINITE State=UP
PartitionName=all Nodes=ALL MaxTime=INFINITE State=UP
EOF
} >"$WORK/etc/slurm.conf"

cat >"$WORK/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=a100-[1-2] Name=gpu Type=a100 File=$WORK/dev/nvidia[0-3] Cores=0-31
NodeName=a100-[1-2] Name=gpu Type=a100 File=$WORK/dev/nvidia[4-7] Cores=32-63
NodeName=h100-1 Name=gpu Type=h100 File=$WORK/dev/nvidia[0-3]
NodeName=h100-1 Name=shard Count=16
NodeName=gpu-1 Name=gpu File=$WORK/dev/nvidia[0-1]
EOF

cat >"$WORK/etc/topology.conf" <<EOF
SwitchName=rack1 Nodes=a100-[1-2]
SwitchName=rack2 Nodes=h100-1,gpu-1,cpu-[1-2]
SwitchName=spine Switches=rack[1-2]
EOF

export SLURM_CONF=$WORK/etc/slurm.conf
slurmctld
for node in a100-1 a100-2 h100-1 gpu-1 cpu-1; do slurmd -N "$node"; done

# Poll until the five started nodes have registered (at most ~30 s).
for _ in $(seq 60); do
    idle=$(sinfo -h -N -p all -t idle -o '%N' | sort -u | wc -l)
    [ "$idle" -ge 5 ] && break
    sleep 0.5
done
if [ "$idle" -lt 5 ]; then
    echo "only $idle nodes came up; see $WORK/log" >&2
    sinfo -N -p all >&2
    exit 1
fi

# A job on gpu-1, so that draining it leaves it DRAINING (busy) rather than DRAINED.
job=$(sbatch --parsable -p gpu -w gpu-1 --gres=gpu:1 -c 2 --mem=1000 -o /dev/null --wrap 'sleep 600')
for _ in $(seq 60); do
    [ "$(squeue -h -t R | wc -l)" -ge 1 ] && break
    sleep 0.5
done
scontrol update nodename=gpu-1 state=drain reason="driver upgrade"
scontrol update nodename=a100-2 state=drain reason="fan failure"
# cpu-2 died: wait until Slurm notices (NOT_RESPONDING, after SlurmdTimeout), then the
# admin marks it DOWN, which Slurm shows as `down*`.
for _ in $(seq 120); do
    [ "$(sinfo -h -n cpu-2 -t no_respond -o '%N' | wc -l)" -ge 1 ] && break
    sleep 0.5
done
scontrol update nodename=cpu-2 state=down reason="no heartbeat, PSU suspected"

sinfo --json >"$OUT/sinfo.json"
# slurmrestd's nodes endpoint (the same openapi/v0.0.38 plugin), one request read from
# stdin (inetd mode). It refuses to run as root, and its local auth accepts stdin only
# if that is a file or pipe owned by the user it runs as, unreadable by others.
printf 'GET /slurm/v0.0.38/nodes HTTP/1.1\r\nHost: localhost\r\n\r\n' >"$WORK/restd.request"
chown nobody "$WORK/restd.request"
chmod 600 "$WORK/restd.request"
slurmrestd -s openapi/v0.0.38 -a rest_auth/local -u nobody <"$WORK/restd.request" >"$WORK/restd.http" \
    2>"$WORK/log/slurmrestd.log"
# The body follows the first empty line of the HTTP response.
sed '1,/^\r\?$/d' "$WORK/restd.http" >"$WORK/restd.json"
if cmp -s "$OUT/sinfo.json" "$WORK/restd.json"; then
    echo "slurmrestd /slurm/v0.0.38/nodes: the same document as sinfo --json" >&2
else
    echo "slurmrestd /slurm/v0.0.38/nodes differs from sinfo --json: see $WORK/restd.json" >&2
fi

# For a human reading the fixtures: the same state as text.
scontrol show topology >&2
sinfo -N -p all -o '%N %P %t %G %f %c %m %E' >&2

scancel "$job" || true
for _ in $(seq 60); do
    [ "$(squeue -h | wc -l)" -eq 0 ] && break
    sleep 0.5
done
echo "wrote $OUT/sinfo.json" >&2
