// The engine's own small kernels: everything between the course's kernels and cuBLAS that only
// moves or reshapes data (given code, not exercises). Each launcher enqueues on `stream` and
// checks the launch; all pointers are device pointers; 16-bit tensors are __half, row-major.
//
// Shapes use T = tokens in the step, H = hidden size, Hq / Hkv heads, D head dim, I the MLP
// width, V the vocabulary, bs the KV block size. Every row length (H, Hq·D, I, D) is a multiple
// of 8 halves, so rows move as 16-byte vectors.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "random_init.h"

namespace serving {

// out[t, :] = embed[tokens[t], :]   (embed [V, H]; ids were checked on the host at submit)
void embedding_gather(const __half* embed, const int32_t* tokens, __half* out, int T, int hidden, cudaStream_t stream);

// qkv [T, (Hq + 2·Hkv)·D] (one packed GEMM's output) -> q [T, Hq·D], k [T, Hkv·D], v [T, Hkv·D]:
// the per-head layouts 07's RoPE (batch T, N = 1) and 06's decode (q [B, Hq, D]) take.
void split_qkv(const __half* qkv, __half* q, __half* k, __half* v, int T, int heads_q, int heads_kv, int head_dim,
               cudaStream_t stream);

// Writes token t's k and v ([T, Hkv, D]) into the paged caches [num_blocks, Hkv, bs, D] at slot
// slots[t] = block · bs + offset (01's slot_of). slots[t] < 0 (a padded row of a CUDA graph
// batch) writes nothing.
void kv_cache_write(const __half* k, const __half* v, __half* k_cache, __half* v_cache, const int64_t* slots, int T,
                    int heads_kv, int head_dim, int block_size, cudaStream_t stream);

// The first `len` tokens of one sequence from the pages into dense K, V [Hkv, len, D] (the
// [1, Hkv, Nk, D] a dense prefill kernel takes). block_table: the sequence's row.
void kv_gather(const __half* k_cache, const __half* v_cache, const int32_t* block_table, __half* k_dense,
               __half* v_dense, int len, int heads_kv, int head_dim, int block_size, cudaStream_t stream);

// Token-major [N, H, D] <-> head-major [H, N, D] (a prefill chunk's Q into the dense kernel's
// layout, and its output back to the rows the O projection reads).
void tokens_to_heads(const __half* in, __half* out, int N, int heads, int head_dim, cudaStream_t stream);
void heads_to_tokens(const __half* in, __half* out, int N, int heads, int head_dim, cudaStream_t stream);

// gate_up [T, 2·I] (gate then up, one packed GEMM's output) -> out [T, I] = silu(gate) · up,
// in fp32, rounded once.
void swiglu(const __half* gate_up, __half* out, int T, int inter, cudaStream_t stream);

// out[r, :] = in[rows[r], :] for r < R (the rows whose logits a step needs).
void gather_rows(const __half* in, const int32_t* rows, __half* out, int R, int width, cudaStream_t stream);

// Per row of logits [R, V] (fp32): the arg max (lowest index on ties), its value and the
// second largest value (the top-2 margin the tests compare bounds with).
struct ArgmaxResult {
  int32_t token;
  float top1, top2;
};
void argmax_rows(const float* logits, ArgmaxResult* out, int R, int vocab, cudaStream_t stream);

// Fills n fp16 values with model/random_init.h's formula for tensor (kind, layer): element i is
// random_weight_half_bits(seed, kind, layer, i, stddev), the same bits the host's
// random_weights() stores, without sending gigabytes over PCIe.
void fill_random(__half* out, int64_t n, uint64_t seed, TensorKind kind, int layer, float stddev, cudaStream_t stream);

}  // namespace serving
