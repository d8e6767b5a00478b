#!/bin/sh
# gpuforge test stand-in for nvcc @VERSION@ (cuda-nvcc-12-8 from NVIDIA's CUDA repository): no GPU code
# is compiled. `nvcc --version` prints what the real compiler prints; `nvcc -o OUT [-I DIR] [-L DIR] [-lLIB]
# FILE...` fails as the real one does when the host compiler, a header (#include <...>) or a library is
# missing, and otherwise writes OUT as a shell program made of the FILEs (the stand-in nccl-tests sources
# are shell). So a build proves the toolkit, NCCL's headers and libraries are where the Makefile says.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--version" ]; then
  cat <<VERSION
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release @RELEASE@, V@VERSION@
Build cuda_@RELEASE@.r@RELEASE@/compiler.35583870_0
VERSION
  exit 0
fi
if ! command -v g++ >/dev/null 2>&1; then
  echo "nvcc fatal   : Failed to preprocess host compiler properties." >&2
  exit 1
fi
out="" includes="$here/include /usr/include" libdirs="$here/lib64 /usr/lib/x86_64-linux-gnu /usr/lib" libs="" files=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift ;;
    -I) includes="$includes $2"; shift ;;
    -I*) includes="$includes ${1#-I}" ;;
    -L) libdirs="$libdirs $2"; shift ;;
    -L*) libdirs="$libdirs ${1#-L}" ;;
    -l*) libs="$libs ${1#-l}" ;;
    -*) ;;
    *) files="$files $1" ;;
  esac
  shift
done
[ -n "$out" ] && [ -n "$files" ] || { echo "nvcc fatal   : No input files specified; use option --help for more information" >&2; exit 1; }
for file in $files; do
  for header in $(sed -n 's/^#include <\(.*\)>.*/\1/p' "$file"); do
    found=""
    for dir in $includes; do [ -e "$dir/$header" ] && found=1; done
    if [ -z "$found" ]; then
      echo "$file:1:10: fatal error: $header: No such file or directory" >&2
      exit 1
    fi
  done
done
for lib in $libs; do
  found=""
  for dir in $libdirs; do [ -e "$dir/lib$lib.so" ] && found=1; done
  if [ -z "$found" ]; then
    echo "/usr/bin/ld: cannot find -l$lib: No such file or directory" >&2
    exit 1
  fi
done
{ echo "#!/bin/sh"; for file in $files; do cat "$file"; done; } > "$out"
chmod 0755 "$out"
