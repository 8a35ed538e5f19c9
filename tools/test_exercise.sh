#!/usr/bin/env bash
# make test EX=<id>: build one exercise's test against the learner's code, run it, and say in
# one line what that means.
#   usage: tools/test_exercise.sh <build dir> <exercise id> <jobs>
# Exit status (what `make test EX=...` ends with):
#   0    every test passed, OR it compiled but could not run here (no GPU): the ⊘ line says so.
#        Not a distinct code on purpose: make decorates ANY non-zero status as
#        "make: *** [Makefile:NN: test] Error 77", which reads as "your code is wrong", and
#        make's own exit status is 2 whatever the recipe returned, so the code would not reach
#        a script anyway. Scripts that need the difference run the binary (build/bin/ex_<id>)
#        or CTest, which keep 77 = skipped.
#   1    a test failed (the report above says which and why)
#   2    an error: the build failed, or the test could not start
#   124  a test case hung and the watchdog ended it
set -uo pipefail
build=$1 ex=$2 jobs=$3

# The CTest entry knows whether this build could compile the exercise at all (no nvcc, or no
# architecture new enough): then its command is the stand-in that explains why.
# (CTest lists a command only once its executable exists, hence the stand-in is built first.)
cmake --build "$build" --target course_skip_no_cuda >/dev/null || exit 2
mapfile -t cmd < <(ctest --test-dir "$build" --show-only=json-v1 -R "^day[0-9]+/$ex/exercise\$" |
  python3 -c 'import json, sys; [print(a) for t in json.load(sys.stdin)["tests"][:1] for a in t.get("command", [])]')
if [[ "${cmd[0]:-}" == *course_skip_no_cuda* ]]; then
  out=$("${cmd[@]}")
  echo "⊘ $ex: ${out#*: }"
  exit 0
fi

cmake --build "$build" -j "$jobs" --target "ex_$ex" || exit 2
"$build/bin/ex_$ex"
rc=$?
case $rc in
  0)   echo "✔ $ex: every test passed. Next: make compare EX=$ex (time it), make sanitize EX=$ex" ;;
  77)  exit 0 ;;  # the test main printed "compiled OK — not run: <why>. Run it on a GPU .."
  1)   echo "✘ $ex: some tests failed (the report above says which and why; make hint EX=$ex)" ;;
  124) echo "✘ $ex: a test case hung (see HANG above)" ;;
  *)   echo "✘ $ex: the test did not finish normally (exit $rc: a crash or an error above)" ;;
esac
exit $rc
