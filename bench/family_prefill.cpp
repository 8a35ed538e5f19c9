// Family "prefill": attention over a whole sequence in fp32 (prefill_workload.h has the shapes,
// check and cost model). The kernels, in the order of the staircase the table and the plot
// show: naive (N×N scratch in HBM) -> cuBLAS baseline -> simple flash (day 06) -> tuned flash
// (day 10) -> day 06's GQA kernel. MHA grid shapes run naive, cuBLAS, both flash kernels; GQA
// grid shapes run the tuned flash kernel (it handles any group) and the GQA exercise.
#include "prefill_workload.h"

#ifdef BENCH_WITH_BASELINE
#include "cublas_attention.h"
#endif
#ifdef BENCH_HAVE_01_naive_attention
#include "01_naive_attention.h"
#endif
#ifdef BENCH_HAVE_02_flash_attention
#include "02_flash_attention.h"
#endif
#ifdef BENCH_HAVE_01_flash_tuned
#include "01_flash_tuned.h"
#endif
#ifdef BENCH_HAVE_03_gqa_attention
#include "03_gqa_attention.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

bool register_all() {
  register_prefill_family();
#ifdef BENCH_HAVE_01_naive_attention
  add_kernel(prefill_kernel(
      "01_naive_attention", "naive_attention", 10, {"mha"},
      [](const float* q, const float* k, const float* v, float* o, float* ws, const AttentionParams& p,
         cudaStream_t s) { naive_attention(q, k, v, o, ws, p, s); },
      [](const AttentionParams& p) { return naive_attention_workspace_bytes(p); }));
#endif
#ifdef BENCH_WITH_BASELINE
  Kernel base =
      prefill_kernel("baseline", "cublas_attention", 20, {"mha"}, cublas_attention, cublas_attention_workspace_bytes);
  base.baseline = true;
  add_kernel(base);
#endif
#ifdef BENCH_HAVE_02_flash_attention
  add_kernel(prefill_kernel("02_flash_attention", "flash_attention", 30, {"mha"},
                            [](const float* q, const float* k, const float* v, float* o, float*,
                               const AttentionParams& p, cudaStream_t s) { flash_attention(q, k, v, o, p, s); }));
#endif
#ifdef BENCH_HAVE_01_flash_tuned
  add_kernel(prefill_kernel("01_flash_tuned", "flash_attention_tuned", 40, {"mha", "gqa"},
                            [](const float* q, const float* k, const float* v, float* o, float*,
                               const AttentionParams& p, cudaStream_t s) { flash_attention_tuned(q, k, v, o, p, s); }));
#endif
#ifdef BENCH_HAVE_03_gqa_attention
  add_kernel(prefill_kernel("03_gqa_attention", "gqa_attention", 50, {"gqa"},
                            [](const float* q, const float* k, const float* v, float* o, float*,
                               const AttentionParams& p, cudaStream_t s) { gqa_attention(q, k, v, o, p, s); }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
