// Family "backward_fp32": the attention backward pass in fp32 (day 06 · 05, FlashAttention-2's
// backward on the simple design of exercise 02).
//
// Grid: the prefill grid's shapes at N = 1024, 2048 and 4096 (B·N = 16k tokens, H·D = 2048),
// D = 64 and 128, causal and not, MHA (Hkv = Hq) and GQA (Hkv = Hq / 4).
// FLOPs: the five matrix products of the backward (S recomputed, dP, dV, dK, dQ), 2·Nq·Nk·D
// each per (batch, query head): 2.5 × the forward's 4·B·Hq·Nq·Nk·D, halved when causal. Work the
// kernel does on top (the masked halves of diagonal tiles) is not counted.
// Bytes: Q, K, V, O, dO and L read once, dQ, dK and dV written once. The dQ atomics and the D_i
// workspace are the kernel's overhead, not counted.
//
// The check: two small problems with the shape's D, mask and group size (B = 2, Hkv = 2,
// Nq = Nk = 203 and Nq = 67 < Nk = 203), O and L from the CPU reference (common/
// reference_backward.h), every gradient compared with it by compare() (Tolerance::fp32_sum over
// the longest sum, as the exercise's test does). Timing inputs are hashed uniform values in
// [-1, 1), L included (any finite L gives the same work).
#include <algorithm>
#include <array>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "reference_backward.h"

#ifdef BENCH_HAVE_05_flash_backward
#include "05_flash_backward.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

constexpr const char* kFamily = "backward_fp32";

Shape backward_shape(int b, int h, int kv, int nq, int nk, int d, bool causal) {
  Shape s;
  s.family = kFamily;
  s.attn = AttentionParams::make(b, h, kv, nq, nk, d, causal);
  s.tag = kv == h ? "mha" : "gqa";
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_kv" << kv << "_n" << nq;
  if (nk != nq) o << "_nk" << nk;
  o << "_d" << d << (causal ? "_causal" : "");
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},  {"heads_q", std::to_string(h)}, {"heads_kv", std::to_string(kv)},
           {"seq_q", std::to_string(nq)}, {"seq_k", std::to_string(nk)},  {"head_dim", std::to_string(d)},
           {"causal", causal ? "1" : "0"}};
  return s;
}

double backward_flops(const Shape& s) {
  const auto& p = s.attn;
  const double f = 2.5 * 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double lse_elems(const AttentionParams& p) { return double(p.batch) * p.heads_q * p.seq_q; }

double backward_bytes(const Shape& s) {
  const auto& p = s.attn;
  // Q, O, dO read and dQ written; K, V read and dK, dV written; L read.
  return sizeof(float) * (4.0 * double(p.q_elems()) + 4.0 * double(p.kv_elems()) + lse_elems(p));
}

FamilyDef backward_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title =
      "attention backward, fp32 (FLOPs = 2.5 × 4·B·Hq·Nq·Nk·D, halved when causal; bytes = Q K V O dO L read, dQ dK dV "
      "written)";
  f.order = 550;
  f.compute_bound = true;
  f.shape_syntax = "backward_fp32:b=4,h=32,kv=8,n=4096,nk=4096,d=64,causal";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {1024, 2048, 4096}) {
          const int b = 16384 / n, h = 2048 / d;
          v.push_back(backward_shape(b, h, h, n, n, d, causal));      // MHA
          v.push_back(backward_shape(b, h, h / 4, n, n, d, causal));  // GQA, group of 4
        }
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32)), n = int(spec.take("n", 1024));
    return backward_shape(int(spec.take("b", 1)), h, int(spec.take("kv", h)), n, int(spec.take("nk", n)),
                          int(spec.take("d", 64)), spec.flag("causal"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "g" << s.attn.group_size() << "d" << s.attn.head_dim << "c" << s.attn.causal;
    return o.str();
  };
  f.flops = backward_flops;
  f.bytes = backward_bytes;
  return f;
}

#if defined(BENCH_HAVE_05_flash_backward)
void check_backward(const Shape& s, Check& c, cudaStream_t st) {
  const int g = s.attn.group_size();
  for (auto nqk : {std::array<int, 2>{203, 203}, std::array<int, 2>{67, 203}}) {
    AttentionParams p = AttentionParams::make(2, 2 * g, 2, nqk[0], nqk[1], s.attn.head_dim, s.attn.causal);
    const auto q = course::random_normal(p.q_elems(), seed_for("backward_q", nqk[0]));
    const auto k = course::random_normal(p.kv_elems(), seed_for("backward_k", nqk[0]));
    const auto v = course::random_normal(p.kv_elems(), seed_for("backward_v", nqk[0]));
    const auto d_o = course::random_normal(p.q_elems(), seed_for("backward_do", nqk[0]));
    const course::ref::AttentionBackward ref = course::ref::attention_backward(q, k, v, d_o, p);
    course::DeviceBuffer<float> in_q(q), in_k(k), in_v(v), in_o(ref.o), in_do(d_o), in_lse(ref.lse);
    auto dq = output_buffer(size_t(p.q_elems())), dk = output_buffer(size_t(p.kv_elems()));
    auto dv = output_buffer(size_t(p.kv_elems()));
    auto ws = output_buffer(flash_backward_workspace_bytes(p) / sizeof(float) + 1);
    inputs_ready();
    flash_backward(in_q.data(), in_k.data(), in_v.data(), in_o.data(), in_do.data(), in_lse.data(), dq.data(),
                   dk.data(), dv.data(), ws.data(), p, st);
    const long long terms = std::max({(long long)p.head_dim, (long long)g * p.seq_q, (long long)p.seq_k});
    const course::Tolerance tol = course::Tolerance::fp32_sum(terms);
    const course::Dims q_dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
    const course::Dims kv_dims{{"b", p.batch}, {"hkv", p.heads_kv}, {"j", p.seq_k}, {"d", p.head_dim}};
    std::ostringstream what;
    what << "b=2 hq=" << p.heads_q << " hkv=2 nq=" << p.seq_q << " nk=" << p.seq_k << " d=" << p.head_dim
         << (p.causal ? " causal" : "");
    merge(c, course::check_device_output(dq, ref.dq, q_dims, tol), what.str() + ", dQ");
    merge(c, course::check_device_output(dk, ref.dk, kv_dims, tol), what.str() + ", dK");
    merge(c, course::check_device_output(dv, ref.dv, kv_dims, tol), what.str() + ", dV");
  }
}

Kernel backward_kernel() {
  Kernel k;
  k.exercise = "05_flash_backward";
  k.launcher = "flash_backward";
  k.family = kFamily;
  k.order = 10;
  k.validate = check_backward;
  k.device_bytes = [](const Shape& s) { return backward_bytes(s) + double(flash_backward_workspace_bytes(s.attn)); };
  k.time = [](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const AttentionParams& p = s.attn;
    auto q = filled(p.q_elems(), 1, st), kk = filled(p.kv_elems(), 2, st), v = filled(p.kv_elems(), 3, st);
    auto o = filled(p.o_elems(), 4, st), d_o = filled(p.q_elems(), 5, st);
    auto lse = filled(int64_t(lse_elems(p)), 6, st);
    auto dq = filled(p.q_elems(), 7, st), dk = filled(p.kv_elems(), 8, st), dv = filled(p.kv_elems(), 9, st);
    course::DeviceBuffer<float> ws(flash_backward_workspace_bytes(p) / sizeof(float) + 1);
    inputs_ready();
    return timed(
        [&] {
          flash_backward(q.data(), kk.data(), v.data(), o.data(), d_o.data(), lse.data(), dq.data(), dk.data(),
                         dv.data(), ws.data(), p, st);
        },
        st, cfg, fl);
  };
  return k;
}
#endif

bool register_all() {
  add_family(backward_family());
#if defined(BENCH_HAVE_05_flash_backward)
  add_kernel(backward_kernel());
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
