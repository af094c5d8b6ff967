# What every script that starts a test Slurm shares (slurm/tests/slurm/cluster.sh,
# simulator/tests/slurm/capture.sh): source it, then call these inside the run's own
# network namespace.

# start_munge WORK: munged with its own key and socket under WORK/munge, so the host's
# munge (if any) is untouched.
start_munge() {
    local work=$1
    head -c 1024 /dev/urandom >"$work/munge/munge.key"
    chmod 400 "$work/munge/munge.key"
    munged --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
        --pid-file="$work/run/munged.pid" --log-file="$work/log/munged.log" \
        --seed-file="$work/munge/munged.seed"
}

# slurm_conf_base WORK HOST: the slurm.conf settings every test cluster shares — daemons
# as root with their state and logs under WORK, munge authentication, no accounting,
# cons_tres with GPUs and shards, nodes declaring more than this host has. The caller
# adds the topology, plugins, nodes and partitions.
slurm_conf_base() {
    local work=$1 host=$2
    cat <<CONF
ClusterName=gpol
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd-%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu,shard
ReturnToService=2
CONF
}

# stop_namespace NS: kills what a run started — every process in its fresh network
# namespace NS (slurmstepd and job steps have no pid file). TERM first; KILL what is left
# after 10 s. The calling script's own session (its subshells) is skipped: daemons and
# job steps run in sessions of their own.
in_namespace() {
    local ns=$1 sid pid sess stat
    sid=$(ps -o sess= -p $$ | tr -d ' ')
    ps -eo pid=,sess=,stat= | while read -r pid sess stat; do
        [ "$sess" = "$sid" ] && continue
        case $stat in Z*) continue ;; esac
        [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$ns" ] && echo "$pid"
    done
}
alive() {
    local p
    for p in "$@"; do
        if [ -d "/proc/$p" ] && ! grep -q '^State:.*zombie' "/proc/$p/status" 2>/dev/null; then echo "$p"; fi
    done
}
stop_namespace() {
    local pids
    pids=$(in_namespace "$1")
    [ -n "$pids" ] || return 0
    kill $pids 2>/dev/null
    for _ in $(seq 40); do
        pids=$(alive $pids)
        [ -n "$pids" ] || return 0
        sleep 0.25
    done
    kill -9 $pids 2>/dev/null
    return 0
}
