// Hopper (sm_90a) plumbing: mbarrier, named barriers, TMA, setmaxnreg and wgmma, each a thin
// wrapper over one PTX instruction (or a short fixed sequence), and the host-side tensor maps.
// Exercise 10's chapter explains each group: "wgmma: a warpgroup's matrix product", "TMA: tiles
// copied by the copy engine", "mbarrier: phases and parity", "setmaxnreg: moving registers
// between warpgroups". What to issue, in which order and on which barrier is the exercise.
// Needs the architecture-specific target sm_90a (wgmma, setmaxnreg): cmake builds the kernels
// that include this with `90a-real` only (see day10-optimizations/exercises.cmake and
// docs/architecture.md).
#pragma once
#include <cuda.h>  // CUtensorMap and its enums (types only: the driver is reached at run time)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ring_state.h"
#include "smem_address.cuh"

namespace course::arch::sm90 {

// Limits the kernels' traits check at compile time (CUDA C++ Programming Guide, compute
// capability 9.0).
constexpr int kMaxSmemPerBlock = 227 * 1024;  // dynamic shared memory a block may opt in to
constexpr int kRegsPerSm = 65536;             // 32-bit registers per SM, shared by its blocks
constexpr int kMinRegsSetmaxnreg = 24;        // setmaxnreg's range: 24 .. 256, a multiple of 8
constexpr int kMaxRegsSetmaxnreg = 256;

// ---- mbarrier: a 64-bit shared-memory object with a phase bit -------------------------------
// A phase completes when `count` arrivals have happened AND every byte announced by
// arrive.expect_tx has landed; the barrier then flips to the next phase. Waiters name the
// parity (0 or 1) of the phase they wait for.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the other threads and to the copy engine (async proxy).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` more bytes of copies that will complete on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// One plain arrival.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred P1;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n"
      "selp.b32 %0, 1, 0, P1;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Waits until the phase of parity `parity` has completed (try_wait itself suspends the thread in
// hardware for a while between polls, so this loop does not burn issue slots).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {}
}

// ---- an in-kernel watchdog ---------------------------------------------------------------
// A phase that never completes (a wrong parity, a missing arrival, fewer bytes than announced)
// hangs the block forever. One otherwise idle thread of the producer warpgroup waits on the
// block's `done` barrier, which the consumers complete when they finish: after kWatchdogNs it
// traps, the launch fails ("unspecified launch failure") and the test says what that usually
// means, instead of the GPU hanging. try_wait wakes the watchdog as soon as the phase completes,
// so a healthy block does not live a moment longer. (The trap lives here, not in mbar_wait: a
// trap inside the consumers' wgmma pipeline makes ptxas serialize every wgmma, warning C7512.)
constexpr uint64_t kWatchdogNs = 10000000000ull;  // 10 s: a block lasts milliseconds, even under a sanitizer

__device__ __forceinline__ void watchdog(uint64_t* done) {
  const uint64_t t0 = globaltimer_ns();
  while (!mbar_try_wait(done, 0)) {
    if (globaltimer_ns() - t0 > kWatchdogNs) __trap();
  }
}

// A barrier for `threads` threads (a multiple of 32) on hardware barrier `id` (1..15; 0 is
// __syncthreads): lets one warpgroup synchronise without stopping the others.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Counts this warp's threads on barrier `id` without waiting: the other side of a
// named_barrier_sync (one warpgroup arrives, the other waits until all `threads` have).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- TMA: the copy engine moves a box of a tensor into shared memory -------------------------
// One thread issues the copy; it completes on `bar` as transaction bytes (the full box, also
// where it hangs past the tensor's end: those elements are written as zeros).
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// Fetches the tensor map (a kernel parameter) into the descriptor cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- setmaxnreg: a warpgroup gives registers back to the pool or takes more ---------------
// Every thread of the warpgroup executes the same one; takes effect only when the kernel has a
// register cap at entry (__launch_bounds__(threads, 1)).
template <int kRegs>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---- wgmma: fence, commit, wait ------------------------------------------------------------
// wgmma.fence: orders this thread's earlier register writes (accumulators, A fragments) before
// the next wgmma reads them. commit_group: closes the wgmma's issued since the last commit into
// one group. wait_group<N>: returns once at most N of this thread's groups are still running.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Ties registers to this point of the program: the compiler may not move their reads or writes
// across it. Used around the asynchronous wgmma's, whose register operands the compiler would
// otherwise treat as read and written at the instant of issue.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// The wgmma shapes this exercise uses, one per (N, operand form); T = __half or __nv_bfloat16,
// fp32 accumulation always. The operand lists are mechanical: d[i] is accumulator element i of
// the thread (10_hopper_wgmma.h, wgmma_acc_row/col, says which (row, column) that is).
#define HOPPER_WGMMA_ACC32(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define HOPPER_WGMMA_ACC64(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// D (64 × 128, fp32) {+}= A (64 × 16) · B (16 × 128). A (Q) and B (K) both from shared memory, both K-major (imm-trans-a = imm-trans-b = 0).
// scale_d = 0: D = A·B (the old D is ignored, so D needs no zeroing); 1: D += A·B.
#define HOPPER_WGMMA_M64N128K16_SS(TYPE)                                                 \
  asm volatile(                                                                          \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                       \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                       \
      " {"                                                                               \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"   \
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                                                 \
      : HOPPER_WGMMA_ACC64(d)                                                            \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __half>::value)
    HOPPER_WGMMA_M64N128K16_SS("f16");
  else
    HOPPER_WGMMA_M64N128K16_SS("bf16");
}

// D (64 × 64, fp32) {+}= A (64 × 16) · B (16 × 64). A (P) from registers: four 32-bit registers per thread, the m64k16 A fragment; B (V)
// from shared memory, N-major (imm-trans-b = 1: V is stored keys × D, D contiguous).
// scale_d = 0: D = A·B (the old D is ignored, so D needs no zeroing); 1: D += A·B.
#define HOPPER_WGMMA_M64N64K16_RS(TYPE)                                                \
  asm volatile(                                                                        \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                      \
      " {"                                                                             \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                 \
      : HOPPER_WGMMA_ACC32(d)                                                          \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                   int scale_d) {
  if constexpr (std::is_same<T, __half>::value)
    HOPPER_WGMMA_M64N64K16_RS("f16");
  else
    HOPPER_WGMMA_M64N64K16_RS("bf16");
}

// D (64 × 128, fp32) {+}= A (64 × 16) · B (16 × 128). A (P) from registers: four 32-bit registers per thread, the m64k16 A fragment; B (V)
// from shared memory, N-major (imm-trans-b = 1: V is stored keys × D, D contiguous).
// scale_d = 0: D = A·B (the old D is ignored, so D needs no zeroing); 1: D += A·B.
#define HOPPER_WGMMA_M64N128K16_RS(TYPE)                                                 \
  asm volatile(                                                                          \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                       \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                       \
      " {"                                                                               \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"   \
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                   \
      : HOPPER_WGMMA_ACC64(d)                                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
template <class T>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                    int scale_d) {
  if constexpr (std::is_same<T, __half>::value)
    HOPPER_WGMMA_M64N128K16_RS("f16");
  else
    HOPPER_WGMMA_M64N128K16_RS("bf16");
}

// D (64 × 64, fp32) {+}= A (64 × 16) · B (16 × 64), both from shared memory. TRANS = "0, 0": both
// K-major (exercise 11's Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ at Br = 64); "1, 1": both MN-major,
// A's rows and B's columns contiguous (exercise 11's dQ = dS·K_j, dS stored as dSᵀ, K_j as loaded).
// scale_d = 0: D = A·B (the old D is ignored, so D needs no zeroing); 1: D += A·B.
#define HOPPER_WGMMA_M64N64K16_SS(TYPE, TRANS)                                         \
  asm volatile(                                                                        \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                      \
      " {"                                                                             \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
      "}, %32, %33, p, 1, 1, " TRANS ";\n}\n"                                          \
      : HOPPER_WGMMA_ACC32(d)                                                          \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  if constexpr (std::is_same<T, __half>::value)
    HOPPER_WGMMA_M64N64K16_SS("f16", "0, 0");
  else
    HOPPER_WGMMA_M64N64K16_SS("bf16", "0, 0");
}
template <class T>
__device__ __forceinline__ void wgmma_m64n64k16_ss_mn_major(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                            int scale_d) {
  if constexpr (std::is_same<T, __half>::value)
    HOPPER_WGMMA_M64N64K16_SS("f16", "1, 1");
  else
    HOPPER_WGMMA_M64N64K16_SS("bf16", "1, 1");
}

// ---- bulk copies without a tensor map, and the proxy fence -----------------------------------
// `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned) from global memory
// into shared memory, completing on `bar` as transaction bytes.
__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(smem_dst)),
               "l"(reinterpret_cast<uint64_t>(gmem_src)), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// gmem[0 .. bytes/4) += smem[0 .. bytes/4), fp32, element by element, done by the copy engine (each
// element's add is atomic). Completes as a bulk group: commit, then wait.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem_dst, const float* smem_src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<uint64_t>(gmem_dst)),
               "r"(smem_u32(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The source shared memory of every committed bulk group has been read (it may be overwritten).
__device__ __forceinline__ void bulk_wait_read_all() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Every committed bulk group has finished writing global memory.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Orders this thread's ordinary shared-memory writes before later reads by the async proxy
// (wgmma's descriptors, TMA and bulk copies): without it a wgmma may read the old bytes.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- host: tensor maps ---------------------------------------------------------------------
// cuTensorMapEncodeTiled is a driver function; the runtime hands out its address, so the
// course needs no link against libcuda.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error("sm90: the driver has no cuTensorMapEncodeTiled (needs a CUDA 12 driver)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A map of a [planes, rows, cols] tensor of 16-bit values (row-major, cols contiguous) for
// boxes of box_rows × 64 values of one plane, written to shared memory with the 128-byte
// swizzle: 64 values = one 128-byte row of the swizzle pattern. Rows past `rows` read as zeros.
template <class T>
CUtensorMap make_tensor_map_sw128(const T* base, uint64_t planes, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  CUtensorMap map;
  const cuuint64_t dims[3] = {cols, rows, planes};
  const cuuint64_t strides[2] = {cols * sizeof(T), rows * cols * sizeof(T)};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, box_rows, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUtensorMapDataType type =
      std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = tensor_map_encoder()(&map, type, 3, const_cast<T*>(base), dims, strides, box, elem_strides,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("sm90: cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

}  // namespace course::arch::sm90
