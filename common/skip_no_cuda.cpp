// Stands in for every GPU test when no CUDA compiler was found at configure time, so CTest
// reports them as Skipped (with this reason) instead of silently not listing them.
#include <cstdio>

int main(int argc, char** argv) {
  std::printf("SKIPPED %s: no CUDA compiler (nvcc) was found when the build was configured, so "
              "the GPU tests were not built. Install the CUDA toolkit and reconfigure.\n",
              argc > 1 ? argv[1] : "");
  return 77;
}
