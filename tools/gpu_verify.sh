#!/usr/bin/env bash
# Everything a maintainer runs on a GPU machine before merging, in one go:
#   build for this GPU, make check, make check-skeletons, compute-sanitizer (memcheck and
#   racecheck) on the [quick] tests of every solution, make bench, the PyTorch cross-check.
# Logs go to $OUT (or ./gpu-verify-logs); the summary lines are printed at the end.
#   usage: tools/gpu_verify.sh [--no-bench] [--no-sanitizer]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-verify-logs}"
mkdir -p "$out"
arch="${CUDA_ARCH:-native}"
jobs="${JOBS:-$(nproc)}"
bench=1 sanitize=1
for a in "$@"; do
  case "$a" in
    --no-bench) bench=0 ;;
    --no-sanitizer) sanitize=0 ;;
  esac
done
summary=()
note() { summary+=("$1"); echo "== $1"; }

make check CUDA_ARCH="$arch" JOBS="$jobs" > "$out/check.log" 2>&1
note "make check: rc=$? | $(grep -E 'tests passed|tests failed' "$out/check.log" | tail -n 1)"
make check-skeletons JOBS="$jobs" > "$out/check-skeletons.log" 2>&1
note "make check-skeletons: rc=$? | $(grep -E 'skeleton contract' "$out/check-skeletons.log") | $(grep -E 'tests passed|tests failed' "$out/check-skeletons.log" | tail -n 1)"

if [ "$sanitize" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for bin in build/bin/sol_*; do
    for tool in memcheck racecheck; do
      log="$out/sanitizer.log"
      echo "### $tool $bin" >> "$log"
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" "[quick]" >> "$log" 2>&1
      rc=$?
      note "compute-sanitizer $tool $(basename "$bin") [quick]: $([ $rc = 0 ] && echo clean || echo "rc=$rc")"
    done
  done
fi

if [ "$bench" = 1 ]; then
  make bench > "$out/bench.log" 2>&1
  note "make bench: rc=$?"
  if [ -f bench/compare_torch.py ]; then
    python3 bench/compare_torch.py > "$out/compare_torch.log" 2>&1
    note "compare_torch.py: rc=$?"
  fi
fi

echo
echo "==================== summary ===================="
printf '%s\n' "${summary[@]}"
