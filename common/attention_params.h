// The one description of an attention problem that every launcher, the CPU reference, the
// tests and the bench share (layouts and semantics: docs/conventions.md).
//
// Dense tensors are contiguous row-major [B, H, N, D], PyTorch SDPA's layout:
//   Q, O: [B, Hq, Nq, D]      K, V: [B, Hkv, Nk, D]
// Query head h reads KV head h / (Hq / Hkv)  (GQA; Hq == Hkv is MHA, Hkv == 1 is MQA).
//
// Masks, with off = Nk - Nq (bottom-right alignment, so the LAST query row always lines up
// with the LAST key, as in KV-cached decoding and in PyTorch/FlashAttention-2 for Nq != Nk):
//   causal:          key j is visible to query i  iff  j <= i + off
//   sliding window:  additionally                      j >= i + off - window
// A query row that sees no key at all outputs zeros, never NaN.
#pragma once
#include <cmath>
#include <cstdint>

namespace course {

struct AttentionParams {
  int batch = 1;      // B
  int heads_q = 1;    // Hq
  int heads_kv = 1;   // Hkv; must divide Hq
  int seq_q = 1;      // Nq
  int seq_k = 1;      // Nk
  int head_dim = 64;  // D
  float scale = 0.f;  // softmax scale; 0 means the default 1/sqrt(D)
  bool causal = false;
  int window = -1;  // sliding-window width w (keys i+off-w .. i+off); -1 = no window

  static AttentionParams make(int batch, int heads_q, int heads_kv, int seq_q, int seq_k, int head_dim,
                              bool causal = false, int window = -1) {
    AttentionParams p;
    p.batch = batch;
    p.heads_q = heads_q;
    p.heads_kv = heads_kv;
    p.seq_q = seq_q;
    p.seq_k = seq_k;
    p.head_dim = head_dim;
    p.causal = causal;
    p.window = window;
    return p;
  }

  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }
  int group_size() const { return heads_q / heads_kv; }  // G: query heads per KV head
  int kv_head_of(int h) const { return h / group_size(); }
  int diag_offset() const { return seq_k - seq_q; }

  bool key_visible(int i, int j) const {
    const int limit = i + diag_offset();
    if (causal && j > limit) return false;
    if (window >= 0 && (j > limit || j < limit - window)) return false;
    return true;
  }

  int64_t q_elems() const { return int64_t(batch) * heads_q * seq_q * head_dim; }
  int64_t kv_elems() const { return int64_t(batch) * heads_kv * seq_k * head_dim; }
  int64_t o_elems() const { return q_elems(); }
};

// Decode over a paged KV cache (vLLM-style): one query token per sequence.
//   q, o:               [B, Hq, D]
//   k_cache, v_cache:   [num_blocks, Hkv, block_size, D]
//   block_table:        int32 [B, max_blocks_per_seq]; entry = physical block id
//   context_lens:       int32 [B]; token t of sequence b lives in physical block
//                       block_table[b][t / block_size], slot t % block_size
// Slots at or past context_lens[b] hold garbage and must not influence the output.
struct PagedParams {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int block_size = 16;
  int num_blocks = 1;          // physical blocks in the cache
  int max_blocks_per_seq = 1;  // columns of block_table
  float scale = 0.f;           // 0 means 1/sqrt(D)

  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }
  int group_size() const { return heads_q / heads_kv; }
  int kv_head_of(int h) const { return h / group_size(); }
  int64_t q_elems() const { return int64_t(batch) * heads_q * head_dim; }
  int64_t cache_elems() const { return int64_t(num_blocks) * heads_kv * block_size * head_dim; }
};

}  // namespace course
