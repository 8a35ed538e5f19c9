#!/usr/bin/env bash
# Everything a maintainer runs on a GPU machine before merging, in one go:
#   1. build for this GPU, make check, make check-skeletons
#   2. make sanitize EX=<id> SOLUTION=1 for every exercise (memcheck, racecheck, synccheck,
#      initcheck on the [quick] cases): the same target a learner runs
#   3. the solutions and wrong variants again at COURSE_SMEM_LIMIT=101376 (99 KiB, consumer
#      Ampere/Ada) and 65536 (64 KiB, Turing), so the tile configurations a smaller GPU picks
#      run here too (common/smem_limit.h)
#   4. a second build for compute_75 as PTX only (CUDA_ARCH=75-virtual), JIT-compiled by the
#      driver for this GPU, tested at 64 KiB: the Turing code path, without cp.async
#      (common/arch/async_copy.cuh), on a GPU that has it
#   5. make bench and the PyTorch cross-check
# Logs go to ./gpu-verify-logs (LOGS=<dir> to change); the summary lines are printed at the end.
# Where $OUT is set (a remote runner that copies back only a few files from $OUT), the logs are
# also packed into $OUT/gpu-verify-logs.tgz, with summary.txt and the bench tables beside it.
# Exit status: the number of failed steps (0 = all green).
#   usage: tools/gpu_verify.sh [--no-check] [--no-bench] [--no-torch] [--no-sanitizer] [--no-smem]
#                              [--no-sm75] [--sanitize=id,id,...] [--bench-args="..."]
# A full run takes longer than 10 minutes; where one command is limited to that, split it, e.g.
#   tools/gpu_verify.sh --no-bench --no-smem --no-sm75 --sanitize=05_fp16_mma,06_split_kv_decode
#   tools/gpu_verify.sh --no-check --no-sanitizer --no-smem --no-sm75 --no-torch
set -uo pipefail
cd "$(dirname "$0")/.."
out="${LOGS:-gpu-verify-logs}"
mkdir -p "$out"
arch="${CUDA_ARCH:-native}"
jobs="${JOBS:-$(nproc)}"
build="${BUILD:-build}"
build75="${build}-sm75"
bench=1 sanitize=1 smem=1 sm75=1 check=1 torch=1 only_sanitize="" bench_args=""
for a in "$@"; do
  case "$a" in
    --no-check) check=0 ;;
    --no-torch) torch=0 ;;
    --sanitize=*) only_sanitize="${a#--sanitize=}" ;;
    --bench-args=*) bench_args="${a#--bench-args=}" ;;
    --no-bench) bench=0 ;;
    --no-sanitizer) sanitize=0 ;;
    --no-smem) smem=0 ;;
    --no-sm75) sm75=0 ;;
    *) echo "unknown option $a"; exit 2 ;;
  esac
done
summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }
# The last CTest summary line of a log ("100% tests passed, 0 tests failed out of 58").
ctest_line() { grep -E 'tests passed|tests failed' "$1" | tail -n 1; }
# How many of those ran at all: a suite where everything was skipped is not green.
skipped_count() { grep -c '\*\*\*Skipped\|Not Run' "$1"; }
step() {  # step <name> <log> <command...>: runs it, notes its status and CTest line
  local name=$1 log=$2
  shift 2
  "$@" > "$log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && failed=$((failed + 1))
  note "$name: rc=$rc | $(ctest_line "$log") | skipped: $(skipped_count "$log")"
}

if [ "$check" = 1 ]; then
  step "make check (CUDA_ARCH=$arch)" "$out/check.log" \
    make check BUILD="$build" CUDA_ARCH="$arch" JOBS="$jobs"
  note "  $(grep -E 'passed, .* failed, .* not run' "$out/check.log" | tail -n 1)"
  step "make check-skeletons" "$out/check-skeletons.log" make check-skeletons BUILD="$build" CUDA_ARCH="$arch" JOBS="$jobs"
  note "  contract: $(grep -E '^exercise contract' "$out/check-skeletons.log" | head -n 1)"
else
  make build BUILD="$build" CUDA_ARCH="$arch" JOBS="$jobs" > "$out/build.log" 2>&1 || { failed=$((failed + 1)); note "build FAILED (see build.log)"; }
fi

exercises=$(make -s list)
[ -n "$only_sanitize" ] && exercises=$(echo "$only_sanitize" | tr ',' ' ')
if [ "$sanitize" = 1 ]; then
  for ex in $exercises; do
    log="$out/sanitize-$ex.log"
    make -s sanitize EX="$ex" SOLUTION=1 BUILD="$build" JOBS="$jobs" > "$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && failed=$((failed + 1))
    # One line per exercise: "memcheck clean, racecheck clean, synccheck clean, initcheck clean".
    note "sanitize $ex (solution): rc=$rc | $(grep -E '^  (memcheck|racecheck|synccheck|initcheck) ' "$log" |
      sed 's/^  //; s/  */ /' | paste -sd, | sed 's/,/, /g')$(grep -m1 -E '^⊘|not found' "$log")"
  done
fi

if [ "$smem" = 1 ]; then
  # 64 KiB is Turing's limit; an exercise that needs sm_80 or newer (MIN_SM in exercises.cmake)
  # never meets it on a real GPU (every sm_80+ part has at least 99 KiB), so it is left out there.
  sm80_only=$(grep -hoE 'course_exercise_options\([0-9a-z_]+ MIN_SM (8|9|1[0-9])[0-9]' day*/exercises.cmake 2>/dev/null |
    sed -E 's/course_exercise_options\(([0-9a-z_]+).*/\1/' | paste -sd'|')
  for limit in 101376 65536; do
    exclude=()
    [ "$limit" -lt 101376 ] && [ -n "$sm80_only" ] && exclude=(-E "/($sm80_only)/")
    COURSE_SMEM_LIMIT=$limit step "solutions + wrong variants at COURSE_SMEM_LIMIT=$limit${exclude:+ (without ${sm80_only}: sm_80+ only)}" \
      "$out/smem-$limit.log" ctest --test-dir "$build" -L "solution|wrong" "${exclude[@]}" -j "$jobs" --output-on-failure
  done
fi

if [ "$sm75" = 1 ]; then
  COURSE_SMEM_LIMIT=65536 step "compute_75 PTX (JIT here), at 64 KiB" "$out/check-sm75.log" \
    make check BUILD="$build75" CUDA_ARCH=75-virtual JOBS="$jobs"
fi

if [ "$bench" = 1 ]; then
  make bench BUILD="$build" CUDA_ARCH="$arch" BENCH_ARGS="$bench_args" > "$out/bench.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && failed=$((failed + 1))
  note "make bench: rc=$rc"
  cp bench/results/bench.md bench/results/bench.csv "$out/" 2>/dev/null
fi
if [ "$bench" = 1 ] && [ "$torch" = 1 ]; then
  if [ -f bench/compare_torch.py ]; then
    python3 bench/compare_torch.py > "$out/compare_torch.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && failed=$((failed + 1))
    note "compare_torch.py: rc=$rc"
  fi
  if [ -f bench/compare_torch_day10.py ]; then
    python3 bench/compare_torch_day10.py > "$out/compare_torch_day10.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && failed=$((failed + 1))
    note "compare_torch_day10.py: rc=$rc"
  fi
fi

{
  echo
  echo "==================== summary ===================="
  printf '%s\n' "${summary[@]}"
  echo "failed steps: $failed"
} | tee "$out/summary.txt"
if [ -n "${OUT:-}" ] && [ "$out" != "$OUT" ]; then
  tar czf "$OUT/gpu-verify-logs.tgz" -C "$out" . && cp "$out/summary.txt" "$OUT/"
  cp "$out"/bench.md "$out"/bench.csv "$OUT/" 2>/dev/null
fi
exit "$failed"
