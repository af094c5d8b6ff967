-- gpol's job_submit.lua alone: `lua5.1 job_submit_time.lua job_submit.lua` prints the
-- microseconds per submission of one job every rule of slurm/tests/policies/submit_rules.gpol
-- admits (a stub `slurm` table; used by sbatch_overhead.sh).
slurm = { SUCCESS = 0, ERROR = -1, log_user = function() end, log_info = function() end }
dofile(arg[1])
local job = { name = "train1", user_name = "nobody", account = "prod", qos = nil,
  tres_per_node = "gres:gpu:h100:2", min_nodes = 1, min_cpus = 8, min_mem_per_node = 65536,
  time_limit = 60 }
local n, start = 20000, os.clock()
for _ = 1, n do
  local desc = {}
  for k, v in pairs(job) do desc[k] = v end
  assert(slurm_job_submit(desc, {}, 65534) == slurm.SUCCESS, "the job is admitted")
end
print(string.format("%.1f", (os.clock() - start) / n * 1e6))
