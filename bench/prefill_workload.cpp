// See prefill_workload.h. The grid keeps B·N = 16k tokens and H·D = 2048 (a 2k-wide model) at
// every N, so moving along N changes only how much each token attends to (the N² term), which
// is the effect the table is about.
#include "prefill_workload.h"

#include <array>
#include <sstream>

#include "bench_util.h"
#include "random.h"
#include "reference.h"

namespace bench {

namespace {

double prefill_flops(const Shape& s) {
  // Two GEMMs (Q·Kᵀ and P·V) of 2·Nq·Nk·D each per (batch, query head). Causal: count half,
  // the convention FlashAttention's papers use, so causal and full rows compare.
  const auto& p = s.attn;
  const double f = 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double prefill_bytes(const Shape& s) {
  const auto& p = s.attn;
  return sizeof(float) * double(2 * p.q_elems() + 2 * p.kv_elems());  // Q, K, V read; O written
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = "prefill";
  f.title = "prefill attention (compute; FLOPs = 4·B·Hq·Nq·Nk·D, halved when causal)";
  f.order = 500;
  f.compute_bound = true;
  f.shape_syntax = "prefill:b=2,h=32,kv=8,n=1000,nk=1000,d=64,causal";
  f.grid = [] {
    std::vector<Shape> v;
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int n : {512, 1024, 2048, 4096, 8192}) {
          const int b = 16384 / n, h = 2048 / d;
          v.push_back(prefill_shape(b, h, h, n, n, d, causal));      // MHA
          v.push_back(prefill_shape(b, h, h / 4, n, n, d, causal));  // GQA, group of 4
        }
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32)), n = int(spec.take("n", 1024));
    return prefill_shape(int(spec.take("b", 1)), h, int(spec.take("kv", h)), n, int(spec.take("nk", n)),
                         int(spec.take("d", 64)), spec.flag("causal"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "g" << s.attn.group_size() << "d" << s.attn.head_dim << "c" << s.attn.causal;
    return o.str();
  };
  f.flops = prefill_flops;
  f.bytes = prefill_bytes;
  return f;
}

void check_prefill(const PrefillLaunch& launch, const PrefillWorkspace& ws_bytes, const Shape& s, Check& c,
                   cudaStream_t st) {
  const int g = s.attn.group_size();
  for (auto nqk : {std::array<int, 2>{203, 203}, std::array<int, 2>{67, 203}}) {
    course::AttentionParams p = s.attn;
    p.batch = 2;
    p.heads_kv = 2;
    p.heads_q = 2 * g;
    p.seq_q = nqk[0];
    p.seq_k = nqk[1];
    const auto q = course::random_normal(p.q_elems(), seed_for("prefill_q", nqk[0]));
    const auto k = course::random_normal(p.kv_elems(), seed_for("prefill_k", nqk[0]));
    const auto v = course::random_normal(p.kv_elems(), seed_for("prefill_v", nqk[0]));
    course::DeviceBuffer<float> dq(q), dk(k), dv(v);
    auto dout = output_buffer(p.o_elems());
    course::DeviceBuffer<float> ws(ws_bytes ? (ws_bytes(p) + 3) / 4 + 1 : 1);
    inputs_ready();
    launch(dq.data(), dk.data(), dv.data(), dout.data(), ws.data(), p, st);
    std::ostringstream what;
    what << "b=2 hq=" << p.heads_q << " hkv=2 nq=" << p.seq_q << " nk=" << p.seq_k << " d=" << p.head_dim
         << (p.causal ? " causal" : "");
    merge(
        c,
        course::check_device_output(dout, course::ref::attention(q, k, v, p),
                                    course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}}),
        what.str());
  }
}

}  // namespace

void register_prefill_family() { add_family(make_family()); }

Shape prefill_shape(int b, int h, int kv, int nq, int nk, int d, bool causal) {
  Shape s;
  s.family = "prefill";
  auto& p = s.attn;
  p.batch = b;
  p.heads_q = h;
  p.heads_kv = kv;
  p.seq_q = nq;
  p.seq_k = nk;
  p.head_dim = d;
  p.causal = causal;
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

Kernel prefill_kernel(std::string exercise, std::string launcher, int order, std::vector<std::string> tags,
                      PrefillLaunch launch, PrefillWorkspace workspace_bytes) {
  register_prefill_family();
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "prefill";
  k.order = order;
  k.tags = std::move(tags);
  k.quadratic_memory = workspace_bytes != nullptr;  // every workspace we have is N×N
  k.validate = [launch, workspace_bytes](const Shape& s, Check& c, cudaStream_t st) {
    check_prefill(launch, workspace_bytes, s, c, st);
  };
  k.device_bytes = [workspace_bytes](const Shape& s) {
    return prefill_bytes(s) + (workspace_bytes ? double(workspace_bytes(s.attn)) : 0.0);
  };
  k.time = [launch, workspace_bytes](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.attn;
    auto q = filled(p.q_elems(), 1, st), kk = filled(p.kv_elems(), 2, st);
    auto v = filled(p.kv_elems(), 3, st), o = filled(p.o_elems(), 4, st);
    course::DeviceBuffer<float> ws(workspace_bytes ? (workspace_bytes(p) + 3) / 4 + 1 : 1);
    return timed([&] { launch(q.data(), kk.data(), v.data(), o.data(), ws.data(), p, st); }, st, cfg, fl);
  };
  return k;
}

}  // namespace bench
