// ModelRunner: buffers, the step plan, the layer loop, CUDA graphs and the profiling pass.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "03_fused_add_rmsnorm.h"
#include "05_fp16_mma.h"
#include "06_split_kv_decode.h"
#include "07_rope_yarn.h"
#include "../../bench/cublas_check.h"  // CUBLAS_CHECK, the bench's own
#include "attention_params.h"
#include "cuda_check.h"
#include "forward.h"
#ifdef SERVE_HAVE_10
#include "10_hopper_wgmma.h"
#endif

// Which implementation of each exercise this library links: "solution" or "yours" (set by
// engine/CMakeLists.txt from SERVE_MINE).
#ifndef SERVE_IMPL_01
#define SERVE_IMPL_01 "solution"
#endif
#ifndef SERVE_IMPL_02
#define SERVE_IMPL_02 "solution"
#endif
#ifndef SERVE_IMPL_03
#define SERVE_IMPL_03 "solution"
#endif
#ifndef SERVE_IMPL_05
#define SERVE_IMPL_05 "solution"
#endif
#ifndef SERVE_IMPL_06
#define SERVE_IMPL_06 "solution"
#endif
#ifndef SERVE_IMPL_07
#define SERVE_IMPL_07 "solution"
#endif
#ifndef SERVE_IMPL_10
#define SERVE_IMPL_10 "solution"
#endif

namespace serving {

namespace {

size_t align16(size_t x) { return (x + 15) / 16 * 16; }

int next_pow2(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

// The host-side plan of one forward: row order, prefill chunks, and where each array sits in
// the metadata buffer (the same offsets for the same (T, decode rows, logit rows, columns), so
// a captured graph finds its arrays where it captured them).
struct ModelRunner::Step {
  int T = 0;     // token rows (padded rows included in a graph step)
  int Bd = 0;    // decode rows: the first Bd rows, one token each
  int R = 0;     // logit rows
  int cols = 1;  // block-table columns in this step
  struct Prefill {
    int row0, n, ctx, table_row;
  };
  std::vector<Prefill> prefills;
  size_t off_slots = 0, off_tokens = 0, off_pos = 0, off_ctx = 0, off_rows = 0, off_tables = 0, bytes = 0;
  void layout(int table_rows) {
    off_slots = 0;
    off_tokens = align16(off_slots + sizeof(int64_t) * T);
    off_pos = align16(off_tokens + sizeof(int32_t) * T);
    off_ctx = align16(off_pos + sizeof(int32_t) * T);
    off_rows = align16(off_ctx + sizeof(int32_t) * std::max(Bd, 1));
    off_tables = align16(off_rows + sizeof(int32_t) * std::max(R, 1));
    bytes = align16(off_tables + sizeof(int32_t) * size_t(std::max(table_rows, 1)) * cols);
  }
};

template <class T>
T* ModelRunner::alloc(size_t n) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  allocations_.push_back(p);
  return static_cast<T*>(p);
}

ModelRunner::ModelRunner(DeviceWeights weights, const RunnerConfig& rc) : weights_(std::move(weights)), rc_(rc) {
  const ModelConfig& c = weights_.config();
  if (rc_.block_size < 1) throw std::invalid_argument("RunnerConfig: block_size must be >= 1");
  if (rc_.num_blocks < 1) throw std::invalid_argument("RunnerConfig: num_blocks must be >= 1");
  if (rc_.max_blocks_per_seq < 1) throw std::invalid_argument("RunnerConfig: max_blocks_per_seq must be >= 1");
  if (rc_.max_step_tokens < 1) throw std::invalid_argument("RunnerConfig: max_step_tokens must be >= 1");
  if (rc_.max_logit_rows < 1) throw std::invalid_argument("RunnerConfig: max_logit_rows must be >= 1");
  const int H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size;
  const size_t T = size_t(rc_.max_step_tokens);

  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // A workspace of our own: cuBLAS then allocates nothing inside a graph capture.
  const size_t cublas_ws = size_t(32) << 20;
  CUBLAS_CHECK(cublasSetWorkspace(cublas_, alloc<char>(cublas_ws), cublas_ws));

#ifdef SERVE_HAVE_10
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  use_wgmma_ = major == 9 && minor == 0;  // built for sm_90a only
#endif

  const size_t page = size_t(Hkv) * rc_.block_size * D;
  for (int l = 0; l < c.num_layers; ++l) {
    k_cache_.push_back(alloc<__half>(page * rc_.num_blocks));
    v_cache_.push_back(alloc<__half>(page * rc_.num_blocks));
  }
  kv_bytes_ = 2 * size_t(c.num_layers) * page * rc_.num_blocks * sizeof(__half);

  residual_ = alloc<__half>(T * H);
  normed_ = alloc<__half>(T * H);
  qkv_ = alloc<__half>(T * (Hq + 2 * Hkv) * D);
  q_ = alloc<__half>(T * Hq * D);
  k_ = alloc<__half>(T * Hkv * D);
  v_ = alloc<__half>(T * Hkv * D);
  attn_ = alloc<__half>(T * Hq * D);
  proj_ = alloc<__half>(T * H);
  gate_up_ = alloc<__half>(T * 2 * I);
  act_ = alloc<__half>(T * I);
  q_heads_ = alloc<__half>(T * Hq * D);
  o_heads_ = alloc<__half>(T * Hq * D);
  const size_t max_ctx = size_t(rc_.max_blocks_per_seq) * rc_.block_size;
  k_dense_ = alloc<__half>(max_ctx * Hkv * D);
  v_dense_ = alloc<__half>(max_ctx * Hkv * D);
  const size_t R = size_t(rc_.max_logit_rows);
  fin_x_ = alloc<__half>(R * H);
  fin_res_ = alloc<__half>(R * H);
  fin_normed_ = alloc<__half>(R * H);
  logits_ = alloc<float>(R * c.vocab_size);
  argmax_dev_ = alloc<ArgmaxResult>(R);
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&argmax_pinned_), R * sizeof(ArgmaxResult)));

  // split_kv_decode's partials: the most any decode batch of this configuration needs (the
  // split count only shrinks with fewer block-table columns, so the widest table bounds it).
  course::PagedParams pp;
  pp.heads_q = Hq;
  pp.heads_kv = Hkv;
  pp.head_dim = D;
  pp.block_size = rc_.block_size;
  pp.num_blocks = rc_.num_blocks;
  pp.max_blocks_per_seq = rc_.max_blocks_per_seq;
  for (int b = 1; b <= rc_.max_step_tokens; ++b) {
    pp.batch = b;
    split_ws_bytes_ = std::max(split_ws_bytes_, split_kv_decode_workspace_bytes(pp));
  }
  split_ws_ = alloc<float>(split_ws_bytes_ / sizeof(float) + 1);

  // The largest metadata a step can have: every row a chunk of its own with a full table.
  Step worst;
  worst.T = worst.Bd = rc_.max_step_tokens;
  worst.R = std::max(rc_.max_logit_rows, rc_.max_step_tokens);
  worst.cols = rc_.max_blocks_per_seq;
  worst.layout(rc_.max_step_tokens);
  meta_bytes_ = worst.bytes;
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&meta_host_), meta_bytes_));
  meta_dev_ = alloc<char>(meta_bytes_);
  CUDA_CHECK(cudaMemset(k_dense_, 0, max_ctx * Hkv * D * sizeof(__half)));
}

ModelRunner::~ModelRunner() {
  for (auto& g : graphs_)
    if (g.second) cudaGraphExecDestroy(g.second);
  for (auto& m : marks_) cudaEventDestroy(m.first);
  if (cublas_) cublasDestroy(cublas_);
  for (void* p : allocations_) cudaFree(p);
  if (argmax_pinned_) cudaFreeHost(argmax_pinned_);
  if (meta_host_) cudaFreeHost(meta_host_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string ModelRunner::kernel_summary() const {
  std::string prefill = use_wgmma_ ? std::string("10_hopper_wgmma (") + SERVE_IMPL_10 + ")"
                                   : std::string("05_fp16_mma (") + SERVE_IMPL_05 + ")";
  return "prefill: " + prefill + " · decode: 06_split_kv_decode (" + SERVE_IMPL_06 +
         ") · norm: 03_fused_add_rmsnorm (" + SERVE_IMPL_03 + ") · rope: 07_rope_yarn (" + SERVE_IMPL_07 +
         ") · pages: 01_kv_block_manager (" + SERVE_IMPL_01 + ") · scheduler: 02_batch_scheduler (" + SERVE_IMPL_02 +
         ")";
}

void ModelRunner::mark(Part p) {
  if (!profiling_) return;
  if (marks_used_ == marks_.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    marks_.push_back({e, p});
  }
  marks_[marks_used_].second = p;
  CUDA_CHECK(cudaEventRecord(marks_[marks_used_].first, stream_));
  ++marks_used_;
}

// y[rows, out] = x[rows, in] · w[out, in]ᵀ, all row-major fp16, fp32 accumulation. cuBLAS is
// column-major: a row-major [r, c] matrix is its column-major [c, r] transpose, so this is
// yᵀ = w · xᵀ with w read transposed (op T) — no copy of anything.
void ModelRunner::gemm(const __half* x, const __half* w, __half* y, int rows, int out, int in) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, w, CUDA_R_16F, in, x, CUDA_R_16F,
                            in, &zero, y, CUDA_R_16F, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void ModelRunner::enqueue(const Step& s) {
  const ModelConfig& c = weights_.config();
  const int H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, I = c.intermediate_size;
  const int T = s.T, bs = rc_.block_size;
  const float eps = c.rms_norm_eps;
  CUDA_CHECK(cudaMemcpyAsync(meta_dev_, meta_host_, s.bytes, cudaMemcpyHostToDevice, stream_));
  const int64_t* slots = reinterpret_cast<const int64_t*>(meta_dev_ + s.off_slots);
  const int32_t* tokens = reinterpret_cast<const int32_t*>(meta_dev_ + s.off_tokens);
  const int32_t* positions = reinterpret_cast<const int32_t*>(meta_dev_ + s.off_pos);
  const int32_t* ctx = reinterpret_cast<const int32_t*>(meta_dev_ + s.off_ctx);
  const int32_t* rows = reinterpret_cast<const int32_t*>(meta_dev_ + s.off_rows);
  const int32_t* tables = reinterpret_cast<const int32_t*>(meta_dev_ + s.off_tables);

  RopeParams rp;
  rp.batch = T;  // every token is its own "sequence" of length 1 at its own position
  rp.heads_q = Hq;
  rp.heads_kv = Hkv;
  rp.seq_len = 1;
  rp.head_dim = D;
  rp.layout = RopeLayout::kNeox;  // Hugging Face's rotate_half
  rp.base = c.rope_theta;
  course::PagedParams pp;
  pp.batch = s.Bd;
  pp.heads_q = Hq;
  pp.heads_kv = Hkv;
  pp.head_dim = D;
  pp.block_size = bs;
  pp.num_blocks = rc_.num_blocks;
  pp.max_blocks_per_seq = s.cols;

  mark(Part::kStart);
  embedding_gather(weights_.embed, tokens, residual_, T, H, stream_);
  for (int l = 0; l < c.num_layers; ++l) {
    const DeviceLayer& w = weights_.layers[l];
    // The previous layer's MLP output joins the residual stream here, fused with the norm.
    if (l == 0)
      rmsnorm(residual_, w.input_norm, normed_, T, H, eps, stream_);
    else
      fused_add_rmsnorm(proj_, residual_, w.input_norm, normed_, T, H, eps, stream_);
    mark(Part::kOther);
    gemm(normed_, w.qkv, qkv_, T, (Hq + 2 * Hkv) * D, H);
    mark(Part::kGemm);
    split_qkv(qkv_, q_, k_, v_, T, Hq, Hkv, D, stream_);
    rope_yarn(q_, k_, q_, k_, positions, rp, stream_);
    kv_cache_write(k_, v_, k_cache_[l], v_cache_[l], slots, T, Hkv, D, bs, stream_);
    mark(Part::kOther);
    if (s.Bd > 0) split_kv_decode(q_, k_cache_[l], v_cache_[l], tables, ctx, attn_, split_ws_, pp, stream_);
    for (const Step::Prefill& pf : s.prefills) {
      // Chunked prefill = causal attention with bottom-right alignment: the chunk's n queries
      // are the last n of ctx keys, so query i sees keys j <= i + (ctx - n).
      kv_gather(k_cache_[l], v_cache_[l], tables + size_t(pf.table_row) * s.cols, k_dense_, v_dense_, pf.ctx, Hkv, D,
                bs, stream_);
      tokens_to_heads(q_ + size_t(pf.row0) * Hq * D, q_heads_, pf.n, Hq, D, stream_);
      const course::AttentionParams ap = course::AttentionParams::make(1, Hq, Hkv, pf.n, pf.ctx, D, /*causal=*/true);
#ifdef SERVE_HAVE_10
      if (use_wgmma_)
        flash_attention_wgmma(q_heads_, k_dense_, v_dense_, o_heads_, ap, stream_);
      else
        flash_attention_mma(q_heads_, k_dense_, v_dense_, o_heads_, ap, stream_);
#else
      flash_attention_mma(q_heads_, k_dense_, v_dense_, o_heads_, ap, stream_);
#endif
      heads_to_tokens(o_heads_, attn_ + size_t(pf.row0) * Hq * D, pf.n, Hq, D, stream_);
    }
    mark(Part::kAttention);
    gemm(attn_, w.o, proj_, T, H, Hq * D);
    mark(Part::kGemm);
    fused_add_rmsnorm(proj_, residual_, w.post_norm, normed_, T, H, eps, stream_);
    mark(Part::kOther);
    gemm(normed_, w.gate_up, gate_up_, T, 2 * I, H);
    mark(Part::kGemm);
    swiglu(gate_up_, act_, T, I, stream_);
    mark(Part::kOther);
    gemm(act_, w.down, proj_, T, H, I);
    mark(Part::kGemm);
  }
  // Only the rows that sample go on: the last residual add and the final norm on R rows, then
  // the LM head (fp32 logits: their top-2 margins are what sampling and the tests look at).
  if (s.R > 0) {
    gather_rows(proj_, rows, fin_x_, s.R, H, stream_);
    gather_rows(residual_, rows, fin_res_, s.R, H, stream_);
    fused_add_rmsnorm(fin_x_, fin_res_, weights_.final_norm, fin_normed_, s.R, H, eps, stream_);
    mark(Part::kOther);
    const float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, c.vocab_size, s.R, H, &one, weights_.lm_head,
                              CUDA_R_16F, H, fin_normed_, CUDA_R_16F, H, &zero, logits_, CUDA_R_32F, c.vocab_size,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    mark(Part::kGemm);
    argmax_rows(logits_, argmax_dev_, s.R, c.vocab_size, stream_);
    CUDA_CHECK(
        cudaMemcpyAsync(argmax_pinned_, argmax_dev_, sizeof(ArgmaxResult) * s.R, cudaMemcpyDeviceToHost, stream_));
    mark(Part::kOther);
  }
}

int ModelRunner::forward(const std::vector<ChunkInput>& chunks, const KvBlockManager& kv) {
  const ModelConfig& c = weights_.config();
  // Row order: decode tokens (chunks of one token) first, so that they are split_kv_decode's
  // q [B, Hq, D] as they stand; then the prefill chunks.
  std::vector<int> order;
  for (size_t i = 0; i < chunks.size(); ++i)
    if (chunks[i].num_tokens == 1) order.push_back(int(i));
  const int n_decode = int(order.size());
  for (size_t i = 0; i < chunks.size(); ++i)
    if (chunks[i].num_tokens > 1) order.push_back(int(i));

  Step s;
  int tokens = 0, rows_wanted = 0, max_table = 1;
  bool all_decode_last = n_decode > 0;
  for (const ChunkInput& ch : chunks) {
    if (ch.num_tokens < 1) throw std::invalid_argument("ModelRunner::forward: a chunk with no tokens");
    if (kv.num_tokens(ch.seq) < ch.first_token + ch.num_tokens)
      throw std::invalid_argument("ModelRunner::forward: sequence " + std::to_string(ch.seq) +
                                  " has no KV pages reserved for its chunk");
    tokens += ch.num_tokens;
    rows_wanted += ch.logits == LogitRows::kAll ? ch.num_tokens : ch.logits == LogitRows::kLast ? 1 : 0;
    max_table = std::max(max_table, int(kv.block_table(ch.seq).size()));
    if (ch.num_tokens != 1 || ch.logits != LogitRows::kLast) all_decode_last = false;
  }
  if (tokens > rc_.max_step_tokens)
    throw std::invalid_argument("ModelRunner::forward: " + std::to_string(tokens) + " tokens in one step, at most " +
                                std::to_string(rc_.max_step_tokens));
  if (rows_wanted > rc_.max_logit_rows)
    throw std::invalid_argument("ModelRunner::forward: " + std::to_string(rows_wanted) +
                                " logit rows in one step, at most " + std::to_string(rc_.max_logit_rows));
  if (tokens == 0) {
    argmax_.clear();
    last_rows_ = 0;
    return 0;
  }

  // A pure-decode step runs as a CUDA graph, padded to a power-of-two batch (padded rows: token
  // 0 at position 0, slot -1 so nothing is written, context length 0 so decode outputs zeros).
  s.cols = std::min(next_pow2(max_table), rc_.max_blocks_per_seq);
  int padded = n_decode;
  const bool graph = rc_.cuda_graphs && !profiling_ && all_decode_last;
  if (graph) padded = std::min(next_pow2(n_decode), std::min(rc_.max_step_tokens, rc_.max_logit_rows));
  s.T = graph ? padded : tokens;
  s.Bd = graph ? padded : n_decode;
  s.R = graph ? padded : rows_wanted;
  s.layout(s.Bd + (int(order.size()) - n_decode));

  int64_t* slots = reinterpret_cast<int64_t*>(meta_host_ + s.off_slots);
  int32_t* tok = reinterpret_cast<int32_t*>(meta_host_ + s.off_tokens);
  int32_t* pos = reinterpret_cast<int32_t*>(meta_host_ + s.off_pos);
  int32_t* ctx = reinterpret_cast<int32_t*>(meta_host_ + s.off_ctx);
  int32_t* rows = reinterpret_cast<int32_t*>(meta_host_ + s.off_rows);
  int32_t* tables = reinterpret_cast<int32_t*>(meta_host_ + s.off_tables);
  std::memset(meta_host_, 0, s.bytes);
  std::vector<int> row0(chunks.size());
  int r = 0, table_row = 0;
  for (int idx : order) {
    const ChunkInput& ch = chunks[idx];
    row0[idx] = r;
    for (int i = 0; i < ch.num_tokens; ++i) {
      const int p = ch.first_token + i;
      if (ch.tokens[i] < 0 || ch.tokens[i] >= c.vocab_size)
        throw std::invalid_argument("ModelRunner::forward: token id " + std::to_string(ch.tokens[i]) +
                                    " outside the vocabulary");
      tok[r + i] = ch.tokens[i];
      pos[r + i] = p;
      slots[r + i] = kv.slot_of(ch.seq, p);
    }
    const std::vector<int32_t>& bt = kv.block_table(ch.seq);
    std::copy(bt.begin(), bt.end(), tables + size_t(table_row) * s.cols);
    if (ch.num_tokens == 1)
      ctx[table_row] = ch.first_token + 1;
    else
      s.prefills.push_back({r, ch.num_tokens, ch.first_token + ch.num_tokens, table_row});
    ++table_row;
    r += ch.num_tokens;
  }
  for (int pad = r; pad < s.T; ++pad) slots[pad] = -1;  // padded graph rows write no cache slot
  int nr = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkInput& ch = chunks[i];
    if (ch.logits == LogitRows::kLast) rows[nr++] = row0[i] + ch.num_tokens - 1;
    if (ch.logits == LogitRows::kAll)
      for (int t = 0; t < ch.num_tokens; ++t) rows[nr++] = row0[i] + t;
  }
  for (; nr < s.R; ++nr) rows[nr] = nr;  // padded graph rows: logits computed, ignored

  if (graph) {
    const auto key = std::make_pair(s.T, s.cols);
    auto it = graphs_.find(key);
    if (it == graphs_.end() && seen_[key]++ >= 1) {
      // Second sighting: capture. A launcher that cannot be captured turns graphs off for this
      // key (nullptr) and the step runs eagerly, with a warning once.
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        enqueue(s);
      } catch (const std::exception& e) {
        cudaStreamEndCapture(stream_, &g);
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        std::fprintf(stderr, "serving: CUDA graph capture failed (%s); running this batch size eagerly\n", e.what());
        g = nullptr;
      }
      if (g || cudaStreamEndCapture(stream_, &g) == cudaSuccess) {
        if (g && cudaGraphInstantiate(&exec, g, 0) != cudaSuccess) {
          cudaGetLastError();
          exec = nullptr;
        }
      }
      if (g) cudaGraphDestroy(g);
      it = graphs_.emplace(key, exec).first;
    }
    if (it != graphs_.end() && it->second)
      CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    else
      enqueue(s);
  } else {
    marks_used_ = 0;
    enqueue(s);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  if (profiling_) {
    profile_ = StepProfile{};
    for (size_t i = 1; i < marks_used_; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[i - 1].first, marks_[i].first));
      if (marks_[i].second == Part::kAttention)
        profile_.attention_ms += ms;
      else if (marks_[i].second == Part::kGemm)
        profile_.gemm_ms += ms;
      else
        profile_.other_ms += ms;
    }
  }
  argmax_.assign(argmax_pinned_, argmax_pinned_ + rows_wanted);
  last_rows_ = rows_wanted;
  return rows_wanted;
}

std::vector<float> ModelRunner::logits_rows(int first, int count) const {
  if (first < 0 || count < 0 || first + count > last_rows_)
    throw std::invalid_argument("ModelRunner::logits_rows: rows [" + std::to_string(first) + ", " +
                                std::to_string(first + count) + ") of " + std::to_string(last_rows_));
  const size_t V = size_t(weights_.config().vocab_size);
  std::vector<float> out(size_t(count) * V);
  CUDA_CHECK(cudaMemcpy(out.data(), logits_ + size_t(first) * V, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace serving
