#!/usr/bin/env bash
# Starts a real Slurm (Debian's slurm-wlm 22.05) for one test, runs a scenario in it, and
# stops it: `cluster.sh DIR SCENARIO`. DIR holds what the test gives Slurm —
# job_submit.lua, and topology.conf if the test has one — and receives the work
# directory (DIR/work: configuration, state, logs). SCENARIO is a shell script run inside
# the cluster's network namespace with SLURM_CONF set; its output is this script's.
#
# The cluster: 16 nodes gpu-[0-15], 8 fake GPUs each (device nodes made with mknod), in two
# NVLink blocks of eight nodes (the test's topology.conf says so to Slurm) — or the nodes
# DIR/nodes.conf lists, one per line: `NAME GRES` (`ts-0 gpu:h100:8,shard:64`: eight GPUs
# shared as 64 shards) — or the node lines of DIR/slurm-nodes.conf (`gpolc slurm emit`'s),
# each given its address here. DIR/slurm-extra.conf, if any, is added to slurm.conf.
# With DIR/accounting (an empty file), accounting is on: a MariaDB and a slurmdbd of the
# run's own, the cluster `gpol` registered, GPUs (also as gres/gpu:h100) and shards
# counted as TRES (AccountingStorageTRES), and `sacctmgr` usable. Everything runs
# inside a fresh network namespace with only loopback, by PID, and is killed on exit;
# nothing outside DIR is written. Run as root (daemons, mknod, unshare).
set -euo pipefail
[ -n "${GPOL_TRACE:-}" ] && set -x

# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"

DIR=$(cd "$1" && pwd)
SCENARIO=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
WORK=$DIR/work

if [ "${3:-}" != "--inside" ]; then
    # Fresh network and PID namespaces: whatever happens to this script (a test's timeout
    # kills it), every daemon and job dies with the namespace's first process.
    exec unshare --net --pid --fork --kill-child --mount-proc "$0" "$DIR" "$SCENARIO" --inside
fi
# Never inside the host's namespaces: what follows kills every process it can see.
if [ "$(readlink /proc/self/ns/net)" = "$(readlink /proc/1/ns/net 2>/dev/null)" ] && [ "$$" != 1 ]; then
    echo "cluster.sh: --inside only in a namespace of its own" >&2
    exit 2
fi

# Kill what this run started: every process in this fresh namespace but this script's
# own session.
stop_daemons() {
    set +e
    stop_namespace "$(readlink /proc/$$/ns/net)"
    return 0
}
trap stop_daemons EXIT

# start_accounting: MariaDB (its own data directory, on loopback) and slurmdbd, with the
# cluster registered.
start_accounting() {
    mariadb-install-db --no-defaults --user=root --datadir="$WORK/mysql" --skip-test-db \
        --auth-root-authentication-method=normal >"$WORK/log/mariadb-install.log" 2>&1
    # A session of its own, so that the clean-up on exit kills it with the daemons.
    setsid mariadbd --no-defaults --user=root --datadir="$WORK/mysql" --socket="$WORK/run/mysql.sock" \
        --port=3306 --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$WORK/run/mariadb.pid" \
        --log-error="$WORK/log/mariadb.log" </dev/null &
    local sql=(mariadb --no-defaults --socket="$WORK/run/mysql.sock" -u root)
    for _ in $(seq 120); do "${sql[@]}" -e 'select 1' >/dev/null 2>&1 && break; sleep 0.25; done
    "${sql[@]}" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'gpol';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    cat >"$WORK/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.socket
DbdHost=$HOST
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=gpol
StorageLoc=slurm_acct_db
LogFile=$WORK/log/slurmdbd.log
PidFile=$WORK/run/slurmdbd.pid
CONF
    chmod 600 "$WORK/etc/slurmdbd.conf"
    slurmdbd
    for _ in $(seq 120); do
        sacctmgr -n show cluster >/dev/null 2>&1 && break
        sleep 0.25
    done
    sacctmgr -i add cluster gpol >/dev/null
}

ip link set lo up
ip addr add 127.0.0.2/8 dev lo 2>/dev/null || true

rm -rf "$WORK"
mkdir -p "$WORK"/{etc,run,log,state,spool,dev,munge}
chmod 755 "$WORK" "$WORK/munge"
for i in $(seq 0 7); do mknod "$WORK/dev/nvidia$i" c 1 3; done

start_munge "$WORK"

HOST=$(hostname)
if [ -f "$DIR/slurm-nodes.conf" ]; then
    # NAME GRES, then the line itself.
    grep '^NodeName=' "$DIR/slurm-nodes.conf" | while read -r line; do
        name=${line#NodeName=}; name=${name%% *}
        gres=$(echo "$line" | tr ' ' '\n' | sed -n 's/^Gres=//p')
        echo "$name ${gres:-none} $line"
    done >"$WORK/etc/nodes.list"
elif [ -f "$DIR/nodes.conf" ]; then
    cp "$DIR/nodes.conf" "$WORK/etc/nodes.list"
else
    for i in $(seq 0 15); do echo "gpu-$i gpu:h100:8"; done >"$WORK/etc/nodes.list"
fi
mapfile -t NODES < <(cut -d' ' -f1 "$WORK/etc/nodes.list")
topology=none
if [ -f "$DIR/topology.conf" ]; then
    cp "$DIR/topology.conf" "$WORK/etc/topology.conf"
    topology=tree
fi
submit=""
if [ -f "$DIR/job_submit.lua" ]; then
    cp "$DIR/job_submit.lua" "$WORK/etc/job_submit.lua"
    submit="JobSubmitPlugins=lua"
fi
accounting=""
if [ -f "$DIR/accounting" ]; then
    accounting="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HOST
AccountingStoragePass=$WORK/munge/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:h100,gres/shard"
fi
{
    slurm_conf_base "$WORK" "$HOST" | if [ -n "$accounting" ]; then grep -v '^AccountingStorageType='; else cat; fi
    echo "$accounting"
    # The test's own settings (a priority plugin, say).
    [ -f "$DIR/slurm-extra.conf" ] && cat "$DIR/slurm-extra.conf"
    echo "TopologyPlugin=topology/$topology"
    echo "$submit"
    port=17001
    while read -r name gres line; do
        at="NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$port"
        if [ -n "$line" ]; then
            echo "$line $at"
        else
            echo "NodeName=$name $at CPUs=64 RealMemory=512000 Gres=$gres"
        fi
        port=$((port + 1))
    done <"$WORK/etc/nodes.list"
    echo "PartitionName=gpu Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
} >"$WORK/etc/slurm.conf"
{
    echo "AutoDetect=off"
    while read -r name gres _; do
        # gpu:TYPE:N (at most the eight fake devices), and shard:N.
        gpu=$(echo "$gres" | tr ',' '\n' | grep '^gpu:' || true)
        if [ -n "$gpu" ]; then
            IFS=: read -r _ type count <<<"$gpu"
            echo "NodeName=$name Name=gpu Type=$type File=$WORK/dev/nvidia[0-$((count - 1))]"
        fi
        shard=$(echo "$gres" | tr ',' '\n' | sed -n 's/^shard://p')
        [ -n "$shard" ] && echo "NodeName=$name Name=shard Count=$shard"
    done <"$WORK/etc/nodes.list"
} >"$WORK/etc/gres.conf"

export SLURM_CONF=$WORK/etc/slurm.conf
[ -n "$accounting" ] && start_accounting
slurmctld
for name in "${NODES[@]}"; do slurmd -N "$name"; done
for _ in $(seq 120); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "${#NODES[@]}" ] && break
    sleep 0.25
done
if [ "$idle" -lt "${#NODES[@]}" ]; then
    echo "only $idle nodes came up; see $WORK/log" >&2
    exit 1
fi

bash "$SCENARIO"
