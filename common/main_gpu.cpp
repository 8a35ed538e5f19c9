// main() of every GPU test binary: skip cleanly (exit 77, CTest's SKIP_RETURN_CODE) when no
// usable GPU is present or it is older than the exercise needs, then run the tests under the
// watchdog (test_runtime.h), so a kernel that never finishes cannot hang the terminal.
// COURSE_REQUIRED_GPUS=<n> (set by CTest for the multi-GPU entries, cmake/CourseExercises.cmake)
// skips the same way where fewer than n GPUs are visible.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_probe.h"
#include "test_runtime.h"

// Generated per exercise by cmake/CourseExercises.cmake.
int course_required_sm();
int course_max_sm();             // 0, or the only architecture the exercise is built for
bool course_has_index_checks();  // does the exercise's test have [index] cases?

int main(int argc, char** argv) {
  // `ex_<id> "[index]" [other Catch2 options]`: only the CPU checks of the index helpers, which
  // need no GPU, so the GPU probe must not get the chance to skip them.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == course::kIndexTag) return course::run_tests(argc, argv, /*with_watchdog=*/true);
  }
  std::string why;
  switch (course::probe_gpu(course_required_sm(), course_max_sm(), &why)) {
    case course::GpuStatus::kSkip: {
      // Compiling proved something; correctness is unknown until the kernel runs. Say both, so a
      // skip never reads as a pass (make test and the status lists repeat this line). What can
      // be judged without a GPU (the index helpers) is judged first.
      // (Only for a plain run: a command line that lists or filters keeps its meaning.)
      if (course_has_index_checks() && argc == 1) {
        const course::IndexRun run = course::run_index_checks(argc > 0 ? argv[0] : nullptr);
        std::printf(
            "%s: index helpers: %ld/%ld checks passed · kernel not run: %s. Run it on a "
            "GPU (docs/colab.md)\n",
            run.failed_cases ? "FAILED" : "SKIPPED", run.cases - run.failed_cases, run.cases, why.c_str());
        return course::index_verdict(run);
      }
      std::printf("SKIPPED: compiled OK — not run: %s. Run it on a GPU (docs/colab.md)\n", why.c_str());
      return 77;
    }
    case course::GpuStatus::kBroken:
      std::printf("ERROR: %s\n", why.c_str());
      return 2;
    case course::GpuStatus::kUsable:
      std::printf("GPU: %s\n", why.c_str());
      break;
  }
  if (const char* need = std::getenv("COURSE_REQUIRED_GPUS")) {
    const int wanted = std::atoi(need);
    int found = 0;
    if (cudaGetDeviceCount(&found) != cudaSuccess) found = 0;
    if (found < wanted) {
      std::printf("SKIPPED: compiled OK — not run: needs %d GPUs, found %d\n", wanted, found);
      return 77;
    }
  }
  return course::run_tests(argc, argv, /*with_watchdog=*/true);
}
