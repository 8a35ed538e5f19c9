#!/usr/bin/env bash
# make sanitize EX=<id> [SOLUTION=1]: the exercise's [quick] test cases under compute-sanitizer's
# four tools, one line per tool, the first report in full. It catches what a passing test can
# hide: a race the GPU happened not to show (racecheck), a read past a tile that landed in
# padding (memcheck), a barrier not every thread reaches (synccheck), shared or global memory
# read before anything wrote it (initcheck).
#   usage: tools/sanitize.sh <build dir> <exercise id> <jobs> [solution]
# Exit status: 0 every tool clean (or no GPU here: the ⊘ line says so), 1 a tool reported errors
# or the tests failed under it, 2 no compute-sanitizer / build error. Logs: <build>/sanitize/.
# tools/gpu_verify.sh runs this on every solution.
set -uo pipefail
build=$1 ex=$2 jobs=$3 which=${4:-}
prefix=ex who="your code"
if [ "$which" = solution ]; then prefix=sol who="the solution"; fi
bin="$build/bin/${prefix}_$ex"

if ! cmake --build "$build" -j "$jobs" --target "${prefix}_$ex" > "$build/sanitize-build.log" 2>&1; then
  if grep -q "unknown target" "$build/sanitize-build.log"; then
    echo "⊘ $ex: this build does not compile the exercise's GPU code (make test EX=$ex says why)"
  else
    cat "$build/sanitize-build.log"
  fi
  exit 2
fi

# Is there a GPU at all? The test main answers before running anything (exit 77 = skipped).
probe=$("$bin" --list-tests 2>&1)
if [ $? -eq 77 ]; then
  echo "⊘ $ex: not sanitized: ${probe#SKIPPED: }"
  exit 0
fi

sanitizer=$(command -v compute-sanitizer || true)
if [ -z "$sanitizer" ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  for dir in "$(dirname "$nvcc")" /usr/local/cuda/bin /opt/cuda/bin; do
    if [ -x "$dir/compute-sanitizer" ]; then sanitizer="$dir/compute-sanitizer"; break; fi
  done
fi
if [ -z "$sanitizer" ]; then
  echo "compute-sanitizer not found: it ships with the CUDA toolkit (bin/compute-sanitizer)."
  echo "Put the toolkit's bin/ on PATH, or run on a GPU machine that has it (docs/colab.md)."
  exit 2
fi

logs="$build/sanitize"
mkdir -p "$logs"
echo "compute-sanitizer on $who ($(basename "$bin") \"[quick]\"); logs in $logs/"
first_log="" status=0
for tool in memcheck racecheck synccheck initcheck; do
  log="$logs/${prefix}_$ex.$tool.log"
  # The tools slow kernels down 10-100x: a generous watchdog still ends a real hang.
  COURSE_TEST_TIMEOUT=${COURSE_TEST_TIMEOUT:-600} \
    "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" "[quick]" > "$log" 2>&1
  rc=$?
  errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -n 1)
  if [ -z "$errors" ] && [ $rc -eq 99 ]; then  # --error-exitcode: errors, whatever the summary says
    errors=$(sed -n 's/.*SUMMARY:.*(\([0-9]*\) error.*/\1/p' "$log" | tail -n 1)
    errors=${errors:-some}
  fi
  if [ -n "$errors" ] && [ "$errors" != 0 ]; then
    printf '  %-10s %s error%s\n' "$tool" "$errors" "$([ "$errors" = 1 ] || echo s)"
    [ -z "$first_log" ] && first_log=$log
    status=1
  elif [ $rc -eq 0 ]; then
    printf '  %-10s clean\n' "$tool"
  else
    case $rc in
      1)   what="no sanitizer error, but the tests failed under it (make test EX=$ex)" ;;
      124) what="a test case hung under it (see $log)" ;;
      *)   what="did not finish (exit $rc, see $log)" ;;
    esac
    printf '  %-10s %s\n' "$tool" "$what"
    status=1
  fi
done

if [ -n "$first_log" ]; then
  echo
  echo "First report ($first_log):"
  # A report is a block of "=========" lines: from its first line to the empty "=========" line
  # that ends it. The source line is shown because the build passes -lineinfo.
  # Racecheck lists one "and Read access" line per racing instruction: 12 lines say it all.
  awk '/^========= / && !/COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY/ && !done { on = 1 }
       on && /^=========$/ { on = 0; done = 1 }
       on { if (n < 12) print; n++ }
       END { if (n > 12) printf "=========     ... %d more lines of this report in the log\n", n - 12 }' "$first_log"
  case $first_log in
    *.memcheck.log)  echo "memcheck: an access outside an allocation (or misaligned): check the bounds and the index arithmetic at the named line." ;;
    *.racecheck.log) echo "racecheck: two threads touched the same shared memory with no __syncthreads() between them: between the write's line and the read's line one barrier is missing." ;;
    *.synccheck.log) echo "synccheck: a barrier that not every thread of the block reaches, e.g. a __syncthreads() inside an if or an early return." ;;
    *.initcheck.log) echo "initcheck: a read of memory that nothing wrote: a tile loaded partly, or a buffer used before it was filled." ;;
  esac
fi
exit $status
