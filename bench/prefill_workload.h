// The prefill workload (fp32 Q, K, V in [B, H, N, D], output O): shapes, check, timing and
// cost model, shared by every file that registers a prefill kernel (family_prefill.cpp, and
// day-10 files adding a kernel with this signature). Lives in bench_core, so a learner binary
// that links only one family file still finds it.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"

namespace bench {

// Every prefill launcher, adapted to one signature; `workspace` is only used by kernels that
// pass a workspace_bytes function to prefill_kernel.
using PrefillLaunch = std::function<void(const float* q, const float* k, const float* v, float* o, float* workspace,
                                         const course::AttentionParams& p, cudaStream_t stream)>;
using PrefillWorkspace = std::function<size_t(const course::AttentionParams& p)>;

// Registers the family "prefill" (idempotent; prefill_kernel calls it too).
void register_prefill_family();
// Grid tags: Hkv == Hq shapes are "mha", Hkv == Hq/4 ones "gqa".
Shape prefill_shape(int b, int h, int kv, int nq, int nk, int d, bool causal);

// A prefill kernel entry: checked at two small sizes (Nq = Nk = 203, and Nq = 67 < Nk = 203 for
// the bottom-right causal alignment) with the benchmark shape's D, mask and GQA group size.
Kernel prefill_kernel(std::string exercise, std::string launcher, int order, std::vector<std::string> tags,
                      PrefillLaunch launch, PrefillWorkspace workspace_bytes = nullptr);

}  // namespace bench
