// Stands in for a GPU test that this build cannot run, so CTest reports it as Skipped with the
// reason instead of silently not listing it:
//   course_skip_no_cuda <test name>            no CUDA compiler at configure time
//   course_skip_no_cuda <test name> <reason>   any other reason (e.g. no target architecture
//                                              of this build is new enough for the exercise)
#include <cstdio>

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "";
  if (argc > 2) {
    std::printf("SKIPPED %s: not compiled, not run: %s\n", name, argv[2]);
  } else {
    std::printf(
        "SKIPPED %s: not compiled, not run: no CUDA compiler (nvcc) was found when the "
        "build was configured. Install the CUDA toolkit and reconfigure, or run it on a "
        "GPU (docs/colab.md)\n",
        name);
  }
  return 77;
}
