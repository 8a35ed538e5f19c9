// Day 06 · Exercise 05 · flash backward (fp32, FlashAttention-2's backward pass) — the contract.
//
//   Given Q, K, V, the forward's O and L, and dO = ∂loss/∂O, computes dQ, dK, dV without ever
//   materialising the Nq × Nk matrices P, dP or dS.
//
// Layouts and mask semantics: common/attention_params.h (GQA: query head h reads KV head
// h / (Hq / Hkv); the causal mask is bottom-right aligned). All fp32, contiguous:
//   q, o, d_o, dq   [B, Hq, Nq, D]
//   k, v, dk, dv    [B, Hkv, Nk, D]
//   lse             [B, Hq, Nq]   L_i = m_i + ln ℓ_i of the SCALED logits (natural log), −inf
//                                 for a row that sees no key: what flash_attention (exercise 02)
//                                 writes to its `lse` output
//   workspace       flash_backward_workspace_bytes(p) bytes of scratch (it holds D_i); what it
//                   holds on entry does not matter
// Outputs, with S = scale · Q Kᵀ masked, P_ij = exp(S_ij − L_i):
//   dV = Pᵀ dO,   dP = dO Vᵀ,   D_i = rowsum(dO_i ∘ O_i),   dS = P ∘ (dP − D_i),
//   dQ = scale · dS K,   dK = scale · dSᵀ Q
// dk and dv of a KV head are summed over the G = Hq / Hkv query heads that read it. A row that
// sees no key gets dQ_i = 0 and adds nothing to dK or dV. dq, dk and dv are overwritten: the
// launcher zeroes dq itself, on the stream, before accumulating into it. dq is summed with fp32
// atomics, so its last bits may differ from one run to the next (lesson: "05 · Accumulating dQ:
// atomics or a second pass").
//
// Any Nq, Nk >= 1 (Nq != Nk, sizes that are not tile multiples), causal or not, head_dim 32, 64
// or 128, p.window must be -1. q, k, v, o, d_o, dq, dk and dv must be 16-byte aligned (tiles
// are copied as float4; any cudaMalloc pointer is). Throws std::invalid_argument naming the
// field (q, k, v, o, d_o, lse, dq, dk, dv, workspace, batch, heads_q, heads_kv, seq_q, seq_k,
// head_dim, window) before any launch.
//
// This is the simple kernel of exercise 02 turned around: one thread block per key tile K_j, V_j
// of one (batch, KV head), one thread per row of dK_j or dV_j.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "attention_params.h"

// The query tiles that a key tile meets (index helper: the kernel calls it, the [index] tests
// check it on the CPU). Query tile t holds the rows [t·br, min((t + 1)·br, seq_q)). For the key
// tile whose first key is k0 (0 <= k0 < seq_k, br >= 1), returns [first, end): exactly the query
// tiles holding at least one row that sees key k0. Without a mask that is every tile,
// [0, ceil(seq_q / br)); under the causal mask row i sees key k0 iff k0 <= i + seq_k − seq_q, so
// the tiles from the one holding the first such row to the last. A row that sees k0 sees at
// least one key of the tile, and a row that sees a key of the tile sees k0 (the smallest one),
// so these are exactly the tiles whose rows contribute to the key tile's dK and dV.
struct FlashBackwardTiles {
  int first, end;
};
__host__ __device__ FlashBackwardTiles flash_backward_query_tiles(int k0, int seq_q, int seq_k, bool causal, int br);

// Bytes of scratch space the launcher needs: one float per query row, B · Hq · Nq · 4.
size_t flash_backward_workspace_bytes(const course::AttentionParams& p);

void flash_backward(const float* q, const float* k, const float* v, const float* o, const float* d_o, const float* lse,
                    float* dq, float* dk, float* dv, float* workspace, const course::AttentionParams& p,
                    cudaStream_t stream = 0);
