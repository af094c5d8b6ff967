# The jobs of simulator/tests/fixtures/slurm/sacct.json (run by capture_sacct.sh inside
# slurm/tests/slurm/cluster.sh's test cluster: 16 nodes gpu-[0-15] × 8 H100, partitions
# gpu (default, every node) and debug (gpu-[0-3])).
set -e
sacctmgr -i add account research,inference >/dev/null
sacctmgr -i add qos high >/dev/null
sacctmgr -i add user root account=research,inference qos=normal,high >/dev/null
sacctmgr -i modify user root set defaultaccount=research >/dev/null
sbatch -Q -o /dev/null -A research -p gpu --gres=gpu:h100:2 -N1 -c 4 --mem=1000 -t 5 -J train --wrap "sleep 2"
sbatch -Q -o /dev/null -A inference -p debug --gpus=3 -N1 -t 2 -J serve --qos=high --comment "latency_critical=true,team=web" --wrap "sleep 1"
sbatch -Q -o /dev/null -A research -N2 --gres=gpu:8 --mem=2000 -J gang --wrap "sleep 3"
sbatch -Q -o /dev/null -J cpuonly -c 2 --mem=500 --wrap "sleep 1"
sbatch -Q -o /dev/null -J fails --gres=gpu:1 --mem=500 --wrap "exit 3"
sbatch -Q -o /dev/null -J late --gres=gpu:1 --mem=500 -t 1 --begin=now+2 --wrap "sleep 1"
# Never starts: it waits for the whole cluster while the gang holds two nodes, and is
# cancelled.
never=$(sbatch --parsable -o /dev/null -J never -N16 --gres=gpu:8 --mem=500 --wrap "sleep 1")
sleep 1
scancel "$never"
# Every job ended, and accounting has it.
for _ in $(seq 60); do
    [ -z "$(squeue -h)" ] && break
    sleep 0.5
done
sleep 2
sacct --json -a -S 2020-01-01 >"$OUT"
