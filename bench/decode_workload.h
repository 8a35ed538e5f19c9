// The paged-decode workload (fp32, one query token per sequence, K/V in a paged cache):
// shapes, check, timing and cost model, shared by every file that registers a decode kernel
// with this signature. Lives in bench_core (see prefill_workload.h for why).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "bench.h"

namespace bench {

using DecodeLaunch = std::function<void(const float* q, const float* k_cache, const float* v_cache,
                                        const int32_t* block_table, const int32_t* context_lens, float* o,
                                        float* workspace, const course::PagedParams& p, cudaStream_t stream)>;
using DecodeWorkspace = std::function<size_t(const course::PagedParams& p)>;

// Registers the family "decode" (idempotent; decode_kernel calls it too).
void register_decode_family();
// Every sequence holds `ctx` tokens; the pool has exactly the blocks they need.
Shape decode_shape(int b, int h, int kv, int ctx, int d, int bs);

// A decode kernel entry: checked on a batch with context lengths {1, bs + 1, 300} over a cache
// from common/paged_cache.h (permuted blocks, NaN in every slot no sequence owns), with the
// benchmark shape's heads, D and block size; timed over a shuffled block table.
Kernel decode_kernel(std::string exercise, std::string launcher, int order, DecodeLaunch launch,
                     DecodeWorkspace workspace_bytes = nullptr);

}  // namespace bench
