-- Runs a rendered cli_filter.lua the way Slurm's cli_filter/lua plugin does for one sbatch: the `slurm` table of
-- the plugin (SUCCESS, ERROR, log_error with printf-style arguments, to stderr as the client prints it), then
-- slurm_cli_setup_defaults and slurm_cli_pre_submit per component in order, offset 0 first, one process; sbatch
-- stops at the first component the filter refuses. Usage: lua5.4 het_job_harness.lua FILTER PARTITION...
-- (one argument per component; "-" for a component without --partition).
slurm = {
  SUCCESS = 0,
  ERROR = -1,
  log_error = function(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end,
  log_info = function(fmt, ...) io.stderr:write(string.format(fmt, ...), "\n") end,
}
dofile(arg[1])
for i = 2, #arg do
  local offset = i - 2
  local options = { type = "sbatch" }
  if arg[i] ~= "-" then
    options["partition"] = arg[i]
  end
  if slurm_cli_setup_defaults(options, false) ~= slurm.SUCCESS
      or slurm_cli_pre_submit(options, offset) ~= slurm.SUCCESS then
    io.stdout:write("refused at component ", offset, "\n")
    os.exit(1)
  end
end
io.stdout:write("submitted ", #arg - 1, " component(s)\n")
