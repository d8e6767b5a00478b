#!/bin/bash
# The node-side pieces that need a real GPU, run on one lent GPU machine (the workplace's `device` tool; no
# CI machine has a GPU). Each step is gpuforge's production code on localhost:
#   1. the nccl_tests role builds nccl-tests at its pinned commit (from a carried mirror: no network there);
#   2. gpuforge/assets/playbooks/healthcheck.yml (gpu_healthcheck, what `gpuforge check` runs) checks the node: nvidia-smi,
#      DCGM, XID, nccl-tests all_reduce_perf; then again expecting 8 GPUs, as on a p5en node: it must fail;
#   3. the Slurm prolog (slurm_compute's gpuforge-healthcheck) judges the node, healthy and not;
#   4. gpuforge's parsers (gpuforge/nodes/health.py) read what the playbook fetched;
#   5. the software-versions textfile collector reads the node (its driver must be nvidia-smi's);
#   6. NVML's total energy counter, which dcgm-exporter serves as DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION and the
#      energy recording rules read as millijoules: over a few seconds of load its rate must match the power
#      NVML reports in milliwatts.
# What the machine lacks is said, not faked: the image has no DCGM and (one VM, one GPU) no fabric.
#
# Prepared here:  .device/nccl-tests.git (git clone --bare of NVIDIA/nccl-tests) and .whl/ (ansible-core
# and the dependencies the image lacks, for Python 3.12); both in .git/info/exclude.
# Run:            device run, carry [".device", ".whl"], command "bash tests/device/gpu-node.sh"
# Back in $OUT:   log.txt and outputs.tar.gz (the fetched raw outputs, the verdict metrics, nvidia-smi -q).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-node-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
repo=$PWD
work=/tmp/gpu-node
mkdir -p "$work"/{extra,fetch,textfile}
step() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

step "machine"
uname -a; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
for tool in nvcc git make g++ journalctl dcgmi nv-hostengine ibstat fi_info sudo; do
  printf '%-14s %s\n' "$tool" "$(command -v "$tool" || echo 'not installed')"
done
nvidia-smi -q >"$work/extra/nvidia-smi-q.txt"
nvidia-smi topo -m >"$work/extra/nvidia-smi-topo.txt" 2>&1
nvidia-smi nvlink --status >"$work/extra/nvidia-smi-nvlink.txt" 2>&1

step "ansible-core from the carried wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH ANSIBLE_ROLES_PATH=$repo/gpuforge/assets/playbooks/roles
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
ansible-playbook --version | head -1

# Stand-in for the nccl role's libnccl-dev: the image's NCCL is the PyPI wheel's, laid out as a package would.
step "NCCL and CUDA"
wheel=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])')
mkdir -p /tmp/nccl/lib && ln -sfn "$wheel/include" /tmp/nccl/include
for so in "$wheel"/lib/libnccl.so*; do ln -sf "$so" /tmp/nccl/lib/; done
[ -e /tmp/nccl/lib/libnccl.so ] || ln -sf "$(ls "$wheel"/lib/libnccl.so.* | head -1)" /tmp/nccl/lib/libnccl.so
export NCCL_HOME=/tmp/nccl LD_LIBRARY_PATH=/tmp/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cuda_home/lib64
echo "NCCL $(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' /tmp/nccl/include/nccl.h | awk '{print $3}' | paste -sd.) from $wheel"
echo "CUDA_HOME $cuda_home; $(nvcc --version | grep release)"
# One architecture instead of nccl-tests' six: minutes of device time saved, the same code built.
export NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90"

printf '[gpu_nodes]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >"$work/inventory"
printf -- '- name: Build nccl-tests\n  hosts: gpu_nodes\n  gather_facts: false\n  roles: [nccl_tests]\n' >"$work/nccl-tests.yml"

step "1. nccl_tests role: build nccl-tests"
ansible-playbook -i "$work/inventory" "$work/nccl-tests.yml" -e "{
  \"nccl_tests_repo\": \"file://$repo/.device/nccl-tests.git\", \"nccl_tests_cuda_home\": \"$cuda_home\",
  \"nccl_tests_build_packages\": [], \"nccl_tests_cuda_packages\": [], \"nccl_tests_make_jobs\": 16}"
echo "nccl_tests role: rc $?"; ls /opt/nccl-tests/build/*_perf 2>&1 | head -12

# The machine runs everything as root and has no sudo: the play's become is switched off, nothing else.
healthcheck() {  # $1: label, $2: extra vars (JSON)
  step "$1"
  ansible-playbook -i "$work/inventory" "$repo/gpuforge/assets/playbooks/healthcheck.yml" -e ansible_become=false -e "$2"
  echo "$1: rc $?"
}
# A node without journald fails the XID task outright (as it should in production): ask only where it is.
xid=$(command -v journalctl >/dev/null && echo ', "xid"')
healthcheck "2a. healthcheck.yml, one GPU on driver branch 580: must pass" "{
  \"gpu_healthcheck_checks\": [\"gpu\", \"nccl\"$xid], \"gpu_healthcheck_expected_gpus\": 1,
  \"nvidia_driver_branch\": \"580\", \"gpu_healthcheck_fetch_dir\": \"$work/fetch\",
  \"gpu_healthcheck_textfile_dir\": \"$work/textfile\", \"gpu_healthcheck_xid_since\": \"-24h\"}"
cp "$work/textfile/gpuforge_healthcheck.prom" "$work/extra/healthcheck-pass.prom" 2>/dev/null
healthcheck "2b. healthcheck.yml, eight GPUs and DCGM expected (a p5en node): must fail" "{
  \"gpu_healthcheck_checks\": [\"gpu\", \"dcgm\"], \"gpu_healthcheck_expected_gpus\": 8,
  \"gpu_healthcheck_dcgm_level\": 1, \"gpu_healthcheck_textfile_dir\": \"$work/textfile\"}"

step "3. Slurm prolog check (slurm_compute's gpuforge-healthcheck)"
mkdir -p /tmp/prolog && cp "$repo/gpuforge/assets/playbooks/roles/slurm_compute/files/gpuforge-healthcheck" /tmp/prolog/prolog.py
cp "$repo/gpuforge/nodes/health.py" /tmp/prolog/health.py
python3 - <<'EOF'
import sys; sys.path.insert(0, "/tmp/prolog")
import prolog
for gpus, checks in ((1, ["gpu", "xid", "fabric"]), (8, ["gpu", "fabric"]), (1, ["gpu", "dcgm"])):
    config = {"checks": checks, "expected_gpus": gpus, "dcgm_level": 1, "xid_since": "-15min", "fabric": "none"}
    print(f"expected_gpus={gpus} checks={checks}: problems={prolog.check(config, 'prolog')}")
EOF

step "4. gpuforge's parsers on the fetched outputs"
python3 - "$work/fetch/localhost" "$repo" <<'EOF'
import sys, pathlib, importlib.util
spec = importlib.util.spec_from_file_location("health", f"{sys.argv[2]}/gpuforge/nodes/health.py")
health = importlib.util.module_from_spec(spec); sys.modules["health"] = health; spec.loader.exec_module(health)
d = pathlib.Path(sys.argv[1]); outputs = {p.name: p.read_text() for p in d.iterdir()} if d.is_dir() else {}
print("fetched:", sorted(outputs))
if "all_reduce_perf.txt" in outputs:
    r = health.parse_nccl_tests(outputs["all_reduce_perf.txt"]); print("nccl-tests:", r)
print(health.evaluate_node("localhost", outputs, health.NodeExpectations(gpus=1)))
EOF

step "5. software-versions collector (node_textfile_collectors)"
"$repo/gpuforge/assets/playbooks/roles/node_textfile_collectors/files/software-versions" "$work/textfile"
echo "software-versions: rc $?"; cat "$work/textfile/software.prom"
echo "nvidia-smi driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"

step "6. NVML's energy counter (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION): millijoules, against the power in milliwatts"
python3 - <<'EOF'
import threading, time
import pynvml, torch
pynvml.nvmlInit(); gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
samples, done = [], threading.Event()
def sample():
    while not done.is_set():
        samples.append(pynvml.nvmlDeviceGetPowerUsage(gpu)); time.sleep(0.05)
e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(gpu), time.monotonic()
sampler = threading.Thread(target=sample); sampler.start()
while time.monotonic() - t0 < 6:
    for _ in range(50): a @ b
    torch.cuda.synchronize()
done.set(); sampler.join()
e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(gpu), time.monotonic()
counter_w = (e1 - e0) / 1000 / (t1 - t0)  # mJ -> J, per second
sampled_w = sum(samples) / len(samples) / 1000  # mW -> W
print(f"counter {e0} -> {e1} mJ over {t1 - t0:.2f} s: {counter_w:.1f} W; NVML power, mean of {len(samples)} samples: {sampled_w:.1f} W; ratio {counter_w / sampled_w:.3f}")
EOF

tar czf "$OUT/outputs.tar.gz" -C "$work" fetch extra textfile 2>/dev/null
step "done"
