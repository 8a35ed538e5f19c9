// The serving loop: requests in, tokens out, continuous batching.
//
//   submit(request)  checks the request (a bad one is refused with its message, nothing else
//                    changes) and queues it in 02's Scheduler
//   step()           one iteration: the scheduler plans which sequences run and with how many
//                    tokens (decodes first, then prefill chunks; it reserves KV pages in 01's
//                    KvBlockManager and preempts the youngest sequence when pages run out), the
//                    ModelRunner runs that plan in one forward pass, every sequence whose chunk
//                    reached its end samples a token, and the scheduler commits (finished
//                    sequences give their pages back). Requests join and leave between steps.
//   run()            step() until nothing is left
//
// A preempted sequence keeps its tokens; when it is admitted again its prompt and the tokens
// it generated are prefilled again (recompute) and it goes on where it stopped.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "01_kv_block_manager.h"
#include "02_batch_scheduler.h"
#include "forward.h"
#include "weights_gpu.h"

namespace serving {

struct Request {
  std::vector<int32_t> prompt;  // token ids, each in [0, vocab)
  int max_new_tokens = 16;      // >= 1
  float temperature = 0.f;      // 0: greedy (arg max); > 0: sample
  float top_p = 1.f;            // nucleus mass, (0, 1]
  uint64_t seed = 0;            // the sampling RNG's seed (sampling.h)
  bool stop_at_eos = false;     // finish early at one of the model's EOS ids
  bool keep_logits = false;     // keep the logits of every sampled position (tests, comparisons)
};

struct RequestResult {
  int id = -1;
  std::string error;             // non-empty: the request was refused and never ran
  bool finished = false;         // all tokens generated (or refused)
  std::vector<int32_t> tokens;   // the generated tokens
  std::vector<float> margins;    // top-1 minus top-2 logit at each generated token
  std::vector<float> logits;     // keep_logits: [tokens.size(), vocab], row i gave tokens[i]
  std::vector<double> token_ms;  // when each token was ready, ms after submit
  int preemptions = 0;
  double ttft_ms() const { return token_ms.empty() ? 0 : token_ms.front(); }
};

struct EngineConfig {
  int block_size = 16;  // tokens per KV page
  int num_blocks = 0;   // KV pages; 0: kv_cache_fraction of the free GPU memory
  double kv_cache_fraction = 0.5;
  int max_context = 0;  // longest sequence (prompt + generated); 0: the model's max_position_embeddings
  SchedulerConfig scheduler;
  bool cuda_graphs = true;  // replay pure-decode steps as CUDA graphs
};

class Engine {
 public:
  Engine(DeviceWeights weights, const EngineConfig& config);

  // Returns the request's id. A request that can never run gets `error` set and `finished`
  // true at once (prompt empty or longer than the context, a token id outside the vocabulary,
  // max_new_tokens < 1, a bad temperature or top_p); the others are not affected.
  int submit(const Request& request);
  // One step; false when there was nothing to do.
  bool step();
  void run();  // step() until idle

  const RequestResult& result(int id) const;
  bool idle() const { return scheduler_->idle(); }

  // Logits [T, vocab] of every position of `tokens` as one sequence, prefilled in chunks of
  // `chunk` tokens (each chunk its own step); the engine must be idle. For the tests and the
  // comparison with transformers.
  std::vector<float> prompt_logits(const std::vector<int32_t>& tokens, int chunk);

  ModelRunner& runner() { return *runner_; }
  const ModelConfig& config() const { return runner_->config(); }
  const EngineConfig& engine_config() const { return config_; }
  int max_context() const { return max_context_; }
  const KvBlockManager& kv() const { return *kv_; }
  int peak_blocks_used() const { return peak_blocks_; }
  int steps() const { return steps_; }
  int decode_steps() const { return decode_steps_; }  // steps of decode tokens only
  double decode_ms() const { return decode_ms_; }     // wall time of those steps
  // With runner().set_profiling(true): the GPU time of the pure-decode steps, summed per part.
  const StepProfile& decode_profile() const { return decode_profile_; }
  int profiled_decode_steps() const { return profiled_decode_steps_; }

 private:
  struct Live {
    Request request;
    std::vector<int32_t> tokens;  // prompt, then generated
    std::chrono::steady_clock::time_point submitted;
  };
  EngineConfig config_;
  int max_context_ = 0;
  std::unique_ptr<KvBlockManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::vector<RequestResult> results_;       // by id
  std::vector<std::unique_ptr<Live>> live_;  // by id; null once finished or refused
  int peak_blocks_ = 0, steps_ = 0, decode_steps_ = 0;
  double decode_ms_ = 0;
  StepProfile decode_profile_;
  int profiled_decode_steps_ = 0;
};

}  // namespace serving
