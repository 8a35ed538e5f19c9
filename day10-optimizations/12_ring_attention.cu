// Day 10 · Exercise 12 · ring attention: K/V blocks travel a ring of GPUs, partial outputs merge by their log-sum-exp
// Lesson: day10-optimizations/12_ring_attention/README.md. Test: make test EX=12_ring_attention
//
// R ranks, one GPU each, one host thread (RingComm, nccl_ring.cuh). Rank r keeps two query
// chunks (zigzag: r and 2R − 1 − r) and holds one K/V block at a time. Each of the R steps:
//   comm stream     send the block in hand to rank r + 1, receive the next one from rank r − 1
//                   (into the other of two slots), one NCCL group over all ranks;
//   compute stream  the local kernel (exercise 10 on a Hopper, else 05) on each (query chunk,
//                   key chunk) pair of the block in hand that is not skipped, then merge its
//                   (O_s, L_s) into the running (O, L).
// Events keep the streams honest: kv_ready(r, slot) (a block has landed in that slot) and
// kv_free(r) (the compute has finished reading the slot the next receive overwrites).
// After the last step the running O is rounded to the 16-bit type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "05_fp16_mma.h"
#ifdef COURSE_HAVE_10_HOPPER_WGMMA
#include "10_hopper_wgmma.h"
#endif
#include "12_ring_attention.h"
#include "check_attention_args.h"
#include "cuda_check.h"
#include "half_convert.cuh"

// ---- index helpers (12_ring_attention.h) ------------------------------------------------------
__host__ __device__ int ring_chunk_start(int c, int n, int ranks) {
  // TODO(1) (≈ 4 lines): the first token of chunk c, and in ring_chunk below the chunk that a
  //   rank holds as its half 0 or 1, zigzag or naive, as the header states them (lesson:
  //   "Zigzag: balancing the causal work"). For long sequences c·n does not fit an int.
  return 0;  // TODO(1): replace (every chunk starts at 0: all are empty, nothing is computed)
}

__host__ __device__ int ring_chunk_len(int c, int n, int ranks) {
  return ring_chunk_start(c + 1, n, ranks) - ring_chunk_start(c, n, ranks);
}

__host__ __device__ int ring_chunk(int rank, int half, int ranks, bool zigzag) {
  return 0;  // TODO(1): replace (chunk 0 for every rank and half: wrong, but a chunk that exists)
}

__host__ __device__ int ring_source(int rank, int step, int ranks) {
  // TODO(2) (≈ 1 line): the rank whose K/V block this rank holds at step `step`, as the header
  //   states it (lesson: "The ring schedule"). In C++, % of a negative number is negative.
  return rank;  // TODO(2): replace (always the own block: a rank would see only its own keys)
}

__host__ __device__ RingPairKind ring_pair_kind(int q_chunk, int k_chunk, bool causal) {
  // TODO(3) (≈ 2 lines): skip, full or diagonal for this query chunk and key chunk, causal or
  //   not (lesson: "Causal masks across chunks").
  return kRingSkip;  // TODO(3): replace (every pair skipped: nothing is computed)
}

// ---- the local kernel (12_ring_attention.h), given -------------------------------------------
// Exercise 10 (wgmma, TMA, warp specialization: FlashAttention-3's design) where this build links
// its solution (COURSE_HAVE_10_HOPPER_WGMMA: the build compiles sm_90a) and the GPU is a Hopper;
// exercise 05 (mma.sync: FlashAttention-2's) everywhere else. Both write O and L = m + ln ℓ the
// same way, so the merge cannot tell which one ran. Decided per call, on the current GPU: each
// rank of a ring picks its own.
namespace {

bool local_is_wgmma(int device) {
#ifdef COURSE_HAVE_10_HOPPER_WGMMA
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major == 9;  // sm_90a code runs on compute capability 9.0, the only 9.x there is
#else
  (void)device;
  return false;
#endif
}

template <class T>
void local_attention(const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
                     cudaStream_t stream) {
#ifdef COURSE_HAVE_10_HOPPER_WGMMA
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (local_is_wgmma(device)) return flash_attention_wgmma(q, k, v, o, lse, p, stream);
#endif
  flash_attention_mma(q, k, v, o, lse, p, stream);
}

}  // namespace

const char* ring_local_kernel(int device) { return local_is_wgmma(device) ? "10_hopper_wgmma" : "05_fp16_mma"; }

void ring_local_attention(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                          const course::AttentionParams& p, cudaStream_t stream) {
  local_attention(q, k, v, o, lse, p, stream);
}

void ring_local_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                          float* lse, const course::AttentionParams& p, cudaStream_t stream) {
  local_attention(q, k, v, o, lse, p, stream);
}

namespace {

constexpr int kMergeThreads = 256;  // D threads per row, 256 / D rows per block

// ---- the running state of a query chunk ------------------------------------------------------
// Per query row: O (fp32, normalised like the local kernel's output) and L = ln Σ_j exp(s_ij) over
// the keys merged so far. Before the first merge a row has seen nothing: O = 0, L = −inf.
__global__ void ring_init_kernel(float* __restrict__ o_run, float* __restrict__ l_run, int64_t rows, int d) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * d; i += stride) {
    o_run[i] = 0.f;
    if (i < rows) l_run[i] = -INFINITY;
  }
}

// Merges one partial (O_s, L_s) of the local kernel into the running (O, L), row by row. Thread
// (d, rr) of a block owns element d of row blockIdx.x · kRows + rr.
template <class T, int D>
__global__ void __launch_bounds__(kMergeThreads)
    ring_merge_kernel(float* __restrict__ o_run, float* __restrict__ l_run, const T* __restrict__ o_s,
                      const float* __restrict__ l_s, int64_t rows) {
  constexpr int kRows = kMergeThreads / D;
  const int d = threadIdx.x % D;
  const int64_t row = int64_t(blockIdx.x) * kRows + threadIdx.x / D;
  float l_new = -INFINITY;  // the row's L after the merge, written once every thread has read L
  if (row < rows) {
    // TODO(4) (≈ 10 lines): merge the partial (O_s = row `row` of o_s, L_s = l_s[row]) into the
    //   running (O = row `row` of o_run, L = l_run[row]): element d of O becomes the mean of O and
    //   O_s weighted by e^L and e^{L_s}, and l_new = ln(e^L + e^{L_s}); no exp may overflow when
    //   |L| is 1e4, and a row with L = L_s = −inf keeps O = 0, L = −inf, without a NaN (lesson:
    //   "Merging partial results").
  }
  __syncthreads();  // every thread of the row has read l_run[row] before it is replaced
  if (row < rows && d == 0) l_run[row] = l_new;
}

using course::from_float;  // fp32 -> 16 bits, nearest even (common/half_convert.cuh)

// The final output: the running O rounded to the 16-bit type.
template <class T>
__global__ void ring_output_kernel(const float* __restrict__ o_run, T* __restrict__ o, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    // TODO(5) (≈ 1 line): element i of the output, rounded to T to nearest (lesson: "Merging
    //   partial results").
  }
}

// Blocks for a grid-stride loop over n elements (at least one: an empty chunk is no launch error).
int grid_for(int64_t n, int threads) { return int(std::clamp<int64_t>((n + threads - 1) / threads, 1, 4096)); }

// ---- where a rank's workspace keeps what -------------------------------------------------------
// Every piece is sized for the longest chunk, ⌈N / 2R⌉ tokens, and starts 256-byte aligned.
struct Sizes {
  int64_t lmax;        // tokens of the longest chunk
  int64_t slot_elems;  // one K/V block: K and V of two chunks, [B, Hkv, L, D] each
  int64_t o_elems;     // one chunk's O: [B, Hq, L, D]
  int64_t l_elems;     // one chunk's L: [B, Hq, L]
};

Sizes sizes_of(const course::AttentionParams& p, int ranks) {
  Sizes s;
  s.lmax = (int64_t(p.seq_q) + 2 * ranks - 1) / (2 * ranks);
  s.slot_elems = 4 * int64_t(p.batch) * p.heads_kv * s.lmax * p.head_dim;
  s.o_elems = int64_t(p.batch) * p.heads_q * s.lmax * p.head_dim;
  s.l_elems = int64_t(p.batch) * p.heads_q * s.lmax;
  return s;
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class T>
struct Workspace {
  T* slot[2];       // the K/V block in hand and the one arriving (they swap every step)
  float* o_run[2];  // running O of the rank's query chunks (half 0, half 1)
  float* l_run[2];  // running L
  T* part_o;        // one partial output of the local kernel
  float* part_l;    // and its log-sum-exp
};

template <class T>
Workspace<T> workspace_of(void* base, const Sizes& s) {
  unsigned char* at = static_cast<unsigned char*>(base);
  auto take = [&](size_t bytes) {
    unsigned char* here = at;
    at += aligned(bytes);
    return here;
  };
  Workspace<T> w;
  for (int i = 0; i < 2; ++i) w.slot[i] = reinterpret_cast<T*>(take(s.slot_elems * sizeof(T)));
  for (int i = 0; i < 2; ++i) w.o_run[i] = reinterpret_cast<float*>(take(s.o_elems * sizeof(float)));
  for (int i = 0; i < 2; ++i) w.l_run[i] = reinterpret_cast<float*>(take(s.l_elems * sizeof(float)));
  w.part_o = reinterpret_cast<T*>(take(s.o_elems * sizeof(T)));
  w.part_l = reinterpret_cast<float*>(take(s.l_elems * sizeof(float)));
  return w;
}

// A K/V block inside a slot: the K of the source rank's two chunks, then their V, each
// [B, Hkv, L, D] with that chunk's own length L, packed one after the other.
template <class T>
struct KvBlock {
  T* k[2];
  T* v[2];
};

template <class T>
KvBlock<T> block_in(T* slot, const course::AttentionParams& p, int src, int ranks, bool zigzag) {
  const int64_t token = int64_t(p.batch) * p.heads_kv * p.head_dim;  // elements per token of a chunk
  const int64_t l0 = ring_chunk_len(ring_chunk(src, 0, ranks, zigzag), p.seq_k, ranks);
  const int64_t l1 = ring_chunk_len(ring_chunk(src, 1, ranks, zigzag), p.seq_k, ranks);
  return {{slot, slot + l0 * token}, {slot + (l0 + l1) * token, slot + (2 * l0 + l1) * token}};
}

// Enqueues the merge of the partial in `w` into the running state of query half qh.
template <class T>
void merge_partial(const Workspace<T>& w, int qh, int64_t rows, int head_dim, cudaStream_t stream) {
  if (rows == 0) return;
  const int rows_per_block = kMergeThreads / head_dim;
  const int blocks = int((rows + rows_per_block - 1) / rows_per_block);
  if (head_dim == 64)
    ring_merge_kernel<T, 64><<<blocks, kMergeThreads, 0, stream>>>(w.o_run[qh], w.l_run[qh], w.part_o, w.part_l, rows);
  else
    ring_merge_kernel<T, 128><<<blocks, kMergeThreads, 0, stream>>>(w.o_run[qh], w.l_run[qh], w.part_o, w.part_l, rows);
  CUDA_CHECK_LAUNCH();
}

template <class T>
void check_args(const RingBuffers<T>& b, const course::AttentionParams& p, const RingComm& ring, const char* fn) {
  if (ring.aborted())
    throw std::runtime_error(std::string(fn) +
                             ": the ring was aborted by an earlier timeout or NCCL error; create a new RingComm");
  const int R = ring.size();
  course::require(int(b.rank.size()) == R, fn, "buffers",
                  "must hold one entry per rank of the ring (got " + std::to_string(b.rank.size()) + ", the ring has " +
                      std::to_string(R) + ")");
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < 2; ++h) {
      const std::string at = " (rank " + std::to_string(r) + ", half " + std::to_string(h) + ")";
      const void* ptrs[4] = {b.rank[r].q[h], b.rank[r].k[h], b.rank[r].v[h], b.rank[r].o[h]};
      const char* names[4] = {"q", "k", "v", "o"};
      for (int i = 0; i < 4; ++i) {
        course::require(ptrs[i] != nullptr, fn, names[i], "must not be null" + at);
        course::require(reinterpret_cast<uintptr_t>(ptrs[i]) % 16 == 0, fn, names[i], "must be 16-byte aligned" + at);
      }
    }
    course::require(b.rank[r].workspace != nullptr, fn, "workspace",
                    "must not be null (rank " + std::to_string(r) + ")");
    course::require(reinterpret_cast<uintptr_t>(b.rank[r].workspace) % 256 == 0, fn, "workspace",
                    "must be 256-byte aligned (rank " + std::to_string(r) + ")");
  }
  course::require(p.seq_k == p.seq_q, fn, "seq_k",
                  "must equal seq_q: one sequence attends to itself (got seq_q=" + std::to_string(p.seq_q) +
                      ", seq_k=" + std::to_string(p.seq_k) + ")");
  course::require(p.seq_q >= 2 * R, fn, "seq_q",
                  "must be at least 2R = " + std::to_string(2 * R) + " so that no chunk is empty (got " +
                      std::to_string(p.seq_q) + ")");
  // The shared dense checks (batch, heads, GQA) on rank 0's first chunk, already checked above.
  course::require_attention_tensors(b.rank[0].q[0], b.rank[0].k[0], b.rank[0].v[0], b.rank[0].o[0], p, fn);
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128, the local kernel's (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (no sliding window)");
}

template <class T>
void ring_attention_impl(const RingBuffers<T>& b, const course::AttentionParams& p, RingComm& ring, bool zigzag) {
  const char* fn = "ring_attention";
  check_args(b, p, ring, fn);
  const int R = ring.size(), N = p.seq_q, D = p.head_dim;
  const Sizes sz = sizes_of(p, R);
  const int64_t bh = int64_t(p.batch) * p.heads_q;  // query rows per token of a chunk
  std::vector<Workspace<T>> ws;
  for (int r = 0; r < R; ++r) ws.push_back(workspace_of<T>(b.rank[r].workspace, sz));

  // Start: every row has seen nothing yet; each rank's own K/V block goes into its slot 0 (on
  // the comm stream, which sends it on at step 0), and kv_ready says when it is there. The copy
  // first waits for kv_free: a previous call's last step may still be reading slot 0.
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    CUDA_CHECK(cudaStreamWaitEvent(ring.comm_stream(r), ring.kv_free(r), 0));
    for (int h = 0; h < 2; ++h) {
      const int64_t rows = bh * ring_chunk_len(ring_chunk(r, h, R, zigzag), N, R);
      ring_init_kernel<<<grid_for(rows * D, 256), 256, 0, ring.compute_stream(r)>>>(ws[r].o_run[h], ws[r].l_run[h],
                                                                                    rows, D);
      CUDA_CHECK_LAUNCH();
    }
    const KvBlock<T> own = block_in(ws[r].slot[0], p, r, R, zigzag);
    for (int h = 0; h < 2; ++h) {
      const size_t bytes =
          size_t(p.batch) * p.heads_kv * ring_chunk_len(ring_chunk(r, h, R, zigzag), N, R) * D * sizeof(T);
      CUDA_CHECK(cudaMemcpyAsync(own.k[h], b.rank[r].k[h], bytes, cudaMemcpyDeviceToDevice, ring.comm_stream(r)));
      CUDA_CHECK(cudaMemcpyAsync(own.v[h], b.rank[r].v[h], bytes, cudaMemcpyDeviceToDevice, ring.comm_stream(r)));
    }
    CUDA_CHECK(cudaEventRecord(ring.kv_ready(r, 0), ring.comm_stream(r)));
  }

  for (int s = 0; s < R; ++s) {
    const int hold = s % 2, next = (s + 1) % 2;  // the slot read this step, the slot receiving
    // ---- communication of step s: the block in hand moves one rank on (none after the last step)
    if (s + 1 < R) {
      // TODO(6) (≈ 20 lines): the exchange of step s. Each rank's comm stream first waits for
      //   kv_free when s > 0 (the compute of step s − 1 read slot `next`, which the receive
      //   overwrites); then ONE NCCL group over all ranks, in which rank r sends slot `hold` to rank
      //   r + 1 and receives slot `next` from rank r − 1: sz.slot_elems elements of
      //   nccl_type_of<T>() each way, on ring.comm(r) and ring.comm_stream(r). Every NCCL call's
      //   result goes through ring.check; ring.wait_enqueued follows the group, and only then each
      //   rank records kv_ready(r, next) on its comm stream: the block of step s + 1 (lesson: "The
      //   ring schedule" and "Overlapping transfer and compute").
    }
    // ---- compute of step s on the block in hand
    for (int r = 0; r < R; ++r) {
      CUDA_CHECK(cudaSetDevice(ring.device(r)));
      const cudaStream_t st = ring.compute_stream(r);
      const int src = ring_source(r, s, R);
      const KvBlock<T> kv = block_in(ws[r].slot[hold], p, src, R, zigzag);
      // TODO(7) (≈ 16 lines): the compute of step s on rank r, all on st. Wait for kv_ready(r, hold)
      //   (the block of step s has landed). Then for each query half qh and key half kh: the kind of
      //   the pair (query chunk of half qh, key chunk of the source's half kh); unless skipped,
      //   the local kernel with its log-sum-exp (ring_local_attention) on that pair alone, with the two
      //   chunks' lengths and causal only on the diagonal, into ws[r].part_o and ws[r].part_l,
      //   then merge_partial into half qh. Last, record kv_free: slot `hold` is free (lesson:
      //   "Causal masks across chunks" and "Overlapping transfer and compute").
    }
  }

  // The output: each query chunk's running O, rounded once.
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    for (int h = 0; h < 2; ++h) {
      const int64_t n = bh * ring_chunk_len(ring_chunk(r, h, R, zigzag), N, R) * D;
      ring_output_kernel<T><<<grid_for(n, 256), 256, 0, ring.compute_stream(r)>>>(ws[r].o_run[h], b.rank[r].o[h], n);
      CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace

size_t ring_attention_workspace_bytes(const course::AttentionParams& p, int ranks) {
  const Sizes s = sizes_of(p, ranks);
  const size_t t = 2;  // both 16-bit types
  return 2 * aligned(s.slot_elems * t) + 2 * aligned(s.o_elems * sizeof(float)) +
         2 * aligned(s.l_elems * sizeof(float)) + aligned(s.o_elems * t) + aligned(s.l_elems * sizeof(float));
}

void ring_attention(const RingBuffers<__half>& b, const course::AttentionParams& p, RingComm& ring, bool zigzag) {
  ring_attention_impl(b, p, ring, zigzag);
}

void ring_attention(const RingBuffers<__nv_bfloat16>& b, const course::AttentionParams& p, RingComm& ring,
                    bool zigzag) {
  ring_attention_impl(b, p, ring, zigzag);
}
