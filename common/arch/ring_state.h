// Where a pipeline of kStages shared-memory stages stands, each stage guarded by a "full" and an
// "empty" mbarrier (common/arch/sm90.cuh). Host and device: the [index] cases of exercise 10's
// test check it on the CPU.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace course::arch::sm90 {

// Tile j of a pipeline of kStages stages sits in stage j mod kStages, on that stage's use number
// j / kStages; the barrier phase of that use has parity (j / kStages) & 1. A consumer waits for
// the "full" phase of that parity; the producer, before it reuses a stage, waits for the "empty"
// phase of the previous use: parity flipped, which on a fresh barrier (use 0) is the phase
// "before" the first and counts as complete.
template <int kStages>
struct RingState {
  int stage = 0;       // 0 .. kStages - 1
  uint32_t phase = 0;  // the parity of the current use of `stage`

  // Where tile j stands, computed from j (a modulo and a shift of a loop counter the kernel keeps
  // anyway) rather than carried from iteration to iteration. A loop body that needs two tiles
  // (K_j and V_{j-1}) takes the two scalars: ptxas then schedules it exactly as the formulas
  // written in place, where two RingState values moved a few instructions.
  static __host__ __device__ __forceinline__ int stage_of(int j) { return j % kStages; }
  static __host__ __device__ __forceinline__ uint32_t phase_of(int j) { return (j / kStages) & 1; }
  static __host__ __device__ __forceinline__ RingState at(int j) { return {stage_of(j), phase_of(j)}; }
  __host__ __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  __host__ __device__ __forceinline__ uint32_t full_parity() const { return phase; }
  __host__ __device__ __forceinline__ uint32_t empty_parity() const { return phase ^ 1; }
};

}  // namespace course::arch::sm90
