// Family "backward_fp16": the attention backward pass in 16 bits on the tensor cores, fp16 and bf16:
//   day 10 · 09, flash_attention_mma_backward: FlashAttention-2's backward on mma.sync (any sm_80+);
//   day 10 · 11, the FlashAttention-3-style backward on Hopper (wgmma, TMA, warp specialization;
//   sm_90a only, so built when the build targets sm_90 and run on compute capability 9.0): the
//   rungs of its staircase, flash_attention_wgmma_backward_step(kSerial) and (kTwoStages) (float4
//   atomics), then flash_attention_wgmma_backward itself (kDqReduce: dQ by the copy engine, in
//   whatever order the key blocks finish) and the same with deterministic = true (key blocks add
//   dQ in their order).
//
// Grid: the shapes of the forward's prefill_fp16 / prefill_bf16 families (B·N = 16k
// tokens, H·D = 2048, MHA) at N = 2048, 4096 and 8192, D = 64 and 128, causal and not; the dtype is
// part of the shape (names end in _fp16 or _bf16, CSV column `dtype`).
// FLOPs: the five matrix products of the backward (S recomputed, dP, dV, dK, dQ), 2·Nq·Nk·D each
// per (batch, query head): 2.5 × the forward's 4·B·Hq·Nq·Nk·D, halved when causal.
// Bytes: Q, K, V, O, dO read and dQ, dK, dV written in 16 bits, L read in fp32. The workspace (the
// fp32 dQ accumulator, its atomics or bulk reduce-adds, zeroing and final pass, D_i, 11's counters)
// is the kernels' overhead, not counted.
//
// The check, as the exercises' tests do it (the same for 09 and every rung of 11): inputs drawn in
// fp32 and rounded to the type, O and L from the CPU reference (common/reference_backward.h) on the
// rounded values, O rounded to the type as a 16-bit forward writes it; every gradient compared by
// compare() with the tests' bounds, |out − ref| <= a·rms(ref) + r·|ref| and rel L2 <= l (fp16:
// a = r = 1e-2, l = 2e-3; bf16: a = r = 5e-2, l = 8e-3). Two small problems with the shape's D and
// mask: B = 2, H = 2, Nq = Nk = 203, and Nq = 67 < Nk = 203 (bottom-right causal alignment). The
// deterministic rung is also run a second time on the same inputs: dQ, dK and dV must be
// bit-identical. 11 on a GPU other than compute capability 9.0: outside its contract (the row says
// why, as the test main does).
// Timing inputs: hashed uniform 16-bit values (device_fill.h; the bf16 rows read the same bits as
// bf16: finite values of assorted magnitudes), L hashed uniform in [-1, 1): the run time does not
// depend on the values.
#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "gpu_probe.h"
#include "reference_backward.h"

#ifdef BENCH_HAVE_09_fp16_mma_backward
#include "09_fp16_mma_backward.h"
#endif
#ifdef BENCH_HAVE_11_hopper_backward
#include "11_hopper_backward.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

constexpr const char* kFamily = "backward_fp16";

bool is_bf16(const Shape& s) { return s.extra.count("bf16") && s.extra.at("bf16") != 0; }

Shape backward16_shape(int b, int h, int nq, int nk, int d, bool causal, bool bf16) {
  Shape s;
  s.family = kFamily;
  s.attn = AttentionParams::make(b, h, h, nq, nk, d, causal);
  s.extra["bf16"] = bf16 ? 1 : 0;
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_n" << nq;
  if (nk != nq) o << "_nk" << nk;
  o << "_d" << d << (causal ? "_causal" : "") << (bf16 ? "_bf16" : "_fp16");
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},   {"heads_q", std::to_string(h)},   {"heads_kv", std::to_string(h)},
           {"seq_q", std::to_string(nq)},  {"seq_k", std::to_string(nk)},    {"head_dim", std::to_string(d)},
           {"causal", causal ? "1" : "0"}, {"dtype", bf16 ? "bf16" : "fp16"}};
  return s;
}

double backward16_flops(const Shape& s) {
  const auto& p = s.attn;
  const double f = 2.5 * 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double lse_elems(const AttentionParams& p) { return double(p.batch) * p.heads_q * p.seq_q; }

double backward16_bytes(const Shape& s) {
  const auto& p = s.attn;
  // Q, O, dO read and dQ written; K, V read and dK, dV written (16 bits); L read (fp32).
  return 2.0 * (4.0 * double(p.q_elems()) + 4.0 * double(p.kv_elems())) + 4.0 * lse_elems(p);
}

FamilyDef backward16_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title = "attention backward, fp16 and bf16 on tensor cores (FLOPs = 2.5 × 4·B·Hq·Nq·Nk·D, halved when causal)";
  f.order = 760;
  f.compute_bound = true;
  f.shape_syntax = "backward_fp16:b=4,h=16,n=4096,nk=4096,d=128,causal,bf16";
  f.grid = [] {
    std::vector<Shape> v;
    for (bool bf16 : {false, true})
      for (int d : {64, 128})
        for (bool causal : {false, true})
          for (int n : {2048, 4096, 8192}) v.push_back(backward16_shape(16384 / n, 2048 / d, n, n, d, causal, bf16));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int n = int(spec.take("n", 4096));
    return backward16_shape(int(spec.take("b", 1)), int(spec.take("h", 16)), n, int(spec.take("nk", n)),
                            int(spec.take("d", 128)), spec.flag("causal"), spec.flag("bf16"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "d" << s.attn.head_dim << "c" << s.attn.causal << "bf" << is_bf16(s);
    return o.str();
  };
  f.flops = backward16_flops;
  f.bytes = backward16_bytes;
  return f;
}

#if defined(BENCH_HAVE_09_fp16_mma_backward) || defined(BENCH_HAVE_11_hopper_backward)

// The 16-bit type of a shape: rounding, encoding, decoding, and the gradient bounds.
struct Type16 {
  const char* name;
  std::vector<float> (*round)(const std::vector<float>&);
  std::vector<uint16_t> (*bits)(const std::vector<float>&);
  std::vector<float> (*decode)(const std::vector<uint16_t>&);
  double atol_rms, rtol, rel_l2;
};
const Type16 kFp16{"fp16", course::round_to_half, course::to_half_bits, course::half_bits_to_float, 1e-2, 1e-2, 2e-3};
const Type16 kBf16{"bf16", course::round_to_bf16, course::to_bf16_bits, course::bf16_bits_to_float, 5e-2, 5e-2, 8e-3};

double rms(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += double(v) * v;
  return x.empty() ? 0.0 : std::sqrt(s / double(x.size()));
}

// The buffers of one backward call, as raw 16-bit bits (the type is the shape's).
struct Buffers16 {
  const uint16_t *q, *k, *v, *o, *d_o;
  const float* lse;
  uint16_t *dq, *dk, *dv;
  void* workspace;
};

// The same pointers as T, for the launchers' overloads.
template <class T>
struct Typed16 {
  explicit Typed16(const Buffers16& b)
      : q(reinterpret_cast<const T*>(b.q)),
        k(reinterpret_cast<const T*>(b.k)),
        v(reinterpret_cast<const T*>(b.v)),
        o(reinterpret_cast<const T*>(b.o)),
        d_o(reinterpret_cast<const T*>(b.d_o)),
        dq(reinterpret_cast<T*>(b.dq)),
        dk(reinterpret_cast<T*>(b.dk)),
        dv(reinterpret_cast<T*>(b.dv)) {}
  const T *q, *k, *v, *o, *d_o;
  T *dq, *dk, *dv;
};

using LaunchBackward16 = void (*)(const Buffers16& b, const AttentionParams& p, cudaStream_t st);

// What the check and the timing need of one launcher (one rung): its call in each type, the
// size of its workspace, and the one architecture it is built for (0: any).
struct Backward16 {
  LaunchBackward16 fp16, bf16;
  size_t (*workspace_bytes)(const AttentionParams& p);
  int only_sm;
  bool deterministic;  // the check also runs it twice and wants bit-identical gradients
};

void launch16(const Backward16& L, bool bf16, const Buffers16& b, const AttentionParams& p, cudaStream_t st) {
  (bf16 ? L.bf16 : L.fp16)(b, p, st);
}

// Bytes of workspace to allocate: at least one float, so that the pointer is never null.
size_t workspace_floats(const Backward16& L, const AttentionParams& p) {
  return L.workspace_bytes(p) / sizeof(float) + 1;
}

void check_backward16(const Backward16& L, const Shape& s, Check& c, cudaStream_t st) {
  const bool bf16 = is_bf16(s);
  const Type16& ty = bf16 ? kBf16 : kFp16;
  for (auto nqk : {std::array<int, 2>{203, 203}, std::array<int, 2>{67, 203}}) {
    const AttentionParams p = AttentionParams::make(2, 2, 2, nqk[0], nqk[1], s.attn.head_dim, s.attn.causal);
    const std::string tag = std::string("backward16_") + ty.name + "_";
    const auto q = ty.round(course::random_normal(p.q_elems(), seed_for(tag + "q", nqk[0])));
    const auto k = ty.round(course::random_normal(p.kv_elems(), seed_for(tag + "k", nqk[0])));
    const auto v = ty.round(course::random_normal(p.kv_elems(), seed_for(tag + "v", nqk[0])));
    const auto d_o = ty.round(course::random_normal(p.q_elems(), seed_for(tag + "do", nqk[0])));
    const course::ref::AttentionBackward ref = course::ref::attention_backward(q, k, v, d_o, p);
    course::DeviceBuffer<uint16_t> in_q(ty.bits(q)), in_k(ty.bits(k)), in_v(ty.bits(v));
    course::DeviceBuffer<uint16_t> in_o(ty.bits(ty.round(ref.o))), in_do(ty.bits(d_o));
    course::DeviceBuffer<float> in_lse(ref.lse);
    course::DeviceBuffer<uint16_t> dq(size_t(p.q_elems())), dk(size_t(p.kv_elems())), dv(size_t(p.kv_elems()));
    dq.poison();
    dk.poison();
    dv.poison();
    course::DeviceBuffer<float> ws(workspace_floats(L, p));
    ws.poison();
    inputs_ready();
    const Buffers16 bufs{in_q.data(),   in_k.data(), in_v.data(), in_o.data(), in_do.data(),
                         in_lse.data(), dq.data(),   dk.data(),   dv.data(),   ws.data()};
    launch16(L, bf16, bufs, p, st);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::ostringstream what;
    what << ty.name << " b=2 h=2 nq=" << p.seq_q << " nk=" << p.seq_k << " d=" << p.head_dim
         << (p.causal ? " causal" : "");
    const double floor = 1e-3 * rms(ref.dv);
    const course::Dims q_dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
    const course::Dims kv_dims{{"b", p.batch}, {"hkv", p.heads_kv}, {"j", p.seq_k}, {"d", p.head_dim}};
    struct Grad {
      const char* name;
      const course::DeviceBuffer<uint16_t>& out;
      const std::vector<float>& ref;
      const course::Dims& dims;
    };
    const std::array<Grad, 3> grads{Grad{"dQ", dq, ref.dq, q_dims}, Grad{"dK", dk, ref.dk, kv_dims},
                                    Grad{"dV", dv, ref.dv, kv_dims}};
    std::array<std::vector<uint16_t>, 3> first;
    for (size_t i = 0; i < grads.size(); ++i) {
      const Grad& g = grads[i];
      first[i] = g.out.download();
      const double r = rms(g.ref);
      const course::Tolerance tol{
          ty.atol_rms * std::max(r, floor), ty.rtol, r > 0.0 ? ty.rel_l2 : INFINITY,
          bf16 ? "bf16 gradient (atol relative to rms(ref))" : "fp16 gradient (atol relative to rms(ref))"};
      merge(c, course::compare(ty.decode(first[i]), g.ref, g.dims, tol, g.out.guard_damage()),
            what.str() + ", " + g.name);
    }
    if (!L.deterministic) continue;
    // Again on the same inputs, the workspace poisoned anew: every bit must repeat.
    ws.poison();
    inputs_ready();
    launch16(L, bf16, bufs, p, st);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < grads.size(); ++i) {
      const std::vector<uint16_t> again = grads[i].out.download();
      const auto diff = std::mismatch(first[i].begin(), first[i].end(), again.begin());
      if (diff.first != first[i].end() && c.status == Check::kOk) {
        std::ostringstream o;
        o << what.str() << ", " << grads[i].name << ": not deterministic: a second run differs at element "
          << (diff.first - first[i].begin()) << " (bits 0x" << std::hex << *diff.first << " then 0x" << *diff.second
          << ")";
        c.status = Check::kFail;
        c.detail = o.str();
      }
    }
  }
}

course::DeviceBuffer<uint16_t> filled16(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

// One Kernel per launcher (rung), the check and the timing shared by all.
Kernel backward16_kernel(const char* exercise, const char* launcher, int order, const Backward16& L) {
  Kernel k;
  k.exercise = exercise;
  k.launcher = launcher;
  k.family = kFamily;
  k.order = order;
  k.validate = [L](const Shape& s, Check& c, cudaStream_t st) {
    std::string why;
    if (L.only_sm != 0 && course::probe_gpu(L.only_sm, L.only_sm, &why) != course::GpuStatus::kUsable)
      throw std::invalid_argument(why);
    check_backward16(L, s, c, st);
  };
  k.device_bytes = [L](const Shape& s) { return backward16_bytes(s) + double(L.workspace_bytes(s.attn)); };
  k.time = [L](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const AttentionParams& p = s.attn;
    const bool bf16 = is_bf16(s);
    auto q = filled16(p.q_elems(), 1, st), kk = filled16(p.kv_elems(), 2, st), v = filled16(p.kv_elems(), 3, st);
    auto o = filled16(p.o_elems(), 4, st), d_o = filled16(p.q_elems(), 5, st);
    auto lse = filled(int64_t(lse_elems(p)), 6, st);
    auto dq = filled16(p.q_elems(), 7, st), dk = filled16(p.kv_elems(), 8, st), dv = filled16(p.kv_elems(), 9, st);
    course::DeviceBuffer<float> ws(workspace_floats(L, p));
    inputs_ready();
    const Buffers16 bufs{q.data(),   kk.data(), v.data(),  o.data(),  d_o.data(),
                         lse.data(), dq.data(), dk.data(), dv.data(), ws.data()};
    return timed([&] { launch16(L, bf16, bufs, p, st); }, st, cfg, fl);
  };
  return k;
}
#endif

#ifdef BENCH_HAVE_09_fp16_mma_backward
template <class T>
void mma_backward16(const Buffers16& b, const AttentionParams& p, cudaStream_t st) {
  const Typed16<T> t(b);
  flash_attention_mma_backward(t.q, t.k, t.v, t.o, t.d_o, b.lse, t.dq, t.dk, t.dv, static_cast<float*>(b.workspace), p,
                               st);
}
const Backward16 kMmaBackward{mma_backward16<__half>, mma_backward16<__nv_bfloat16>,
                              flash_attention_mma_backward_workspace_bytes, 0, false};
#endif

#ifdef BENCH_HAVE_11_hopper_backward
// One rung of 11's staircase (kDqReduce through flash_attention_wgmma_backward itself, which alone
// takes `deterministic`).
template <HopperBwdStep kStep, bool kDeterministic, class T>
void wgmma_backward16(const Buffers16& b, const AttentionParams& p, cudaStream_t st) {
  static_assert(!kDeterministic || kStep == HopperBwdStep::kDqReduce, "deterministic needs kDqReduce");
  const Typed16<T> t(b);
  if (kStep == HopperBwdStep::kDqReduce)
    flash_attention_wgmma_backward(t.q, t.k, t.v, t.o, t.d_o, b.lse, t.dq, t.dk, t.dv, b.workspace, p, st,
                                   kDeterministic);
  else
    flash_attention_wgmma_backward_step(kStep, t.q, t.k, t.v, t.o, t.d_o, b.lse, t.dq, t.dk, t.dv, b.workspace, p, st);
}
template <HopperBwdStep kStep, bool kDeterministic = false>
Backward16 wgmma_rung() {
  return Backward16{wgmma_backward16<kStep, kDeterministic, __half>,
                    wgmma_backward16<kStep, kDeterministic, __nv_bfloat16>,
                    flash_attention_wgmma_backward_workspace_bytes, 90, kDeterministic};
}
#endif

bool register_all() {
  add_family(backward16_family());
#ifdef BENCH_HAVE_09_fp16_mma_backward
  add_kernel(backward16_kernel("09_fp16_mma_backward", "flash_attention_mma_backward", 10, kMmaBackward));
#endif
#ifdef BENCH_HAVE_11_hopper_backward
  // The chapter's staircase, then the kernel itself (kDqReduce) and its deterministic mode.
  add_kernel(backward16_kernel("11_hopper_backward", "flash_attention_wgmma_backward_step(kSerial)", 20,
                               wgmma_rung<HopperBwdStep::kSerial>()));
  add_kernel(backward16_kernel("11_hopper_backward", "flash_attention_wgmma_backward_step(kTwoStages)", 21,
                               wgmma_rung<HopperBwdStep::kTwoStages>()));
  add_kernel(backward16_kernel("11_hopper_backward", "flash_attention_wgmma_backward", 22,
                               wgmma_rung<HopperBwdStep::kDqReduce>()));
  add_kernel(backward16_kernel("11_hopper_backward", "flash_attention_wgmma_backward(deterministic)", 23,
                               wgmma_rung<HopperBwdStep::kDqReduce, true>()));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
