// What serve and serve_bench share: the command line, the model choice and the copy roof.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "weights_gpu.h"

namespace serving {

// --name value / --flag arguments; positional ones are refused. Flags are the names in `flags`.
class Args {
 public:
  Args(int argc, char** argv, const std::vector<std::string>& flags);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback) const;
  double get_double(const std::string& name, double fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

// A model by preset name (random weights filled on the GPU) or a Hugging Face directory:
//   smollm2_135m | llama3_8b | llama3_8b:<layers> | tiny | <directory with config.json>
// `description` says which, e.g. "SmolLM2-135M shape, random weights (seed 1)".
DeviceWeights load_model(const std::string& spec, uint64_t seed, std::string* description);
bool is_preset(const std::string& spec);

// Device-to-device cudaMemcpy of a buffer far larger than L2, read + written bytes over the
// median time of `reps` copies, in GB/s: the bandwidth a memory-bound step can hope for
// (bench/roofs.cu measures the course's copy roof the same way).
double measure_copy_roof_gbs(int reps = 10);

std::string device_name();

// n token ids in [first, first + count), a deterministic function of seed (xorshift64): the
// prompts of serve_bench and of the tests.
std::vector<int32_t> random_tokens(int n, uint64_t seed, int first, int count);

}  // namespace serving
