// Registry, day 06: the attention launchers this binary was linked with (see kernels_day01.cpp
// for how BENCH_HAVE_<id> is set). The order is the "staircase" the table and plots show:
// naive (N×N scratch in HBM) -> flash (tiled, online softmax) -> GQA -> paged decode.
#include <vector>

#include "bench.h"

#include "launchers.h"

namespace bench {

std::vector<Kernel> day06_kernels() {
  std::vector<Kernel> ks;
  Kernel k;
#ifdef BENCH_HAVE_01_naive_attention
  k = Kernel{};
  k.name = "naive_attention";
  k.exercise = "01_naive_attention";
  k.family = Family::kPrefill;
  k.prefill = [](const float* q, const float* kk, const float* v, float* o, float* ws,
                 const course::AttentionParams& p, cudaStream_t s) {
    naive_attention(q, kk, v, o, ws, p, s);
  };
  k.workspace_bytes = [](const course::AttentionParams& p) {
    return naive_attention_workspace_bytes(p);
  };
  k.quadratic_memory = true;
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_02_flash_attention
  k = Kernel{};
  k.name = "flash_attention";
  k.exercise = "02_flash_attention";
  k.family = Family::kPrefill;
  k.prefill = [](const float* q, const float* kk, const float* v, float* o, float*,
                 const course::AttentionParams& p, cudaStream_t s) {
    flash_attention(q, kk, v, o, p, s);
  };
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_03_gqa_attention
  k = Kernel{};
  k.name = "gqa_attention";
  k.exercise = "03_gqa_attention";
  k.family = Family::kPrefill;
  k.prefill = [](const float* q, const float* kk, const float* v, float* o, float*,
                 const course::AttentionParams& p, cudaStream_t s) {
    gqa_attention(q, kk, v, o, p, s);
  };
  k.prefill_gqa_grid = true;
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_04_paged_attention
  k = Kernel{};
  k.name = "paged_attention";
  k.exercise = "04_paged_attention";
  k.family = Family::kDecode;
  k.paged = [](const float* q, const float* kc, const float* vc, const int32_t* bt,
               const int32_t* cl, float* o, const course::PagedParams& p, cudaStream_t s) {
    paged_attention(q, kc, vc, bt, cl, o, p, s);
  };
  ks.push_back(k);
#endif
  (void)k;
  return ks;
}

}  // namespace bench
