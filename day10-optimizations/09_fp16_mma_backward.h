// Day 10 · Exercise 09 · the FlashAttention-2 backward pass on mma.sync (fp16 and bf16) — the contract.
//
// Given the forward pass's inputs Q, K, V, its output O, its per-row log-sum-exp L and dO (the
// gradient of the loss with respect to O), computes the gradients dQ, dK, dV of
//   O = softmax(scale · Q·Kᵀ + mask) · V
// in the notation of the FlashAttention-2 paper (per batch and query head; i a query, j a key):
//   P_ij = exp(scale · q_i·k_j − L_i)   (0 where the mask hides key j from query i)
//   D_i  = rowsum(dO_i ∘ O_i)
//   dV = Pᵀ dO     dP = dO Vᵀ     dS = P ∘ (dP − D_i)     dQ = scale · dS K     dK = scale · dSᵀ Q
// With GQA, dK and dV of a KV head are the sums over the G = Hq / Hkv query heads that read it.
// 05_fp16_mma's flash_attention_mma writes exactly the O and L this needs (its overload with an
// `lse` pointer); common/reference_backward.h is the fp64 reference of every quantity above.
//
// Tensors (all device pointers; layouts and masks: common/attention_params.h):
//   q, o, d_o, dq   T    [B, Hq, Nq, D]     T = __half or __nv_bfloat16, one overload each
//   k, v, dk, dv    T    [B, Hkv, Nk, D]
//   lse             fp32 [B, Hq, Nq]       L_i = natural log of Σ_j exp(scale · q_i·k_j) over the
//                                          keys row i sees; −inf for a row that sees no key
//   workspace       fp32, flash_attention_mma_backward_workspace_bytes(p) bytes (scratch: D_i and
//                   the fp32 accumulator of dQ; its contents on entry do not matter)
// Precision: every accumulation is fp32 (S, dP, D_i, dV, dK, and dQ across key blocks); P and dS
// are rounded to T where they are mma operands, dq, dk, dv once when they are written.
// Any Hq that is a multiple of Hkv, any Nq, Nk >= 1 (Nq != Nk and tails included), causal
// (bottom-right aligned) or not, head_dim 64 or 128; p.window must be -1. A query row that sees
// no key gets dQ = 0 and adds nothing to dK, dV. q, k, v, o, d_o, dq, dk, dv and workspace must
// be 16-byte aligned, lse 4-byte aligned (any cudaMalloc pointer is).
// Throws std::invalid_argument naming the field (q, k, v, o, d_o, lse, dq, dk, dv, workspace,
// batch, heads_q, heads_kv, seq_q, seq_k, head_dim, window) before any launch. Needs sm_80.
//
// Work: three kernels on `stream`, nothing allocated, nothing synchronised: (1) D_i from O and dO,
// and the dQ accumulator zeroed; (2) one thread block per (batch, KV head, block of Bc keys):
// dK, dV of its keys in registers, dQ added to the fp32 accumulator with atomics; (3) dQ =
// scale · accumulator, rounded to T. Tile configuration: Bc = 128 keys, 8 warps and two
// shared-memory stages for Q and dO when that fits course::smem_limit_per_block(), else Bc = 64,
// 4 warps and one stage; if neither fits, std::runtime_error.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "attention_params.h"

// ---------------------------------------------------------------------------------------------
// Index helpers: pure index arithmetic the kernel calls, on the host and the device. The test
// checks them on the CPU, without a GPU (its "[index]" cases).

// The query tiles a block of keys must visit. Query tile t holds the rows t·br .. t·br + br − 1
// (br >= 1). For the block whose first key is k0 (0 <= k0 < seq_k), returns [begin, end): exactly
// the tiles that hold at least one row i < seq_q which sees key k0 (under the causal mask, row i
// sees key j iff j <= i + seq_k − seq_q; without it, every row sees every key). Every key of the
// block is at least k0, so no other tile holds a row that sees any key of the block.
struct BwdTileRange {
  int begin, end;
};
__host__ __device__ BwdTileRange bwd_query_tiles(int k0, int seq_q, int seq_k, bool causal, int br);

// The transposed score tile Sᵀ = K_j Q_iᵀ as a warp holds it: accumulator fragment n (n >= 0) is
// the 16 × 8 block of the 16 keys key0 .. key0 + 15 (its rows) and the 8 queries q0 + 8n ..
// q0 + 8n + 7 (its columns), held as the m16n8k16 C/D operand: four fp32 elements e = 0..3 per
// lane (lane 0..31).
// The key (row) of element e of a fragment held by `lane`.
__host__ __device__ int bwd_acc_key(int lane, int e, int key0);
// The query (column) of element e of fragment n held by `lane`.
__host__ __device__ int bwd_acc_query(int lane, int n, int e, int q0);

// Bytes of scratch space flash_attention_mma_backward needs for p: 4 · B · Hq · Nq · (D + 1),
// rounded up to a multiple of 256.
size_t flash_attention_mma_backward_workspace_bytes(const course::AttentionParams& p);

void flash_attention_mma_backward(const __half* q, const __half* k, const __half* v, const __half* o, const __half* d_o,
                                  const float* lse, __half* dq, __half* dk, __half* dv, float* workspace,
                                  const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_mma_backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  const __nv_bfloat16* o, const __nv_bfloat16* d_o, const float* lse, __nv_bfloat16* dq,
                                  __nv_bfloat16* dk, __nv_bfloat16* dv, float* workspace,
                                  const course::AttentionParams& p, cudaStream_t stream = 0);
