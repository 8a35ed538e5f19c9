// Engine: request checks, the step loop over 02's Scheduler, sampling and per-request results.
#include "engine.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_check.h"
#include "sampling.h"

namespace serving {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A KV-manager id no request uses: prompt_logits() borrows it for its one sequence.
constexpr int kScratchSeq = 2147483000;

}  // namespace

Engine::Engine(DeviceWeights weights, const EngineConfig& config) : config_(config) {
  const ModelConfig& c = weights.config();
  max_context_ = config_.max_context > 0 ? config_.max_context : c.max_position_embeddings;
  if (config_.block_size < 1) throw std::invalid_argument("EngineConfig: block_size must be >= 1");
  const int max_blocks_per_seq = (max_context_ + config_.block_size - 1) / config_.block_size;
  int num_blocks = config_.num_blocks;
  if (num_blocks <= 0) {
    // The pool: a fraction of what is free once the weights are in, in whole pages, but never
    // more than every running sequence at full context could use.
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double page_bytes = double(c.kv_bytes_per_token()) * config_.block_size;
    const double want = double(max_blocks_per_seq) * std::max(config_.scheduler.max_num_seqs, 1);
    num_blocks = int(std::min(want, double(free_b) * config_.kv_cache_fraction / page_bytes));
    if (num_blocks < max_blocks_per_seq)
      throw std::runtime_error("Engine: " + std::to_string(free_b >> 20) +
                               " MiB free on the GPU is too little for a KV cache of one sequence of " +
                               std::to_string(max_context_) + " tokens");
  }
  config_.num_blocks = num_blocks;
  kv_ = std::make_unique<KvBlockManager>(num_blocks, config_.block_size, max_blocks_per_seq);
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, *kv_);
  RunnerConfig rc;
  rc.block_size = config_.block_size;
  rc.num_blocks = num_blocks;
  rc.max_blocks_per_seq = max_blocks_per_seq;
  rc.max_step_tokens = std::max(config_.scheduler.max_step_tokens, config_.scheduler.max_prefill_chunk);
  // One logit row per running sequence; prompt_logits() asks for a whole prefill chunk.
  rc.max_logit_rows = std::max(config_.scheduler.max_num_seqs, config_.scheduler.max_prefill_chunk);
  rc.cuda_graphs = config_.cuda_graphs;
  runner_ = std::make_unique<ModelRunner>(std::move(weights), rc);
}

int Engine::submit(const Request& request) {
  const int id = int(results_.size());
  results_.push_back(RequestResult{});
  live_.push_back(nullptr);
  RequestResult& res = results_.back();
  res.id = id;
  const ModelConfig& c = config();
  const int n = int(request.prompt.size());
  std::string error;
  if (n < 1) error = "prompt: empty (at least one token is needed)";
  for (int i = 0; i < n && error.empty(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= c.vocab_size)
      error = "prompt: token " + std::to_string(i) + " is " + std::to_string(request.prompt[i]) +
              ", outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")";
  if (error.empty() && request.max_new_tokens < 1)
    error = "max_new_tokens must be >= 1 (got " + std::to_string(request.max_new_tokens) + ")";
  if (error.empty() && int64_t(n) + request.max_new_tokens > max_context_)
    error = "prompt: " + std::to_string(n) + " tokens + max_new_tokens " + std::to_string(request.max_new_tokens) +
            " exceed the context of " + std::to_string(max_context_) + " tokens";
  if (error.empty() && !(request.temperature >= 0.f))
    error = "temperature must be >= 0 (got " + std::to_string(request.temperature) + ")";
  if (error.empty() && !(request.top_p > 0.f && request.top_p <= 1.f))
    error = "top_p must be in (0, 1] (got " + std::to_string(request.top_p) + ")";
  if (error.empty()) {
    Sequence seq;
    seq.id = id;
    seq.prompt_len = n;
    seq.max_new_tokens = request.max_new_tokens;
    try {
      scheduler_->add(seq);  // refuses what the KV pool can never hold, naming the field
    } catch (const std::invalid_argument& e) { error = e.what(); }
  }
  if (!error.empty()) {
    res.error = "request " + std::to_string(id) + " refused: " + error;
    res.finished = true;
    return id;
  }
  auto live = std::make_unique<Live>();
  live->request = request;
  live->tokens = request.prompt;
  live->submitted = Clock::now();
  live_[id] = std::move(live);
  return id;
}

bool Engine::step() {
  if (scheduler_->idle()) return false;
  const Clock::time_point t0 = Clock::now();
  const StepPlan plan = scheduler_->schedule();
  if (plan.chunks.empty()) throw std::logic_error("Engine::step: the scheduler planned nothing while not idle");
  peak_blocks_ = std::max(peak_blocks_, kv_->num_blocks() - kv_->num_free_blocks());

  std::vector<ChunkInput> inputs;
  bool decode_only = true;
  for (const ScheduledChunk& ch : plan.chunks) {
    const Live& l = *live_[ch.seq_id];
    ChunkInput in;
    in.seq = ch.seq_id;
    in.first_token = ch.first_token;
    in.tokens = l.tokens.data() + ch.first_token;
    in.num_tokens = ch.num_tokens;
    in.logits = ch.samples ? LogitRows::kLast : LogitRows::kNone;
    decode_only = decode_only && ch.num_tokens == 1 && ch.samples;
    inputs.push_back(in);
  }
  runner_->forward(inputs, *kv_);

  // Sampling: one logit row per sampling chunk, in plan order.
  const Clock::time_point now = Clock::now();
  const ModelConfig& c = config();
  std::vector<int> eos;
  int row = 0;
  for (const ScheduledChunk& ch : plan.chunks) {
    if (!ch.samples) continue;
    Live& l = *live_[ch.seq_id];
    RequestResult& res = results_[ch.seq_id];
    const ArgmaxResult& am = runner_->argmax()[row];
    int32_t token = am.token;
    std::vector<float> logits;
    if (l.request.temperature > 0.f || l.request.keep_logits) logits = runner_->logits_rows(row, 1);
    if (l.request.temperature > 0.f) {
      const double u = sampling_uniform(l.request.seed, uint64_t(res.tokens.size()));
      token = sample_top_p(logits.data(), c.vocab_size, l.request.temperature, l.request.top_p, u);
    }
    if (l.request.keep_logits) res.logits.insert(res.logits.end(), logits.begin(), logits.end());
    ++row;
    l.tokens.push_back(token);
    res.tokens.push_back(token);
    res.margins.push_back(am.top1 - am.top2);
    res.token_ms.push_back(ms_between(l.submitted, now));
    const bool is_eos = std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), token) != c.eos_token_ids.end() ||
                        (c.eos_token_id >= 0 && token == c.eos_token_id);
    if (l.request.stop_at_eos && is_eos) eos.push_back(ch.seq_id);
  }
  scheduler_->commit(plan, eos);
  for (const ScheduledChunk& ch : plan.chunks) {
    const Sequence& s = scheduler_->sequence(ch.seq_id);
    results_[ch.seq_id].preemptions = s.num_preemptions;
    if (s.state == SeqState::kFinished && live_[ch.seq_id]) {
      results_[ch.seq_id].finished = true;
      live_[ch.seq_id].reset();
    }
  }
  for (int id : plan.preempted) results_[id].preemptions = scheduler_->sequence(id).num_preemptions;
  ++steps_;
  if (decode_only) {
    ++decode_steps_;
    decode_ms_ += ms_between(t0, Clock::now());
    if (runner_->profiling()) {
      const StepProfile& p = runner_->last_profile();
      decode_profile_.attention_ms += p.attention_ms;
      decode_profile_.gemm_ms += p.gemm_ms;
      decode_profile_.other_ms += p.other_ms;
      ++profiled_decode_steps_;
    }
  }
  return true;
}

void Engine::run() {
  while (step()) {}
}

const RequestResult& Engine::result(int id) const {
  if (id < 0 || id >= int(results_.size()))
    throw std::invalid_argument("Engine::result: unknown id " + std::to_string(id));
  return results_[id];
}

std::vector<float> Engine::prompt_logits(const std::vector<int32_t>& tokens, int chunk) {
  if (!scheduler_->idle()) throw std::logic_error("Engine::prompt_logits: the engine is busy");
  if (tokens.empty() || int(tokens.size()) > max_context_)
    throw std::invalid_argument("Engine::prompt_logits: " + std::to_string(tokens.size()) +
                                " tokens (1 to the context of " + std::to_string(max_context_) + ")");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= config().vocab_size)
      throw std::invalid_argument("Engine::prompt_logits: token " + std::to_string(i) + " outside the vocabulary");
  const int step =
      std::max(1, std::min({chunk, runner_->runner_config().max_step_tokens, runner_->runner_config().max_logit_rows}));
  const size_t V = size_t(config().vocab_size);
  std::vector<float> out;
  out.reserve(tokens.size() * V);
  try {
    for (int first = 0; first < int(tokens.size()); first += step) {
      const int n = std::min(step, int(tokens.size()) - first);
      if (!kv_->append(kScratchSeq, n)) throw std::runtime_error("Engine::prompt_logits: out of KV pages");
      ChunkInput in;
      in.seq = kScratchSeq;
      in.first_token = first;
      in.tokens = tokens.data() + first;
      in.num_tokens = n;
      in.logits = LogitRows::kAll;
      runner_->forward({in}, *kv_);
      const std::vector<float> rows = runner_->logits_rows(0, n);
      out.insert(out.end(), rows.begin(), rows.end());
    }
  } catch (...) {
    if (kv_->has(kScratchSeq)) kv_->free(kScratchSeq);
    throw;
  }
  if (kv_->has(kScratchSeq)) kv_->free(kScratchSeq);
  return out;
}

}  // namespace serving
