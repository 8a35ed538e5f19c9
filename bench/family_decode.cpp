// Family "decode": one new token per sequence attending to a paged KV cache, fp32
// (decode_workload.h has the shapes, check and cost model).
#include "decode_workload.h"

#ifdef BENCH_HAVE_04_paged_attention
#include "04_paged_attention.h"
#endif

namespace bench {
namespace {

bool register_all() {
  register_decode_family();
#ifdef BENCH_HAVE_04_paged_attention
  add_kernel(decode_kernel(
      "04_paged_attention", "paged_attention", 10,
      [](const float* q, const float* kc, const float* vc, const int32_t* bt, const int32_t* cl, float* o, float*,
         const course::PagedParams& p, cudaStream_t s) { paged_attention(q, kc, vc, bt, cl, o, p, s); }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
