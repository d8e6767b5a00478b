#include <nccl.h>
#include <cuda_runtime.h>
# gpuforge test stand-in for nccl-tests' common.cu: the rest of a *_perf program, in sh (the stand-in nvcc
# puts the collective's file, which sets COLLECTIVE, REDOP, ROOT and BUSBW_FACTOR, in front of this one).
#
# There is no GPU here. The program prints what nccl-tests v2.16.4 prints, in its format, with the bus
# bandwidth at the largest size taken from (first found):
#   the environment variable NCCL_TESTS_STANDIN_BUSBW (GB/s), or
#   the file /etc/nccl-tests-standin/busbw (its first word, GB/s);
# smaller sizes get less (latency-bound, as on real hardware). With neither, it fails as the real binary
# does on a machine without a GPU ('no CUDA-capable device is detected', exit 2). Without libnccl.so.2 on
# the loader path it fails as the dynamic loader would (exit 127).
# NCCL_TESTS_STANDIN_GPU names the GPUs (default NVIDIA H100 80GB HBM3).
set -eu
prog=$(basename "$0")
found=""
for dir in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' ') /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /lib \
           $(cat /etc/ld.so.conf.d/*.conf 2>/dev/null | grep '^/' || true); do
  [ -e "$dir/libnccl.so.2" ] && found=1
done
if [ -z "$found" ]; then
  echo "$0: error while loading shared libraries: libnccl.so.2: cannot open shared object file: No such file or directory" >&2
  exit 127
fi

bytes() {  # nccl-tests' size arguments: a number with an optional K, M or G suffix
  case "$1" in
    *[kK]) echo $(( ${1%?} * 1024 )) ;;
    *[mM]) echo $(( ${1%?} * 1024 * 1024 )) ;;
    *[gG]) echo $(( ${1%?} * 1024 * 1024 * 1024 )) ;;
    *) echo "$1" ;;
  esac
}
min=33554432 max=33554432 factor=1 step=1048576 gpus=1 threads=1 warmup=5 iters=20 agg=1 check=1 graph=0
while [ $# -gt 0 ]; do
  case "$1" in
    -b|--minbytes) min=$(bytes "$2"); shift ;;
    -e|--maxbytes) max=$(bytes "$2"); shift ;;
    -f|--stepfactor) factor=$2; shift ;;
    -i|--stepbytes) step=$(bytes "$2"); shift ;;
    -g|--ngpus) gpus=$2; shift ;;
    -t|--nthreads) threads=$2; shift ;;
    -w|--warmup_iters) warmup=$2; shift ;;
    -n|--iters) iters=$2; shift ;;
    -m|--agg_iters) agg=$2; shift ;;
    -c|--check) check=$2; shift ;;
    -G|--cudagraph) graph=$2; shift ;;
    -*) shift ;;
  esac
  shift
done
if [ "$factor" -gt 1 ]; then stepping="$factor(factor)"; else stepping="$step(bytes)"; fi
printf '# nThread %d nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n' \
  "$threads" "$gpus" "$min" "$max" "$stepping" "$warmup" "$iters" "$agg" "$check" "$graph"
printf '#\n# Using devices\n'
host=$(hostname)
busbw=${NCCL_TESTS_STANDIN_BUSBW:-}
if [ -z "$busbw" ] && [ -r /etc/nccl-tests-standin/busbw ]; then
  busbw=$(awk 'NR == 1 { print $1 }' /etc/nccl-tests-standin/busbw)
fi
if [ -z "$busbw" ]; then
  printf "%s: Test CUDA failure common.cu:1030 'no CUDA-capable device is detected'\n" "$host"
  printf ' .. %s pid %d: Test failure common.cu:937\n' "$host" $$
  exit 2
fi
ranks=$((gpus * threads))
gpu_name=${NCCL_TESTS_STANDIN_GPU:-NVIDIA H100 80GB HBM3}
rank=0
for bus in 18 2a 3a 5d 9a ab ba db; do
  [ "$rank" -lt "$ranks" ] || break
  printf '#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n' \
    "$rank" 0 $$ "$host" "$rank" 0 "0x$bus" 0 "$gpu_name"
  rank=$((rank + 1))
done
printf '#\n'
printf '# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n' "" "" "" "" ""
printf '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n' size count type redop root \
  time algbw busbw '#wrong' time algbw busbw '#wrong'
printf '# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n' '(B)' '(elements)' "" "" "" \
  '(us)' '(GB/s)' '(GB/s)' "" '(us)' '(GB/s)' '(GB/s)' ""
awk -v min="$min" -v max="$max" -v factor="$factor" -v step="$step" -v n="$ranks" -v peak="$busbw" \
    -v redop="$REDOP" -v root="$ROOT" -v coll="$COLLECTIVE" '
  function busfactor() {
    if (coll == "all_reduce") return 2 * (n - 1) / n
    if (coll == "broadcast" || coll == "reduce" || coll == "sendrecv" || coll == "hypercube") return 1
    return (n - 1) / n
  }
  function timestr(us) {
    if (us >= 10000) return sprintf("%7.0f", us)
    if (us >= 100) return sprintf("%7.1f", us)
    return sprintf("%7.2f", us)
  }
  function result(size, scale,   bus, alg, us) {
    # Latency-bound at small sizes, peak * scale at the largest (half the peak at 32 MiB).
    bus = peak * scale * size / (size + 33554432) * (max + 33554432) / max
    f = busfactor()
    alg = (f > 0) ? bus / f : bus
    if (f == 0) bus = 0
    us = (alg > 0) ? size / (alg * 1000) : 0
    return sprintf("  %7s  %6.2f  %6.2f  %5g", timestr(us), alg, bus, 0)
  }
  BEGIN {
    total = 0; rows = 0
    for (size = min; size <= max; size = (factor > 1) ? size * factor : size + step) {
      count = int(size / 4)
      if (coll == "all_gather" || coll == "reduce_scatter" || coll == "alltoall" || coll == "scatter" || coll == "gather") count = int(count / n)
      out = result(size, 1.0); inp = result(size, 0.998)
      printf "%12.0f  %12.0f  %8s  %6s  %6s%s%s\n", size, count, "float", redop, root, out, inp
      split(out, o, " "); split(inp, i, " ")
      total += o[3] + i[3]; rows += 2
      if (factor <= 1 && step <= 0) break
    }
    printf "# Out of bounds values : 0 OK\n"
    printf "# Avg bus bandwidth    : %g \n", rows ? total / rows : 0
    printf "#\n"
  }'
