// The model's weights on the GPU, in the layout the forward pass wants: fp16, one allocation,
// and the projections that read the same input packed into one matrix, so that one GEMM does
// the work of two or three:
//   qkv      [(Hq + 2·Hkv)·D, hidden]   q_proj, k_proj, v_proj stacked along the output rows
//   gate_up  [2·I, hidden]              gate_proj then up_proj
// Stacking rows of row-major [out, in] matrices is plain concatenation, so the packed matrix
// is the Hugging Face tensors copied one after the other.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "model_config.h"
#include "weights.h"

namespace serving {

struct DeviceLayer {
  __half* input_norm = nullptr;  // [hidden]
  __half* qkv = nullptr;         // [(Hq + 2·Hkv)·D, hidden]
  __half* o = nullptr;           // [hidden, Hq·D]
  __half* post_norm = nullptr;   // [hidden]
  __half* gate_up = nullptr;     // [2·I, hidden]
  __half* down = nullptr;        // [hidden, I]
};

class DeviceWeights {
 public:
  DeviceWeights() = default;
  ~DeviceWeights();
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;
  DeviceWeights(DeviceWeights&& o) noexcept;
  DeviceWeights& operator=(DeviceWeights&& o) noexcept;

  // Copies host weights (a loaded checkpoint, or random_weights for a small model).
  static DeviceWeights upload(const HostWeights& w);
  // Draws the weights of config c on the GPU with model/random_init.h's formula: bit for bit
  // what random_weights(c, seed) gives on the host, without building 16 GB there for the
  // Llama-3-8B shape.
  static DeviceWeights random(const ModelConfig& c, uint64_t seed);

  const ModelConfig& config() const { return config_; }
  size_t bytes() const { return bytes_; }  // everything the forward pass reads per step
  __half* embed = nullptr;                 // [vocab, hidden]
  std::vector<DeviceLayer> layers;
  __half* final_norm = nullptr;  // [hidden]
  __half* lm_head = nullptr;     // [vocab, hidden]; == embed when tied

 private:
  void allocate(const ModelConfig& c);  // carves every tensor out of one cudaMalloc
  ModelConfig config_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace serving
