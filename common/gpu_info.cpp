// Prints, once per `make check`, whether GPU tests will run here and why not if they won't:
// CTest itself shows skipped tests without their reason.
#include <cstdio>
#include <string>

#include "gpu_probe.h"

int main() {
  std::string why;
  switch (course::probe_gpu(0, &why)) {
    case course::GpuStatus::kUsable:
      std::printf("course: GPU tests run on %s\n", why.c_str());
      return 0;
    case course::GpuStatus::kSkip:
      std::printf("course: GPU tests will be SKIPPED: %s\n", why.c_str());
      return 0;
    case course::GpuStatus::kBroken:
      std::printf("course: GPU tests will FAIL: %s\n", why.c_str());
      return 1;
  }
  return 1;
}
