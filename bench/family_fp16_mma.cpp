// Family "prefill_bf16", and in "prefill_fp16" and "prefill_bf16" day 10 · 05
// (flash_attention_mma, the mma.sync FlashAttention-2 kernel) and day 10 · 10 (the Hopper kernel:
// the four rungs of its staircase, the last one flash_attention_wgmma; sm_90 only) on the shapes
// of the 16-bit prefill grid (B·N = 16k tokens, H·D = 2048, N = 2048 … 16384, D = 64 and 128,
// causal and not, MHA).
//
// Cost model as in "prefill": 4·B·Hq·Nq·Nk·D FLOPs, halved when causal; bytes are those of the
// 16-bit tensors (Q, K, V read once, O written once).
//
// The check: inputs drawn in fp32, rounded to the 16-bit type, the reference run on the rounded
// values (as the exercise's test does), Tolerance::fp16()/bf16() at two small sizes with the
// shape's D and mask (Nq = Nk = 203; Nq = 67 < Nk = 203 for the causal alignment).
// Timing inputs: hashed uniform fp16 bits (device_fill.h); the bf16 rows read the same bits as
// bf16 (finite values of assorted magnitudes: the run time does not depend on them).
// bench-needs: family_fp16_wmma.cpp  (it defines "prefill_fp16", which 05 and 10 add kernels to)
#include <array>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "gpu_probe.h"
#include "prefill_workload.h"
#include "reference.h"

#ifdef BENCH_HAVE_05_fp16_mma
#include "05_fp16_mma.h"
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
#include "10_hopper_wgmma.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

constexpr const char* kFp16Family = "prefill_fp16";  // defined by family_fp16_wmma.cpp
constexpr const char* kBf16Family = "prefill_bf16";

// A 16-bit prefill launcher, tensors passed as raw bits.
using Launch16 = void (*)(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                          const AttentionParams& p, cudaStream_t stream);

struct Type16 {
  const char* name;
  std::vector<float> (*round)(const std::vector<float>&);
  std::vector<uint16_t> (*bits)(const std::vector<float>&);
  std::vector<float> (*decode)(const std::vector<uint16_t>&);
  course::Tolerance tolerance;
};
const Type16 kFp16{"fp16", course::round_to_half, course::to_half_bits, course::half_bits_to_float,
                   course::Tolerance::fp16()};
const Type16 kBf16{"bf16", course::round_to_bf16, course::to_bf16_bits, course::bf16_bits_to_float,
                   course::Tolerance::bf16()};

double flops16(const Shape& s) {
  const auto& p = s.attn;
  const double f = 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double bytes16(const Shape& s) {
  const auto& p = s.attn;
  return 2.0 * double(2 * p.q_elems() + 2 * p.kv_elems());
}

Shape bf16_shape(int b, int h, int nq, int nk, int d, bool causal) {
  Shape s = prefill_shape(b, h, h, nq, nk, d, causal);
  s.family = kBf16Family;
  return s;
}

FamilyDef bf16_family() {
  FamilyDef f;
  f.name = kBf16Family;
  f.title = "prefill attention, bf16 on tensor cores (FLOPs = 4·B·Hq·Nq·Nk·D, halved when causal)";
  f.order = 750;
  f.compute_bound = true;
  f.shape_syntax = "prefill_bf16:b=1,h=16,n=4096,nk=4096,d=128,causal";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {2048, 4096, 8192, 16384}) v.push_back(bf16_shape(16384 / n, 2048 / d, n, n, d, causal));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int n = int(spec.take("n", 4096));
    return bf16_shape(int(spec.take("b", 1)), int(spec.take("h", 16)), n, int(spec.take("nk", n)),
                      int(spec.take("d", 128)), spec.flag("causal"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "d" << s.attn.head_dim << "c" << s.attn.causal;
    return o.str();
  };
  f.flops = flops16;
  f.bytes = bytes16;
  return f;
}

void check16(const Type16& ty, Launch16 launch, const Shape& s, Check& c, cudaStream_t st) {
  for (auto nqk : {std::array<int, 2>{203, 203}, std::array<int, 2>{67, 203}}) {
    AttentionParams p = s.attn;
    p.batch = 2;
    p.heads_q = p.heads_kv = 2;
    p.seq_q = nqk[0];
    p.seq_k = nqk[1];
    const std::string tag = std::string(ty.name) + "_mma_";
    const auto q = ty.round(course::random_normal(p.q_elems(), seed_for(tag + "q", nqk[0])));
    const auto k = ty.round(course::random_normal(p.kv_elems(), seed_for(tag + "k", nqk[0])));
    const auto v = ty.round(course::random_normal(p.kv_elems(), seed_for(tag + "v", nqk[0])));
    course::DeviceBuffer<uint16_t> dq(ty.bits(q)), dk(ty.bits(k)), dv(ty.bits(v));
    course::DeviceBuffer<uint16_t> dout(size_t(p.o_elems()));
    dout.poison();
    inputs_ready();
    launch(dq.data(), dk.data(), dv.data(), dout.data(), p, st);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::ostringstream what;
    what << ty.name << " b=2 h=2 nq=" << p.seq_q << " nk=" << p.seq_k << " d=" << p.head_dim
         << (p.causal ? " causal" : "");
    merge(c,
          course::compare(ty.decode(dout.download()), course::ref::attention(q, k, v, p),
                          course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}},
                          ty.tolerance, dout.guard_damage()),
          what.str());
  }
}

course::DeviceBuffer<uint16_t> filled16(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

// only_sm: the one architecture the kernel is built for (10_hopper_wgmma: 90, sm_90a), 0 for any;
// on another GPU the shape is reported as outside the kernel's contract, with the test main's
// own reason (common/gpu_probe.h).
Kernel kernel16(const Type16& ty, const char* family, int order, Launch16 launch, const char* exercise = "05_fp16_mma",
                const char* launcher = "flash_attention_mma", int only_sm = 0) {
  Kernel k;
  k.exercise = exercise;
  k.launcher = launcher;
  k.family = family;
  k.order = order;
  k.validate = [&ty, launch, only_sm](const Shape& s, Check& c, cudaStream_t st) {
    std::string why;
    if (only_sm != 0 && course::probe_gpu(only_sm, only_sm, &why) != course::GpuStatus::kUsable)
      throw std::invalid_argument(why);
    check16(ty, launch, s, c, st);
  };
  k.device_bytes = bytes16;
  k.time = [launch](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.attn;
    auto q = filled16(p.q_elems(), 1, st), kk = filled16(p.kv_elems(), 2, st);
    auto v = filled16(p.kv_elems(), 3, st), o = filled16(p.o_elems(), 4, st);
    return timed([&] { launch(q.data(), kk.data(), v.data(), o.data(), p, st); }, st, cfg, fl);
  };
  return k;
}

#ifdef BENCH_HAVE_10_hopper_wgmma
// One rung of 10's staircase as a Launch16 (kPingPong through flash_attention_wgmma itself).
template <WgmmaStep kStep, class T>
void wgmma16(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, const AttentionParams& p,
             cudaStream_t s) {
  const T* tq = reinterpret_cast<const T*>(q);
  const T* tk = reinterpret_cast<const T*>(k);
  const T* tv = reinterpret_cast<const T*>(v);
  if (kStep == WgmmaStep::kPingPong)
    flash_attention_wgmma(tq, tk, tv, reinterpret_cast<T*>(o), p, s);
  else
    flash_attention_wgmma_step(kStep, tq, tk, tv, reinterpret_cast<T*>(o), p, s);
}
#endif

bool register_all() {
  add_family(bf16_family());
#ifdef BENCH_HAVE_05_fp16_mma
  add_kernel(kernel16(kFp16, kFp16Family, 30,
                      [](const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, const AttentionParams& p,
                         cudaStream_t s) {
                        flash_attention_mma(reinterpret_cast<const __half*>(q), reinterpret_cast<const __half*>(k),
                                            reinterpret_cast<const __half*>(v), reinterpret_cast<__half*>(o), p, s);
                      }));
  add_kernel(kernel16(kBf16, kBf16Family, 30,
                      [](const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, const AttentionParams& p,
                         cudaStream_t s) {
                        flash_attention_mma(
                            reinterpret_cast<const __nv_bfloat16*>(q), reinterpret_cast<const __nv_bfloat16*>(k),
                            reinterpret_cast<const __nv_bfloat16*>(v), reinterpret_cast<__nv_bfloat16*>(o), p, s);
                      }));
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
  // The chapter's staircase, then the kernel itself (kPingPong), each in both types.
  add_kernel(kernel16(kFp16, kFp16Family, 40, wgmma16<WgmmaStep::kSerial, __half>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kSerial)", 90));
  add_kernel(kernel16(kFp16, kFp16Family, 41, wgmma16<WgmmaStep::kTwoStages, __half>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kTwoStages)", 90));
  add_kernel(kernel16(kFp16, kFp16Family, 42, wgmma16<WgmmaStep::kOverlapped, __half>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kOverlapped)", 90));
  add_kernel(kernel16(kFp16, kFp16Family, 43, wgmma16<WgmmaStep::kPingPong, __half>, "10_hopper_wgmma",
                      "flash_attention_wgmma", 90));
  add_kernel(kernel16(kBf16, kBf16Family, 40, wgmma16<WgmmaStep::kSerial, __nv_bfloat16>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kSerial)", 90));
  add_kernel(kernel16(kBf16, kBf16Family, 41, wgmma16<WgmmaStep::kTwoStages, __nv_bfloat16>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kTwoStages)", 90));
  add_kernel(kernel16(kBf16, kBf16Family, 42, wgmma16<WgmmaStep::kOverlapped, __nv_bfloat16>, "10_hopper_wgmma",
                      "flash_attention_wgmma_step(kOverlapped)", 90));
  add_kernel(kernel16(kBf16, kBf16Family, 43, wgmma16<WgmmaStep::kPingPong, __nv_bfloat16>, "10_hopper_wgmma",
                      "flash_attention_wgmma", 90));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
