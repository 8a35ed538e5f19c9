// Family "rope": rotary position embedding applied to Q and K (day 10 · 07_rope_yarn).
//
// Grid: Llama-3-8B-like layers (Hq/Hkv = 32/8, D = 128, NeoX pairs, YaRN s = 4 over base 500000
// and L = 8192) in prefill over 8192 and 32768 tokens, in fp16 and in bf16; the 8192-token shape
// with GPT-J pairs; an MHA shape with D = 64 (B = 4, H = 32, N = 4096, plain RoPE); and one
// decode step (B = 64, N = 1, positions near 10^6). The scaling only changes the table the host
// computes, not the kernel's work. The decode step moves 1.3 MB: its row shows the cost of a
// launch, not bandwidth.
//
// Bytes: Q and K read once and written once (2 · 2 bytes per element) plus the int32 positions.
// RoPE does ~6 FLOPs per pair of elements (8 bytes moved): a copy with a rotation, so "% of copy"
// is the measure (a kernel that streams Q and K once reaches >= 85% of the copy roof measured in
// the same run).
//
// The check: the shape's heads, D, layout and type at B = 2, N = 37, positions drawn from
// [10^5, 10^6] (where a naive fp32 angle is visibly wrong), inputs rounded to the 16-bit type and
// the CPU reference (common/reference_rope.h) run on the rounded values, Tolerance::fp16()/bf16().
// Timing inputs: hashed uniform fp16 bits (device_fill.h); the bf16 rows read the same bits as
// bf16 (finite values of assorted magnitudes: the run time does not depend on them).
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "reference_rope.h"

#ifdef BENCH_HAVE_07_rope_yarn
#include "07_rope_yarn.h"
#endif

namespace bench {
namespace {

constexpr const char* kFamily = "rope";

// Shape fields: attn.batch, heads_q, heads_kv, seq_q (= N), head_dim; extra: gptj (0/1),
// bf16 (0/1), yarn (0/1), pos0 (the first position of every sequence).
Shape rope_shape(int b, int hq, int hkv, int n, int d, bool gptj, bool bf16, bool yarn, int64_t pos0) {
  Shape s;
  s.family = kFamily;
  auto& p = s.attn;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seq_q = p.seq_k = n;
  p.head_dim = d;
  s.extra = {{"gptj", gptj}, {"bf16", bf16}, {"yarn", yarn}, {"pos0", pos0}};
  std::ostringstream o;
  o << "b" << b << "_h" << hq << "_kv" << hkv << "_n" << n << "_d" << d << (gptj ? "_gptj" : "_neox")
    << (yarn ? "_yarn" : "") << (bf16 ? "_bf16" : "_fp16");
  if (pos0) o << "_pos" << pos0;
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},     {"heads_q", std::to_string(hq)}, {"heads_kv", std::to_string(hkv)},
           {"seq_q", std::to_string(n)},     {"head_dim", std::to_string(d)}, {"layout", gptj ? "gptj" : "neox"},
           {"dtype", bf16 ? "bf16" : "fp16"}};
  return s;
}

int64_t rope_elems(const Shape& s) {
  const auto& p = s.attn;
  return int64_t(p.batch) * (p.heads_q + p.heads_kv) * p.seq_q * p.head_dim;
}

double rope_bytes(const Shape& s) {
  return 2.0 * 2.0 * double(rope_elems(s)) + 4.0 * double(s.attn.batch) * s.attn.seq_q;
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title = "RoPE on Q and K (bandwidth; bytes = Q and K read once and written once, 16-bit, + positions)";
  f.order = 770;
  f.shape_syntax = "rope:b=1,h=32,kv=8,n=8192,d=128[,gptj][,bf16][,yarn][,pos=1000000]";
  f.grid = [] {
    std::vector<Shape> v;
    for (int n : {8192, 32768})
      for (bool bf16 : {false, true}) v.push_back(rope_shape(1, 32, 8, n, 128, false, bf16, true, 0));
    v.push_back(rope_shape(1, 32, 8, 8192, 128, true, false, true, 0));
    v.push_back(rope_shape(4, 32, 32, 4096, 64, false, false, false, 0));
    v.push_back(rope_shape(64, 32, 8, 1, 128, false, false, true, 999000));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32));
    const int b = int(spec.take("b", 1)), kv = int(spec.take("kv", h)), n = int(spec.take("n", 8192));
    const int d = int(spec.take("d", 128));
    const bool gptj = spec.flag("gptj"), bf16 = spec.flag("bf16"), yarn = spec.flag("yarn");
    return rope_shape(b, h, kv, n, d, gptj, bf16, yarn, spec.take("pos", 0));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "h" << s.attn.heads_q << "kv" << s.attn.heads_kv << "d" << s.attn.head_dim << "g" << s.extra.at("gptj") << "b"
      << s.extra.at("bf16") << "y" << s.extra.at("yarn");
    return o.str();
  };
  f.flops = [](const Shape&) { return 0.0; };  // bandwidth kernel: GB/s and % of copy
  f.bytes = rope_bytes;
  return f;
}

#if defined(BENCH_HAVE_07_rope_yarn)
// The launcher on raw 16-bit bits; bf16 picks the overload.
void launch_rope(const uint16_t* q, const uint16_t* k, uint16_t* qo, uint16_t* ko, const int32_t* pos,
                 const RopeParams& p, bool bf16, cudaStream_t st) {
  if (bf16)
    rope_yarn(reinterpret_cast<const __nv_bfloat16*>(q), reinterpret_cast<const __nv_bfloat16*>(k),
              reinterpret_cast<__nv_bfloat16*>(qo), reinterpret_cast<__nv_bfloat16*>(ko), pos, p, st);
  else
    rope_yarn(reinterpret_cast<const __half*>(q), reinterpret_cast<const __half*>(k), reinterpret_cast<__half*>(qo),
              reinterpret_cast<__half*>(ko), pos, p, st);
}

RopeParams params_of(const Shape& s) {
  RopeParams p;
  p.batch = s.attn.batch;
  p.heads_q = s.attn.heads_q;
  p.heads_kv = s.attn.heads_kv;
  p.seq_len = s.attn.seq_q;
  p.head_dim = s.attn.head_dim;
  p.layout = s.extra.at("gptj") ? RopeLayout::kGptj : RopeLayout::kNeox;
  if (s.extra.at("yarn")) {  // Llama-3-like: base 500000, trained on 8192 tokens, stretched 4x
    p.base = 500000.0;
    p.scaling = RopeScaling::kYarn;
    p.factor = 4.0;
    p.original_max_position = 8192;
  }
  return p;
}

course::ref::RopeSpec spec_of(const RopeParams& p) {
  course::ref::RopeSpec r;
  r.layout =
      p.layout == RopeLayout::kGptj ? course::ref::RopeSpec::Layout::kGptj : course::ref::RopeSpec::Layout::kNeox;
  r.base = p.base;
  r.scaling =
      p.scaling == RopeScaling::kYarn ? course::ref::RopeSpec::Scaling::kYarn : course::ref::RopeSpec::Scaling::kNone;
  r.factor = p.factor;
  r.original_max_position = p.original_max_position;
  r.beta_fast = p.beta_fast;
  r.beta_slow = p.beta_slow;
  return r;
}

void check_rope(const Shape& s, Check& c, cudaStream_t st) {
  Shape small = s;
  small.attn.batch = 2;
  small.attn.seq_q = small.attn.seq_k = 37;
  const RopeParams p = params_of(small);
  const bool bf16 = s.extra.at("bf16") != 0;
  using Round = std::vector<float> (*)(const std::vector<float>&);
  using Bits = std::vector<uint16_t> (*)(const std::vector<float>&);
  using Decode = std::vector<float> (*)(const std::vector<uint16_t>&);
  const Round round = bf16 ? static_cast<Round>(course::round_to_bf16) : static_cast<Round>(course::round_to_half);
  const Bits bits = bf16 ? static_cast<Bits>(course::to_bf16_bits) : static_cast<Bits>(course::to_half_bits);
  const Decode decode =
      bf16 ? static_cast<Decode>(course::bf16_bits_to_float) : static_cast<Decode>(course::half_bits_to_float);
  const size_t nq = size_t(p.batch) * p.heads_q * p.seq_len * p.head_dim;
  const size_t nk = size_t(p.batch) * p.heads_kv * p.seq_len * p.head_dim;
  const auto q = round(course::random_normal(nq, seed_for("rope_q", p.head_dim)));
  const auto k = round(course::random_normal(nk, seed_for("rope_k", p.head_dim)));
  course::Rng rng(seed_for("rope_pos", p.head_dim));
  std::vector<int32_t> pos(size_t(p.batch) * p.seq_len);
  for (int32_t& m : pos) m = int32_t(rng.uniform_int(100000, 1000000));
  course::DeviceBuffer<uint16_t> dq(bits(q)), dk(bits(k)), dqo(nq), dko(nk);
  course::DeviceBuffer<int32_t> dpos(pos);
  dqo.poison();
  dko.poison();
  inputs_ready();
  launch_rope(dq.data(), dk.data(), dqo.data(), dko.data(), dpos.data(), p, bf16, st);
  CUDA_CHECK(cudaDeviceSynchronize());
  const course::Tolerance tol = bf16 ? course::Tolerance::bf16() : course::Tolerance::fp16();
  const auto spec = spec_of(p);
  std::ostringstream what;
  what << (bf16 ? "bf16" : "fp16") << " b=2 n=37 hq=" << p.heads_q << " hkv=" << p.heads_kv << " d=" << p.head_dim
       << (p.layout == RopeLayout::kGptj ? " gptj" : " neox") << " positions 1e5..1e6";
  merge(c,
        course::compare(decode(dqo.download()),
                        course::ref::rope(q, pos, p.batch, p.heads_q, p.seq_len, p.head_dim, spec),
                        course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"n", p.seq_len}, {"d", p.head_dim}}, tol,
                        dqo.guard_damage()),
        what.str() + " q_out");
  merge(c,
        course::compare(decode(dko.download()),
                        course::ref::rope(k, pos, p.batch, p.heads_kv, p.seq_len, p.head_dim, spec),
                        course::Dims{{"b", p.batch}, {"h", p.heads_kv}, {"n", p.seq_len}, {"d", p.head_dim}}, tol,
                        dko.guard_damage()),
        what.str() + " k_out");
}

course::DeviceBuffer<uint16_t> filled16(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

Kernel rope_kernel_entry() {
  Kernel k;
  k.exercise = "07_rope_yarn";
  k.launcher = "rope_yarn";
  k.family = kFamily;
  k.order = 10;
  k.validate = check_rope;
  k.device_bytes = rope_bytes;
  k.time = [](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const RopeParams p = params_of(s);
    const int64_t nq = int64_t(p.batch) * p.heads_q * p.seq_len * p.head_dim;
    const int64_t nk = int64_t(p.batch) * p.heads_kv * p.seq_len * p.head_dim;
    std::vector<int32_t> pos(size_t(p.batch) * p.seq_len);
    for (int b = 0; b < p.batch; ++b)
      for (int n = 0; n < p.seq_len; ++n) pos[size_t(b) * p.seq_len + n] = int32_t(s.extra.at("pos0") + n);
    course::DeviceBuffer<int32_t> dpos(pos);
    auto q = filled16(nq, 1, st), kk = filled16(nk, 2, st), qo = filled16(nq, 3, st), ko = filled16(nk, 4, st);
    inputs_ready();
    const bool bf16 = s.extra.at("bf16") != 0;
    return timed([&] { launch_rope(q.data(), kk.data(), qo.data(), ko.data(), dpos.data(), p, bf16, st); }, st, cfg,
                 fl);
  };
  return k;
}
#endif

bool register_all() {
  add_family(make_family());
#if defined(BENCH_HAVE_07_rope_yarn)
  add_kernel(rope_kernel_entry());
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
