// The forward pass of a Llama-architecture model over one step's tokens: any mix of decode
// tokens and prefill chunks of different sequences, reading and writing the paged KV cache.
// The engine (engine.h) decides what runs; this file only runs it.
//
// Per step, with T tokens (decode tokens first, then the prefill chunks):
//   x = embed[tokens]                                              kernels.h: embedding_gather
//   per layer:
//     h = rmsnorm(x) (layer 0) | x += d; h = rmsnorm(x)            03: rmsnorm | fused_add_rmsnorm
//     qkv = h · Wqkvᵀ                                              cuBLAS, one packed GEMM
//     q, k, v = split(qkv); q, k = rope(q, k, positions)          kernels.h, 07: rope_yarn
//     cache[slot(t)] = k, v                                        kernels.h: kv_cache_write
//     a = decode(q) over the pages (one query per sequence)        06: split_kv_decode
//       | per prefill chunk: gather its pages to dense K/V,        kernels.h: kv_gather
//         causal bottom-right attention of Nq new queries          10: flash_attention_wgmma (sm_90)
//         over Nk = context tokens                                  or 05: flash_attention_mma
//     x += a · Woᵀ; h = rmsnorm(x)                                 cuBLAS, 03
//     d = (silu(h·Wgateᵀ) ⊙ h·Wupᵀ) · Wdownᵀ                       cuBLAS (gate/up packed), swiglu
//   only the rows that sample: x += d; logits = rmsnorm(x) · lm_headᵀ (fp32), arg max
// Activations are fp16, GEMMs accumulate in fp32 (cuBLAS compute type 32F), logits are fp32.
#pragma once
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "01_kv_block_manager.h"
#include "kernels.h"
#include "weights_gpu.h"

namespace serving {

struct RunnerConfig {
  int block_size = 16;         // tokens per KV page
  int num_blocks = 0;          // KV pages in the pool (> 0)
  int max_blocks_per_seq = 0;  // block-table columns: the longest sequence is this · block_size
  int max_step_tokens = 2048;  // T at most in one forward
  int max_logit_rows = 256;    // rows of logits one forward may ask for
  bool cuda_graphs = true;     // capture pure-decode steps (per padded batch size) and replay them
};

enum class LogitRows { kNone, kLast, kAll };

// One sequence's tokens in a step. The pages for positions [0, first_token + num_tokens) must
// already be reserved in the block manager (kv.num_tokens(seq) >= first_token + num_tokens);
// positions before first_token must already hold their K/V (computed by earlier steps).
struct ChunkInput {
  int seq = 0;                      // the sequence's id in the KvBlockManager
  int first_token = 0;              // position of tokens[0]
  const int32_t* tokens = nullptr;  // host pointer, num_tokens ids, already checked against the vocabulary
  int num_tokens = 0;
  LogitRows logits = LogitRows::kLast;
};

// Where a step's GPU time went (profiling pass only: events around every part).
struct StepProfile {
  double attention_ms = 0;  // split_kv_decode, the prefill kernel and its page gather / transposes
  double gemm_ms = 0;       // the cuBLAS GEMMs (LM head included)
  double other_ms = 0;      // norms, RoPE, cache writes, embedding, SwiGLU, arg max
};

class ModelRunner {
 public:
  ModelRunner(DeviceWeights weights, const RunnerConfig& rc);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Runs the model over `chunks` and waits for it. Returns the number of logit rows, in chunk
  // order (kLast: one, kAll: num_tokens, kNone: none). Throws std::invalid_argument for a step
  // larger than the configuration (tokens, logit rows, context), and whatever a launcher throws.
  int forward(const std::vector<ChunkInput>& chunks, const KvBlockManager& kv);

  // After forward(): per logit row, the arg max and the top-2 values (computed on the GPU).
  const std::vector<ArgmaxResult>& argmax() const { return argmax_; }
  // Rows [first, first + count) of the last forward's logits, copied to the host (row-major).
  std::vector<float> logits_rows(int first, int count) const;

  const ModelConfig& config() const { return weights_.config(); }
  const RunnerConfig& runner_config() const { return rc_; }
  const DeviceWeights& weights() const { return weights_; }
  size_t kv_cache_bytes() const { return kv_bytes_; }
  // "prefill: 10_hopper_wgmma (solution) · decode: 06_split_kv_decode (solution) · norm: ..."
  std::string kernel_summary() const;
  const char* prefill_kernel() const { return use_wgmma_ ? "10_hopper_wgmma" : "05_fp16_mma"; }

  void set_cuda_graphs(bool on) { rc_.cuda_graphs = on; }
  // While on, forward() records events around each part and fills last_profile(); graphs are
  // not used (a graph replays as one unit).
  void set_profiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  const StepProfile& last_profile() const { return profile_; }
  int graphs_captured() const { return int(graphs_.size()); }
  cudaStream_t stream() const { return stream_; }

 private:
  enum class Part { kStart, kAttention, kGemm, kOther };
  struct Step;  // the plan of one forward (forward.cu)
  void enqueue(const Step& s);
  void gemm(const __half* x, const __half* w, __half* y, int rows, int out, int in);
  void mark(Part p);
  template <class T>
  T* alloc(size_t n);

  DeviceWeights weights_;
  RunnerConfig rc_;
  bool use_wgmma_ = false;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  std::vector<__half*> k_cache_, v_cache_;  // per layer [num_blocks, Hkv, bs, D]
  size_t kv_bytes_ = 0;
  std::vector<void*> allocations_;

  // Activations [max_step_tokens, ...] and scratch.
  __half *residual_ = nullptr, *normed_ = nullptr, *qkv_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  __half *attn_ = nullptr, *proj_ = nullptr, *gate_up_ = nullptr, *act_ = nullptr;
  __half *q_heads_ = nullptr, *o_heads_ = nullptr, *k_dense_ = nullptr, *v_dense_ = nullptr;
  __half *fin_x_ = nullptr, *fin_res_ = nullptr, *fin_normed_ = nullptr;
  float* logits_ = nullptr;
  float* split_ws_ = nullptr;
  size_t split_ws_bytes_ = 0;
  ArgmaxResult* argmax_dev_ = nullptr;
  ArgmaxResult* argmax_pinned_ = nullptr;
  // Step metadata (token ids, positions, slots, block tables, ...): built in a pinned host
  // buffer and sent with one copy per step into its device twin.
  char* meta_host_ = nullptr;
  char* meta_dev_ = nullptr;
  size_t meta_bytes_ = 0;

  std::vector<ArgmaxResult> argmax_;
  int last_rows_ = 0;

  // Pure-decode graphs by (padded batch, block-table columns); a key is captured the second
  // time it is seen, so that the first run loads every kernel outside a capture.
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;
  std::map<std::pair<int, int>, int> seen_;

  bool profiling_ = false;
  StepProfile profile_;
  std::vector<std::pair<cudaEvent_t, Part>> marks_;
  size_t marks_used_ = 0;
};

}  // namespace serving
