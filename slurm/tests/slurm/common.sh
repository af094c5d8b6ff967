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
