// Timing one (kernel, shape): allocate the inputs on the GPU, fill them, time the launcher.
#pragma once
#include <string>

#include "bench.h"
#include "timing.h"

namespace bench {

struct RunOutcome {
  bool timed = false;
  Measurement m;
  std::string note;  // why it was not timed, or what to know about the number
};

// Device bytes (inputs, outputs, workspace) the timed run of `k` on `s` allocates.
double device_bytes_needed(const Kernel& k, const Shape& s);

RunOutcome run_timed(const Kernel& k, const Shape& s, cudaStream_t stream, const TimingConfig& cfg,
                     L2Flusher& flusher);

}  // namespace bench
