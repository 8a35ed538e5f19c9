// Family "block_sparse" (day 10 · 03): BigBird layouts (band of 3 blocks, 1 global block,
// `per_row` random blocks; 64 × 64 blocks, common/block_sparse_layouts.h) at three densities,
// next to the tuned DENSE kernel (01, no mask) on the same Q, K, V.
//
// FLOPs count only the work the layout asks for: 4·D per query–key pair inside a listed block.
// Both rows use that count, so their TFLOP/s columns are "needed work per second" and their
// ratio is the speed-up over dense; the block-sparse row's TFLOP/s is also its throughput per
// visited tile, comparable with dense flash's (close to it: the layout walk costs nothing per
// tile). Grid: N = 8192, D = 64 and 128, B·N = 16k tokens, H·D = 2048, per_row = 2, 8, 20
// (densities ≈ 5 %, 10 %, 20 %).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "block_sparse_layouts.h"
#include "reference.h"

#ifdef BENCH_HAVE_03_block_sparse
#include "03_block_sparse.h"
#endif
// `#if defined`: 01 is only the reference point here; it belongs to the "prefill" family.
#if defined(BENCH_HAVE_01_flash_tuned)
#include "01_flash_tuned.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;
using course::ref::BlockSparseLayout;

constexpr const char* kFamily = "block_sparse";
constexpr uint64_t kLayoutSeed = 20261123;

BlockSparseLayout layout_of(const AttentionParams& p, int per_row) {
  return course::sparse::bigbird(p.seq_q, p.seq_k, 1, 1, per_row, kLayoutSeed);
}

Shape sparse_shape(int b, int h, int n, int d, int per_row) {
  Shape s;
  s.family = kFamily;
  s.attn = AttentionParams::make(b, h, h, n, n, d, false);
  s.extra["per_row"] = per_row;
  s.tag = "mha";
  const double density = course::sparse::density(layout_of(s.attn, per_row), n, n);
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_n" << n << "_d" << d << "_bigbird" << per_row;
  s.name = o.str();
  std::ostringstream dens;
  dens << density;
  s.csv = {{"batch", std::to_string(b)}, {"heads_q", std::to_string(h)},  {"seq_q", std::to_string(n)},
           {"seq_k", std::to_string(n)}, {"head_dim", std::to_string(d)}, {"random_per_row", std::to_string(per_row)},
           {"density", dens.str()}};
  return s;
}

// Query–key pairs inside the listed blocks (partial last blocks counted by their real size).
double listed_pairs(const AttentionParams& p, const BlockSparseLayout& l) {
  double pairs = 0;
  for (size_t r = 0; r + 1 < l.row_ptr.size(); ++r) {
    const int rows = std::min(int(r + 1) * l.block_m, p.seq_q) - int(r) * l.block_m;
    for (int e = l.row_ptr[r]; e < l.row_ptr[r + 1]; ++e) {
      const int c = l.col_idx[size_t(e)];
      pairs += double(rows) * (std::min((c + 1) * l.block_n, p.seq_k) - c * l.block_n);
    }
  }
  return pairs;
}

double sparse_flops(const Shape& s) {
  const auto& p = s.attn;
  return 4.0 * p.head_dim * double(p.batch) * p.heads_q * listed_pairs(p, layout_of(p, int(s.extra.at("per_row"))));
}

double sparse_bytes(const Shape& s) { return 4.0 * double(2 * s.attn.q_elems() + 2 * s.attn.kv_elems()); }

FamilyDef sparse_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title =
      "block-sparse (BigBird) vs the tuned dense kernel (FLOPs = 4·D per query-key pair in a LISTED block, both rows)";
  f.order = 730;
  f.compute_bound = true;
  f.shape_syntax = "block_sparse:b=2,h=16,n=8192,d=128,per_row=8";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (int per_row : {2, 8, 20}) v.push_back(sparse_shape(2, 2048 / d, 8192, d, per_row));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    return sparse_shape(int(spec.take("b", 2)), int(spec.take("h", 16)), int(spec.take("n", 8192)),
                        int(spec.take("d", 128)), int(spec.take("per_row", 8)));
  };
  f.validation_key = [](const Shape& s) { return "d" + std::to_string(s.attn.head_dim); };
  f.flops = sparse_flops;
  f.bytes = sparse_bytes;
  return f;
}

// The check: Nq = Nk = 203 (a partial last block) with a small BigBird layout; `dense` checks
// the dense kernel against plain attention instead.
template <class Launch>
void check_sparse(Launch launch, bool dense, const Shape& s, Check& c, cudaStream_t st) {
  const AttentionParams p = AttentionParams::make(2, 2, 2, 203, 203, s.attn.head_dim, false);
  const BlockSparseLayout l = course::sparse::bigbird(203, 203, 0, 1, 1, 5);
  const auto q = course::random_normal(p.q_elems(), seed_for("sparse_q", 0));
  const auto k = course::random_normal(p.kv_elems(), seed_for("sparse_k", 0));
  const auto v = course::random_normal(p.kv_elems(), seed_for("sparse_v", 0));
  course::DeviceBuffer<float> dq(q), dk(k), dv(v);
  course::DeviceBuffer<int32_t> rp(l.row_ptr), ci(l.col_idx);
  auto out = output_buffer(size_t(p.o_elems()));
  inputs_ready();
  launch(dq.data(), dk.data(), dv.data(), out.data(), p, l, rp.data(), ci.data(), st);
  merge(
      c,
      course::check_device_output(
          out, dense ? course::ref::attention(q, k, v, p) : course::ref::block_sparse_attention(q, k, v, p, l),
          course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}}, course::Tolerance::fp32()),
      dense ? "dense 203 x 203" : "BigBird 203 x 203");
}

// Every kernel of this family, adapted to the block-sparse signature (the dense one ignores the
// layout).
using SparseFn = void (*)(const float*, const float*, const float*, float*, const AttentionParams&,
                          const BlockSparseLayout&, const int32_t*, const int32_t*, cudaStream_t);

Kernel sparse_kernel(std::string exercise, std::string launcher, int order, SparseFn fn, bool dense) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = kFamily;
  k.order = order;
  k.validate = [fn, dense](const Shape& s, Check& c, cudaStream_t st) { check_sparse(fn, dense, s, c, st); };
  k.device_bytes = sparse_bytes;
  k.time = [fn](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.attn;
    const BlockSparseLayout l = layout_of(p, int(s.extra.at("per_row")));
    auto q = filled(p.q_elems(), 1, st), kk = filled(p.kv_elems(), 2, st);
    auto v = filled(p.kv_elems(), 3, st), o = filled(p.o_elems(), 4, st);
    course::DeviceBuffer<int32_t> rp(l.row_ptr), ci(l.col_idx);
    inputs_ready();
    return timed([&] { fn(q.data(), kk.data(), v.data(), o.data(), p, l, rp.data(), ci.data(), st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(sparse_family());
#if defined(BENCH_HAVE_01_flash_tuned)
  add_kernel(sparse_kernel(
      "01_flash_tuned", "flash_attention_tuned", 10,
      [](const float* q, const float* k, const float* v, float* o, const AttentionParams& p, const BlockSparseLayout&,
         const int32_t*, const int32_t*, cudaStream_t s) { flash_attention_tuned(q, k, v, o, p, s); },
      true));
#endif
#if defined(BENCH_HAVE_03_block_sparse)
  add_kernel(sparse_kernel(
      "03_block_sparse", "block_sparse_attention", 20,
      [](const float* q, const float* k, const float* v, float* o, const AttentionParams& p, const BlockSparseLayout& l,
         const int32_t* rp, const int32_t* ci, cudaStream_t s) { block_sparse_attention(q, k, v, o, p, l, rp, ci, s); },
      false));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
