-- gpuforge: a job runs on one side of the VPN (site or cloud), never across it. Rendered from the stack's
-- partitions; the same rule is documented in docs/onprem-hybrid.md ("Heterogeneous jobs").
local side_of = {
  ["cloud"] = "cloud",
  ["site"] = "site",
}
local default_partition = "site"

-- Sides of the components of the job being submitted, by offset (reset at offset 0: a new job).
local sides = {}

local function component_sides(partition)
  local found = {}
  local list = partition
  if list == nil or list == "" then
    list = default_partition
  end
  for name in string.gmatch(list, "[^,]+") do
    local side = side_of[name]
    if side ~= nil then
      found[side] = name
    end
  end
  return found
end

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
  -- A job of one component may list partitions of both sides: it still runs in one of them. From the second
  -- component on, every component must be on the side(s) of the ones before it.
  if offset == 0 then
    sides = {}
  end
  for side, partition in pairs(component_sides(options["partition"])) do
    if offset > 0 then
      for other, first in pairs(sides) do
        if other ~= side then
          slurm.log_error("gpuforge: heterogeneous job component %d is in partition %s (%s) and an earlier one "
            .. "in %s (%s): the job would span the site-to-cloud VPN. Submit every component to partitions of one "
            .. "side, or submit separate jobs.", offset, partition, side, first, other)
          return slurm.ERROR
        end
      end
    end
    sides[side] = sides[side] or partition
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
