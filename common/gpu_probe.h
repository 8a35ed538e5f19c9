// Decides whether GPU tests can run here, before any test starts.
#pragma once
#include <string>

namespace course {

enum class GpuStatus {
  kUsable,
  kSkip,    // no device, no driver, or the device is older than the exercise needs: exit 77
  kBroken,  // a device exists but this build cannot run on it (wrong CUDA_ARCH): a real failure
};

// required_sm: e.g. 80 for sm_80; 0 for "any". `why` receives a one-line explanation.
GpuStatus probe_gpu(int required_sm, std::string* why);
// The same for an exercise built for one architecture-specific target only (sm_90a: wgmma,
// setmaxnreg): a GPU newer than max_sm (0: no limit) has none of its code and is skipped too.
GpuStatus probe_gpu(int required_sm, int max_sm, std::string* why);

}  // namespace course
