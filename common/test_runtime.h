// Runs the Catch2 session for every course test binary and turns what happened into an exit code.
//
// The verdict counts FAILED ASSERTIONS (a Catch2 event listener sees each one), never Catch2's
// exit code alone, because that code is also non-zero for things that are not a test result:
//
//   what happened                                  normal mode   COURSE_EXPECT_FAILURE=1
//   every assertion passed                         0             1  "the tests are too weak"
//   at least one assertion failed                  1             0  "correctly rejected"
//   (an unexpected exception inside a test case counts as a failed assertion in Catch2)
//   the command line was not understood            2 (error)     2 (error)
//   no test case ran (a filter that matches none)  2 (error)     2 (error)
//   Catch2 failed the run without a failed assertion 2 (error)   2 (error)
//   a test case ran past COURSE_TEST_TIMEOUT s     124 (hang)    124 (hang)
//
// COURSE_EXPECT_FAILURE=1 is set by CTest for wrong variants and for the "untouched skeleton
// must fail" contract. A crash, a hang or an error is never counted as a correct rejection:
// only an assertion that looked at the output and said "wrong" is.
//
// The watchdog (with_watchdog) exists for GPU tests: a kernel that never finishes blocks the
// host thread inside a CUDA call, where nothing in the test can notice. A second thread checks
// how long the current test case has been running and ends the process with a message that
// says which test case hung and what usually causes it. COURSE_TEST_TIMEOUT=<seconds> sets the
// limit per test case (default 30; 0 disables it, e.g. under a debugger or compute-sanitizer).
//
// A GPU test binary that saw a failed assertion ends its report by suggesting
// `make sanitize EX=<id>`: the bugs that pass or fail by luck (races, reads past a tile) are the
// ones compute-sanitizer names exactly. The id comes from the binary's name (ex_<id>, sol_<id>,
// wrong_<id>__<bug>).
#pragma once

namespace course {

int run_tests(int argc, char** argv, bool with_watchdog = false);

// Index checks: test cases tagged [index] test the exercise's __host__ __device__ index helpers
// (fragment coordinates, tile ranges, page addresses) on the CPU, with no CUDA call, so a
// learner without a GPU still gets a verdict on that part of their code. `ex_<id> "[index]"`
// runs only them (no GPU needed); where no GPU is usable the test main runs them before it
// skips.
inline constexpr const char* kIndexTag = "[index]";
struct IndexRun {
  long cases = 0;         // [index] test cases that ran
  long failed_cases = 0;  // ... of which at least one assertion failed
};
IndexRun run_index_checks(const char* argv0);
// The exit code after a run_index_checks where the kernel could not run: 77 (skipped) when every
// check passed, 1 when one failed (0 under COURSE_EXPECT_FAILURE=1: a correct rejection).
int index_verdict(const IndexRun& run);

}  // namespace course
