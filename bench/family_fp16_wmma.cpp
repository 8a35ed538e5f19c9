// Family "prefill_fp16": prefill attention with fp16 Q, K, V, O on tensor cores (day 10 · 04),
// next to the tuned fp32 kernel (day 10 · 01) on the same shapes, so the table shows the step
// from FFMA to tensor cores directly.
//
// Grid: B·N = 16k tokens, H·D = 2048, N = 2048 … 16384, D = 64 and 128, causal and not (MHA).
// Cost model as in "prefill": 4·B·Hq·Nq·Nk·D FLOPs, halved when causal; bytes are those of the
// fp16 tensors (Q, K, V read once, O written once). The fp32 kernel's row counts the same FLOPs,
// so the TFLOP/s columns compare directly (its check and timing are the prefill family's).
//
// The fp16 check: inputs drawn in fp32, rounded to fp16, the reference run on the rounded values
// (as the exercise's test does), compared with Tolerance::fp16() at two small sizes with the
// benchmark shape's D and mask (Nq = Nk = 203; Nq = 67 < Nk = 203 for the causal alignment).
#include <array>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "prefill_workload.h"
#include "reference.h"

#ifdef BENCH_HAVE_04_fp16_wmma
#include "04_fp16_wmma.h"
#endif
// `#if defined`, not `#ifdef`: bench/CMakeLists.txt reads `#ifdef BENCH_HAVE_<id>` lines to know
// which family files register an exercise, and 01_flash_tuned belongs to "prefill"; here it is
// only the reference point, so `make compare EX=01_flash_tuned` stays within its own family.
#if defined(BENCH_HAVE_01_flash_tuned)
#include "01_flash_tuned.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

constexpr const char* kFamily = "prefill_fp16";

// The launcher of a 16-bit prefill kernel, fp16 passed as raw bits (uint16_t) like the tests do.
using HalfLaunch = void (*)(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                            const AttentionParams& p, cudaStream_t stream);

Shape fp16_shape(int b, int h, int nq, int nk, int d, bool causal) {
  Shape s = prefill_shape(b, h, h, nq, nk, d, causal);  // same names and CSV columns as prefill
  s.family = kFamily;
  return s;
}

double fp16_flops(const Shape& s) {
  const auto& p = s.attn;
  const double f = 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double fp16_bytes(const Shape& s) {
  const auto& p = s.attn;
  return 2.0 * double(2 * p.q_elems() + 2 * p.kv_elems());  // fp16 Q, K, V read; O written
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title =
      "prefill attention, fp16 on tensor cores vs the tuned fp32 kernel (FLOPs = 4·B·Hq·Nq·Nk·D, halved when causal)";
  f.order = 740;
  f.compute_bound = true;
  f.shape_syntax = "prefill_fp16:b=1,h=16,n=4096,nk=4096,d=128,causal";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {2048, 4096, 8192, 16384}) v.push_back(fp16_shape(16384 / n, 2048 / d, n, n, d, causal));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int n = int(spec.take("n", 4096));
    return fp16_shape(int(spec.take("b", 1)), int(spec.take("h", 16)), n, int(spec.take("nk", n)),
                      int(spec.take("d", 128)), spec.flag("causal"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "g" << s.attn.group_size() << "d" << s.attn.head_dim << "c" << s.attn.causal;
    return o.str();
  };
  f.flops = fp16_flops;
  f.bytes = fp16_bytes;
  return f;
}

void check_fp16(HalfLaunch launch, const Shape& s, Check& c, cudaStream_t st) {
  for (auto nqk : {std::array<int, 2>{203, 203}, std::array<int, 2>{67, 203}}) {
    AttentionParams p = s.attn;
    p.batch = 2;
    p.heads_q = p.heads_kv = 2;
    p.seq_q = nqk[0];
    p.seq_k = nqk[1];
    const auto q = course::round_to_half(course::random_normal(p.q_elems(), seed_for("fp16_q", nqk[0])));
    const auto k = course::round_to_half(course::random_normal(p.kv_elems(), seed_for("fp16_k", nqk[0])));
    const auto v = course::round_to_half(course::random_normal(p.kv_elems(), seed_for("fp16_v", nqk[0])));
    course::DeviceBuffer<uint16_t> dq(course::to_half_bits(q)), dk(course::to_half_bits(k)),
        dv(course::to_half_bits(v));
    course::DeviceBuffer<uint16_t> dout(size_t(p.o_elems()));
    dout.poison();
    inputs_ready();
    launch(dq.data(), dk.data(), dv.data(), dout.data(), p, st);
    std::ostringstream what;
    what << "fp16 b=2 h=2 nq=" << p.seq_q << " nk=" << p.seq_k << " d=" << p.head_dim << (p.causal ? " causal" : "");
    merge(c,
          course::check_device_output(dout, course::ref::attention(q, k, v, p),
                                      course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}},
                                      course::Tolerance::fp16()),
          what.str());
  }
}

course::DeviceBuffer<uint16_t> filled_half(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

Kernel fp16_kernel(std::string exercise, std::string launcher, int order, HalfLaunch launch) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = kFamily;
  k.order = order;
  k.validate = [launch](const Shape& s, Check& c, cudaStream_t st) { check_fp16(launch, s, c, st); };
  k.device_bytes = fp16_bytes;
  k.time = [launch](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.attn;
    auto q = filled_half(p.q_elems(), 1, st), kk = filled_half(p.kv_elems(), 2, st);
    auto v = filled_half(p.kv_elems(), 3, st), o = filled_half(p.o_elems(), 4, st);
    return timed([&] { launch(q.data(), kk.data(), v.data(), o.data(), p, st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(make_family());
#if defined(BENCH_HAVE_01_flash_tuned)
  // The fp32 reference point: the prefill family's entry for the same launcher, run on this
  // family's shapes (its check and timing read only Shape::attn).
  Kernel fp32 =
      prefill_kernel("01_flash_tuned", "flash_attention_tuned", 10, {},
                     [](const float* q, const float* k, const float* v, float* o, float*, const AttentionParams& p,
                        cudaStream_t s) { flash_attention_tuned(q, k, v, o, p, s); });
  fp32.family = kFamily;
  add_kernel(fp32);
#endif
#ifdef BENCH_HAVE_04_fp16_wmma
  add_kernel(fp16_kernel("04_fp16_wmma", "flash_attention_wmma", 20,
                         [](const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                            const AttentionParams& p, cudaStream_t s) {
                           flash_attention_wmma(reinterpret_cast<const __half*>(q), reinterpret_cast<const __half*>(k),
                                                reinterpret_cast<const __half*>(v), reinterpret_cast<__half*>(o), p, s);
                         }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
