// See decode_workload.h. The grid is the shapes of a serving batch: B ∈ {1, 16, 64}, context
// ∈ {1k, 4k, 16k}, Hq/Hkv ∈ {32/32, 32/8}, D = 128, block 16. Decode is bandwidth-bound: every
// cached K and V element is read once per step, so GB/s against the copy roof is the measure.
#include "decode_workload.h"

#include <sstream>

#include "bench_util.h"
#include "paged_cache.h"
#include "reference.h"

namespace bench {

namespace {

double decode_bytes(const Shape& s) {
  const auto& p = s.paged;
  const double kv = 2.0 * sizeof(float) * p.batch * p.heads_kv * double(s.context) * p.head_dim;
  const double meta = 4.0 * (double(p.batch) * p.max_blocks_per_seq + p.batch);
  return kv + 2.0 * sizeof(float) * double(p.q_elems()) + meta;  // K, V, table read; q in, o out
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = "decode";
  f.title = "paged decode attention (bandwidth; bytes = Q + K + V read once, O written once)";
  f.order = 600;
  f.shape_syntax = "decode:b=16,h=32,kv=8,ctx=4096,d=128,bs=16";
  f.grid = [] {
    std::vector<Shape> v;
    for (int kv : {32, 8})
      for (int b : {1, 16, 64})
        for (int ctx : {1024, 4096, 16384}) v.push_back(decode_shape(b, 32, kv, ctx, 128, 16));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32));
    return decode_shape(int(spec.take("b", 1)), h, int(spec.take("kv", h)), int(spec.take("ctx", 1024)),
                        int(spec.take("d", 128)), int(spec.take("bs", 16)));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "h" << s.paged.heads_q << "kv" << s.paged.heads_kv << "d" << s.paged.head_dim << "bs" << s.paged.block_size;
    return o.str();
  };
  f.flops = [](const Shape& s) { return 4.0 * s.paged.batch * s.paged.heads_q * double(s.context) * s.paged.head_dim; };
  f.bytes = decode_bytes;
  return f;
}

void check_decode(const DecodeLaunch& launch, const DecodeWorkspace& ws_bytes, const Shape& s, Check& c,
                  cudaStream_t st) {
  const auto& bp = s.paged;
  // Partial last blocks; no spare table column, so max_blocks_per_seq is what the longest needs.
  const course::PagedCache pc =
      course::build_paged_cache({1, bp.block_size + 1, 300}, bp.heads_q, bp.heads_kv, bp.head_dim, bp.block_size,
                                seed_for("decode_cache", 0), /*spare_columns=*/0);
  const course::PagedParams& p = pc.p;
  const auto q = course::random_normal(p.q_elems(), seed_for("decode_q", 0));
  course::DeviceBuffer<float> dq(q), dk(pc.k), dv(pc.v);
  course::DeviceBuffer<int32_t> dt(pc.table), dl(pc.lens);
  course::DeviceBuffer<float> ws(ws_bytes ? (ws_bytes(p) + 3) / 4 + 1 : 1);
  auto dout = output_buffer(p.q_elems());
  inputs_ready();
  launch(dq.data(), dk.data(), dv.data(), dt.data(), dl.data(), dout.data(), ws.data(), p, st);
  std::ostringstream what;
  what << "context_lens={1," << p.block_size + 1 << ",300} hq=" << p.heads_q << " hkv=" << p.heads_kv
       << " d=" << p.head_dim << " bs=" << p.block_size;
  merge(c,
        course::check_device_output(dout, course::ref::paged_decode_attention(q, pc.k, pc.v, pc.table, pc.lens, p),
                                    course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}}),
        what.str());
}

}  // namespace

void register_decode_family() { add_family(make_family()); }

Shape decode_shape(int b, int h, int kv, int ctx, int d, int bs) {
  Shape s;
  s.family = "decode";
  s.context = ctx;
  auto& p = s.paged;
  p.batch = b;
  p.heads_q = h;
  p.heads_kv = kv;
  p.head_dim = d;
  p.block_size = bs;
  p.max_blocks_per_seq = (ctx + bs - 1) / bs;
  p.num_blocks = b * p.max_blocks_per_seq;
  std::ostringstream o;
  o << "b" << b << "_h" << h << "_kv" << kv << "_ctx" << ctx << "_d" << d << "_bs" << bs;
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},    {"heads_q", std::to_string(h)},   {"heads_kv", std::to_string(kv)},
           {"head_dim", std::to_string(d)}, {"context", std::to_string(ctx)}, {"block_size", std::to_string(bs)}};
  return s;
}

Kernel decode_kernel(std::string exercise, std::string launcher, int order, DecodeLaunch launch,
                     DecodeWorkspace workspace_bytes) {
  register_decode_family();
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "decode";
  k.order = order;
  k.validate = [launch, workspace_bytes](const Shape& s, Check& c, cudaStream_t st) {
    check_decode(launch, workspace_bytes, s, c, st);
  };
  k.device_bytes = [workspace_bytes](const Shape& s) {
    const auto& p = s.paged;
    return sizeof(float) * double(2 * p.cache_elems() + 2 * p.q_elems()) +
           (workspace_bytes ? double(workspace_bytes(p)) : 0.0);
  };
  k.time = [launch, workspace_bytes](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.paged;
    // Blocks scattered through the pool, as after a while of serving; the permutation is
    // fixed so runs are comparable.
    const auto table = course::permuted_block_table(p.batch, p.max_blocks_per_seq, p.num_blocks, 1234);
    const std::vector<int32_t> lens(size_t(p.batch), s.context);
    course::DeviceBuffer<int32_t> dt(table), dl(lens);
    auto q = filled(p.q_elems(), 1, st), o = filled(p.q_elems(), 2, st);
    auto kc = filled(p.cache_elems(), 3, st), vc = filled(p.cache_elems(), 4, st);
    course::DeviceBuffer<float> ws(workspace_bytes ? (workspace_bytes(p) + 3) / 4 + 1 : 1);
    inputs_ready();  // the table and lengths were uploaded from pageable memory
    return timed([&] { launch(q.data(), kc.data(), vc.data(), dt.data(), dl.data(), o.data(), ws.data(), p, st); }, st,
                 cfg, fl);
  };
  return k;
}

}  // namespace bench
