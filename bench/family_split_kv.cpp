// Family "decode_fp16": decode over a paged fp16 KV cache (day 10 · 06, split-KV / flash-decoding).
//
// Grid: the serving shapes where splitting matters: one sequence over 16k, 64k and 128k tokens,
// and B = 4, 16, 64 at 4096 tokens; Hq/Hkv = 32/8, D = 128, block 16. Bytes: the fp16 K and V
// read once (2 · 2 · B · Hkv · ctx · D), q read and o written (fp16), the block table and context
// lengths; decode is bandwidth-bound, so "% of copy" is the measure. The partials the split
// kernel writes and merges are NOT counted: they are its overhead, not work the step must do.
//
// The day-06 fp32 kernel is not a row here (it would be charged fp16 bytes): compare with the
// "decode" family's rows at the same B and context (b16/b64 at ctx4096 are in its grid; add
// `--shape decode:b=1,h=32,kv=8,ctx=65536` for B = 1), bandwidth against bandwidth.
//
// The check: a cache from common/paged_cache.h (permuted blocks, NaN in every slot no sequence
// owns) with context lengths {1, bs + 1, 300} and the benchmark shape's heads, D and block
// size, rounded to fp16, against the CPU reference on the rounded values (Tolerance::fp16()),
// once with the automatic split count and once with 7 forced splits.
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "paged_cache.h"
#include "reference.h"

#ifdef BENCH_HAVE_06_split_kv_decode
#include "06_split_kv_decode.h"
#endif

namespace bench {
namespace {

constexpr const char* kFamily = "decode_fp16";

// A decode launcher over fp16 passed as raw bits (uint16_t), with its workspace query;
// num_splits 0 is the launcher's own choice.
using HalfDecode = void (*)(const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache,
                            const int32_t* block_table, const int32_t* context_lens, uint16_t* o, float* workspace,
                            const course::PagedParams& p, cudaStream_t stream, int num_splits);
using HalfWorkspace = size_t (*)(const course::PagedParams& p, int num_splits);

// splits 0: the launcher's choice; a positive count forces it (the trade-off of "Choosing split
// sizes" in the lesson, measured).
Shape fp16_decode_shape(int b, int h, int kv, int ctx, int d, int bs, int splits = 0) {
  Shape s;
  s.family = kFamily;
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
  o << "b" << b << "_h" << h << "_kv" << kv << "_ctx" << ctx << "_d" << d << "_bs" << bs << "_fp16";
  if (splits > 0) o << "_splits" << splits;
  s.name = o.str();
  s.extra["splits"] = splits;
  s.csv = {{"batch", std::to_string(b)},
           {"heads_q", std::to_string(h)},
           {"heads_kv", std::to_string(kv)},
           {"head_dim", std::to_string(d)},
           {"context", std::to_string(ctx)},
           {"block_size", std::to_string(bs)},
           {"splits", splits > 0 ? std::to_string(splits) : "auto"}};
  return s;
}

double fp16_decode_bytes(const Shape& s) {
  const auto& p = s.paged;
  const double kv = 2.0 * 2.0 * p.batch * p.heads_kv * double(s.context) * p.head_dim;
  const double meta = 4.0 * (double(p.batch) * p.max_blocks_per_seq + p.batch);
  return kv + 2.0 * 2.0 * double(p.q_elems()) + meta;
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title = "paged decode, fp16 KV cache (bandwidth; bytes = fp16 Q + K + V read once, O written once)";
  f.order = 760;
  f.shape_syntax = "decode_fp16:b=1,h=32,kv=8,ctx=65536,d=128,bs=16[,splits=33]";
  f.grid = [] {
    std::vector<Shape> v;
    for (int ctx : {16384, 65536, 131072}) v.push_back(fp16_decode_shape(1, 32, 8, ctx, 128, 16));
    for (int b : {4, 16, 64}) v.push_back(fp16_decode_shape(b, 32, 8, 4096, 128, 16));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32));
    return fp16_decode_shape(int(spec.take("b", 1)), h, int(spec.take("kv", h)), int(spec.take("ctx", 4096)),
                             int(spec.take("d", 128)), int(spec.take("bs", 16)), int(spec.take("splits", 0)));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "h" << s.paged.heads_q << "kv" << s.paged.heads_kv << "d" << s.paged.head_dim << "bs" << s.paged.block_size;
    return o.str();
  };
  f.flops = [](const Shape& s) { return 4.0 * s.paged.batch * s.paged.heads_q * double(s.context) * s.paged.head_dim; };
  f.bytes = fp16_decode_bytes;
  return f;
}

course::DeviceBuffer<uint16_t> half_filled(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

void check_fp16_decode(HalfDecode launch, HalfWorkspace ws_bytes, const Shape& s, Check& c, cudaStream_t st) {
  const auto& bp = s.paged;
  const course::PagedCache pc = course::build_paged_cache({1, bp.block_size + 1, 300}, bp.heads_q, bp.heads_kv,
                                                          bp.head_dim, bp.block_size, seed_for("decode_fp16_cache", 0));
  const course::PagedParams& p = pc.p;
  const auto q = course::round_to_half(course::random_normal(p.q_elems(), seed_for("decode_fp16_q", 0)));
  const auto k = course::round_to_half(pc.k), v = course::round_to_half(pc.v);
  course::DeviceBuffer<uint16_t> dq(course::to_half_bits(q)), dk(course::to_half_bits(k)), dv(course::to_half_bits(v));
  course::DeviceBuffer<int32_t> dt(pc.table), dl(pc.lens);
  const auto ref = course::ref::paged_decode_attention(q, k, v, pc.table, pc.lens, p);
  for (int splits : {0, 7}) {
    course::DeviceBuffer<float> ws(ws_bytes(p, splits) / sizeof(float) + 1);
    course::DeviceBuffer<uint16_t> dout(size_t(p.q_elems()));
    dout.poison();
    inputs_ready();
    launch(dq.data(), dk.data(), dv.data(), dt.data(), dl.data(), dout.data(), ws.data(), p, st, splits);
    std::ostringstream what;
    what << "fp16 context_lens={1," << p.block_size + 1 << ",300} hq=" << p.heads_q << " hkv=" << p.heads_kv
         << " d=" << p.head_dim << " bs=" << p.block_size << (splits ? " splits=7" : " splits=auto");
    merge(c,
          course::check_device_output(dout, ref, course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}},
                                      course::Tolerance::fp16()),
          what.str());
  }
}

Kernel fp16_decode_kernel(std::string exercise, std::string launcher, int order, HalfDecode launch,
                          HalfWorkspace ws_bytes) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = kFamily;
  k.order = order;
  k.validate = [launch, ws_bytes](const Shape& s, Check& c, cudaStream_t st) {
    check_fp16_decode(launch, ws_bytes, s, c, st);
  };
  k.device_bytes = [ws_bytes](const Shape& s) {
    const auto& p = s.paged;
    return 2.0 * double(2 * p.cache_elems() + 2 * p.q_elems()) + double(ws_bytes(p, int(s.extra.at("splits"))));
  };
  k.time = [launch, ws_bytes](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const auto& p = s.paged;
    const int splits = int(s.extra.at("splits"));
    // Blocks scattered through the pool, as after a while of serving (the decode family's table).
    const auto table = course::permuted_block_table(p.batch, p.max_blocks_per_seq, p.num_blocks, 1234);
    const std::vector<int32_t> lens(size_t(p.batch), s.context);
    course::DeviceBuffer<int32_t> dt(table), dl(lens);
    auto q = half_filled(p.q_elems(), 1, st), o = half_filled(p.q_elems(), 2, st);
    auto kc = half_filled(p.cache_elems(), 3, st), vc = half_filled(p.cache_elems(), 4, st);
    course::DeviceBuffer<float> ws(ws_bytes(p, splits) / sizeof(float) + 1);
    inputs_ready();
    return timed(
        [&] { launch(q.data(), kc.data(), vc.data(), dt.data(), dl.data(), o.data(), ws.data(), p, st, splits); }, st,
        cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(make_family());
#ifdef BENCH_HAVE_06_split_kv_decode
  add_kernel(fp16_decode_kernel(
      "06_split_kv_decode", "split_kv_decode", 10,
      [](const uint16_t* q, const uint16_t* kc, const uint16_t* vc, const int32_t* bt, const int32_t* cl, uint16_t* o,
         float* ws, const course::PagedParams& p, cudaStream_t s, int num_splits) {
        SplitKvOptions opt;
        opt.num_splits = num_splits;
        split_kv_decode(reinterpret_cast<const __half*>(q), reinterpret_cast<const __half*>(kc),
                        reinterpret_cast<const __half*>(vc), bt, cl, reinterpret_cast<__half*>(o), ws, p, s, opt);
      },
      [](const course::PagedParams& p, int num_splits) {
        SplitKvOptions opt;
        opt.num_splits = num_splits;
        return split_kv_decode_workspace_bytes(p, opt);
      }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
