// Families of day 10 · 02:
//
// "sliding_window": causal prefill with a window w (key j visible to query i iff
//   i + off − w <= j <= i + off), next to the tuned dense CAUSAL kernel (01) on the same Q, K, V.
//   FLOPs count only the work actually needed: 4·D per visible query–key pair (Σ over rows of
//   min(i + off, w) + 1 keys). Both rows use that count, so their TFLOP/s columns are "needed
//   work per second" and their ratio is the speed-up; the 01 row does the full causal work.
//   Grid: N = 8192 and 16384, w = 4096, D = 64 and 128, B·N = 16k tokens, H·D = 2048.
//
// "ring_decode": one new token per sequence against a ring KV cache of w + 1 slots (all
//   sequences past the wrap, so every slot is read). Bandwidth-bound: bytes = K and V of the
//   window once per KV head, plus q and o. Grid: B = 64, Hq/Hkv = 32/8, w = 4096, D = 128 (and
//   D = 64).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "reference.h"

#ifdef BENCH_HAVE_02_sliding_window
#include "02_sliding_window.h"
#endif
// `#if defined`: 01 is only the reference point here; it belongs to the "prefill" family.
#if defined(BENCH_HAVE_01_flash_tuned)
#include "01_flash_tuned.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;
using course::RingCacheParams;

constexpr const char* kWindow = "sliding_window";
constexpr const char* kRing = "ring_decode";

using PrefillFn = void (*)(const float*, const float*, const float*, float*, const AttentionParams&, cudaStream_t);

// ---------------------------------------------------------------------------------------------
// sliding_window

Shape window_shape(int b, int h, int kv, int nq, int nk, int d, int w) {
  Shape s;
  s.family = kWindow;
  auto& p = s.attn;
  p = AttentionParams::make(b, h, kv, nq, nk, d, true, w);
  s.tag = kv == h ? "mha" : "gqa";
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_kv" << kv << "_n" << nq;
  if (nk != nq) o << "_nk" << nk;
  o << "_d" << d << "_w" << w;
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},
           {"heads_q", std::to_string(h)},
           {"heads_kv", std::to_string(kv)},
           {"seq_q", std::to_string(nq)},
           {"seq_k", std::to_string(nk)},
           {"head_dim", std::to_string(d)},
           {"causal", "1"},
           {"window", std::to_string(w)}};
  return s;
}

// Visible query–key pairs of one (batch, head).
double window_pairs(const AttentionParams& p) {
  double pairs = 0;
  const int off = p.seq_k - p.seq_q;
  for (int i = 0; i < p.seq_q; ++i) {
    const int hi = std::min(i + off, p.seq_k - 1);
    if (hi < 0) continue;
    pairs += hi - std::max(0, i + off - p.window) + 1;
  }
  return pairs;
}

double window_flops(const Shape& s) {
  const auto& p = s.attn;
  return 4.0 * p.head_dim * double(p.batch) * p.heads_q * window_pairs(p);
}

double window_bytes(const Shape& s) { return 4.0 * double(2 * s.attn.q_elems() + 2 * s.attn.kv_elems()); }

FamilyDef window_family() {
  FamilyDef f;
  f.name = kWindow;
  f.title =
      "sliding-window prefill vs the tuned dense causal kernel (FLOPs = 4·D per VISIBLE query-key pair, both rows)";
  f.order = 720;
  f.compute_bound = true;
  f.shape_syntax = "sliding_window:b=1,h=16,kv=16,n=16384,nk=16384,d=128,w=4096";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (int n : {8192, 16384}) v.push_back(window_shape(16384 / n, 2048 / d, 2048 / d, n, n, d, 4096));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 16)), n = int(spec.take("n", 16384));
    return window_shape(int(spec.take("b", 1)), h, int(spec.take("kv", h)), n, int(spec.take("nk", n)),
                        int(spec.take("d", 128)), int(spec.take("w", 4096)));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "g" << s.attn.group_size() << "d" << s.attn.head_dim;
    return o.str();
  };
  f.flops = window_flops;
  f.bytes = window_bytes;
  return f;
}

// The check: two small problems with the shape's D and group size and a window of 37 (so the
// band really is narrower than the keys); `dense_causal` compares against plain causal (01).
void check_window(PrefillFn fn, bool dense_causal, const Shape& s, Check& c, cudaStream_t st) {
  for (int nq : {203, 67}) {
    AttentionParams p =
        AttentionParams::make(2, 2 * s.attn.group_size(), 2, nq, 203, s.attn.head_dim, true, dense_causal ? -1 : 37);
    const auto q = course::random_normal(p.q_elems(), seed_for("window_q", nq));
    const auto k = course::random_normal(p.kv_elems(), seed_for("window_k", nq));
    const auto v = course::random_normal(p.kv_elems(), seed_for("window_v", nq));
    course::DeviceBuffer<float> dq(q), dk(k), dv(v);
    auto out = output_buffer(size_t(p.o_elems()));
    inputs_ready();
    fn(dq.data(), dk.data(), dv.data(), out.data(), p, st);
    std::ostringstream what;
    what << "nq=" << nq << " nk=203 d=" << p.head_dim << (dense_causal ? " causal" : " w=37");
    merge(c,
          course::check_device_output(out, course::ref::attention(q, k, v, p),
                                      course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}},
                                      course::Tolerance::fp32()),
          what.str());
  }
}

Kernel window_kernel(std::string exercise, std::string launcher, int order, PrefillFn fn, bool dense_causal) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = kWindow;
  k.order = order;
  k.validate = [fn, dense_causal](const Shape& s, Check& c, cudaStream_t st) {
    check_window(fn, dense_causal, s, c, st);
  };
  k.device_bytes = window_bytes;
  k.time = [fn, dense_causal](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    AttentionParams p = s.attn;
    if (dense_causal) p.window = -1;  // the same problem without the window: full causal work
    auto q = filled(p.q_elems(), 1, st), kk = filled(p.kv_elems(), 2, st);
    auto v = filled(p.kv_elems(), 3, st), o = filled(p.o_elems(), 4, st);
    return timed([&] { fn(q.data(), kk.data(), v.data(), o.data(), p, st); }, st, cfg, fl);
  };
  return k;
}

// ---------------------------------------------------------------------------------------------
// ring_decode

RingCacheParams ring_of(const Shape& s) {
  RingCacheParams r;
  r.batch = s.attn.batch;
  r.heads_q = s.attn.heads_q;
  r.heads_kv = s.attn.heads_kv;
  r.head_dim = s.attn.head_dim;
  r.window = int(s.extra.at("window"));
  return r;
}

Shape ring_shape(int b, int h, int kv, int d, int w, int context) {
  Shape s;
  s.family = kRing;
  s.attn = AttentionParams::make(b, h, kv, 1, std::min(context, w + 1), d);
  s.context = context;
  s.extra["window"] = w;
  s.tag = kv == h ? "mha" : "gqa";
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_kv" << kv << "_d" << d << "_w" << w << "_ctx" << context;
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},    {"heads_q", std::to_string(h)}, {"heads_kv", std::to_string(kv)},
           {"head_dim", std::to_string(d)}, {"window", std::to_string(w)},  {"context", std::to_string(context)}};
  return s;
}

// Must-move bytes: K and V of the visible slots, once per KV head; q read, o written.
double ring_bytes(const Shape& s) {
  const auto& p = s.attn;  // seq_k = visible slots
  return 4.0 * (2.0 * p.batch * p.heads_kv * double(p.seq_k) * p.head_dim + 2.0 * double(p.q_elems()) / p.seq_q);
}

double ring_flops(const Shape& s) {
  const auto& p = s.attn;
  return 4.0 * p.batch * p.heads_q * double(p.seq_k) * p.head_dim;
}

FamilyDef ring_family() {
  FamilyDef f;
  f.name = kRing;
  f.title = "decode over a ring KV cache of w + 1 slots (bytes = K and V of the window once per KV head)";
  f.order = 725;
  f.compute_bound = false;
  f.shape_syntax = "ring_decode:b=64,h=32,kv=8,d=128,w=4096,ctx=10000";
  f.grid = [] {
    return std::vector<Shape>{ring_shape(64, 32, 8, 128, 4096, 10000), ring_shape(64, 32, 8, 64, 4096, 10000)};
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32));
    return ring_shape(int(spec.take("b", 64)), h, int(spec.take("kv", 8)), int(spec.take("d", 128)),
                      int(spec.take("w", 4096)), int(spec.take("ctx", 10000)));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "g" << s.attn.group_size() << "d" << s.attn.head_dim;
    return o.str();
  };
  f.flops = ring_flops;
  f.bytes = ring_bytes;
  return f;
}

#if defined(BENCH_HAVE_02_sliding_window)
// A small ring (w = 40) with sequences before and after the wrap; unwritten slots are NaN.
void check_ring(const Shape& s, Check& c, cudaStream_t st) {
  RingCacheParams p = ring_of(s);
  p.batch = 5;
  p.window = 40;
  const std::vector<int32_t> lens{1, 30, 41, 42, 200};
  const auto q = course::random_normal(p.q_elems(), seed_for("ring_q", 0));
  std::vector<float> kc(size_t(p.cache_elems()), std::numeric_limits<float>::quiet_NaN()), vc = kc;
  const auto tk = course::random_normal(size_t(p.cache_elems()), seed_for("ring_k", 0));
  const auto tv = course::random_normal(size_t(p.cache_elems()), seed_for("ring_v", 0));
  const int cap = p.capacity(), D = p.head_dim;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_kv; ++h)
      for (int slot = 0; slot < std::min(lens[size_t(b)], cap); ++slot)
        for (int d = 0; d < D; ++d) {
          const size_t at = ((size_t(b) * p.heads_kv + h) * cap + size_t(slot)) * D + size_t(d);
          kc[at] = tk[at];
          vc[at] = tv[at];
        }
  course::DeviceBuffer<float> dq(q), dk(kc), dv(vc);
  course::DeviceBuffer<int32_t> dl(lens);
  auto out = output_buffer(size_t(p.q_elems()));
  inputs_ready();
  ring_decode_attention(dq.data(), dk.data(), dv.data(), dl.data(), out.data(), p, st);
  merge(c,
        course::check_device_output(out, course::ref::ring_decode_attention(q, kc, vc, lens, p),
                                    course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}},
                                    course::Tolerance::fp32()),
        "ring w=40, seq_lens 1 30 41 42 200");
}

Kernel ring_kernel() {
  Kernel k;
  k.exercise = "02_sliding_window";
  k.launcher = "ring_decode_attention";
  k.family = kRing;
  k.order = 10;
  k.validate = check_ring;
  k.device_bytes = [](const Shape& s) { return 4.0 * 2.0 * double(ring_of(s).cache_elems()) + ring_bytes(s); };
  k.time = [](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const RingCacheParams p = ring_of(s);
    auto q = filled(p.q_elems(), 1, st), kc = filled(p.cache_elems(), 2, st), vc = filled(p.cache_elems(), 3, st);
    auto o = filled(p.q_elems(), 4, st);
    course::DeviceBuffer<int32_t> lens(std::vector<int32_t>(size_t(p.batch), int32_t(s.context)));
    inputs_ready();
    return timed([&] { ring_decode_attention(q.data(), kc.data(), vc.data(), lens.data(), o.data(), p, st); }, st, cfg,
                 fl);
  };
  return k;
}
#endif

bool register_all() {
  add_family(window_family());
  add_family(ring_family());
#if defined(BENCH_HAVE_01_flash_tuned)
  add_kernel(window_kernel(
      "01_flash_tuned", "flash_attention_tuned", 10,
      [](const float* q, const float* k, const float* v, float* o, const AttentionParams& p, cudaStream_t s) {
        flash_attention_tuned(q, k, v, o, p, s);
      },
      true));
#endif
#if defined(BENCH_HAVE_02_sliding_window)
  add_kernel(window_kernel(
      "02_sliding_window", "sliding_window_attention", 20,
      [](const float* q, const float* k, const float* v, float* o, const AttentionParams& p, cudaStream_t s) {
        sliding_window_attention(q, k, v, o, p, s);
      },
      false));
  add_kernel(ring_kernel());
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
