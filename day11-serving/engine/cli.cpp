// serve and serve_bench's shared pieces (cli.h).
#include "cli.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>

#include "cuda_check.h"
#include "model_config.h"
#include "weights.h"

namespace serving {

Args::Args(int argc, char** argv, const std::vector<std::string>& flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "' (options start with --)");
    a = a.substr(2);
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
      values_[a] = "1";
    } else {
      if (i + 1 >= argc) throw std::invalid_argument("option --" + a + " needs a value");
      values_[a] = argv[++i];
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int Args::get_int(const std::string& name, int fallback) const {
  return has(name) ? std::stoi(get(name, "")) : fallback;
}

double Args::get_double(const std::string& name, double fallback) const {
  return has(name) ? std::stod(get(name, "")) : fallback;
}

bool is_preset(const std::string& spec) {
  return spec == "smollm2_135m" || spec == "tiny" || spec.rfind("llama3_8b", 0) == 0;
}

DeviceWeights load_model(const std::string& spec, uint64_t seed, std::string* description) {
  if (is_preset(spec)) {
    ModelConfig c;
    std::string what;
    if (spec == "smollm2_135m") {
      c = ModelConfig::smollm2_135m();
      what = "SmolLM2-135M shape";
    } else if (spec == "tiny") {
      c = ModelConfig::tiny();
      what = "tiny test shape";
    } else {
      const size_t colon = spec.find(':');
      const int layers = colon == std::string::npos ? 32 : std::stoi(spec.substr(colon + 1));
      c = ModelConfig::llama3_8b(layers);
      what = "Llama-3-8B shape, " + std::to_string(layers) + " layers";
    }
    if (description) *description = what + ", random weights filled on the GPU (seed " + std::to_string(seed) + ")";
    return DeviceWeights::random(c, seed);
  }
  const HostWeights w = load_hf_weights(spec);  // throws with the file and tensor named
  if (description) *description = spec + " (" + std::to_string(w.config.num_layers) + " layers, loaded)";
  return DeviceWeights::upload(w);
}

double measure_copy_roof_gbs(int reps) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const size_t bytes = std::min<size_t>(size_t(1) << 30, free_b / 4) & ~size_t(4095);
  void *src = nullptr, *dst = nullptr;
  CUDA_CHECK(cudaMalloc(&src, bytes));
  CUDA_CHECK(cudaMalloc(&dst, bytes));
  CUDA_CHECK(cudaMemset(src, 1, bytes));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    CUDA_CHECK(cudaEventRecord(a));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (r >= 2) ms.push_back(t);  // the first two warm up
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(src);
  cudaFree(dst);
  std::sort(ms.begin(), ms.end());
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

std::vector<int32_t> random_tokens(int n, uint64_t seed, int first, int count) {
  std::vector<int32_t> t(std::max(n, 0));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int32_t& id : t) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    id = first + int32_t(s % uint64_t(count));
  }
  return t;
}

std::string device_name() {
  int dev = 0;
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  return p.name;
}

}  // namespace serving
