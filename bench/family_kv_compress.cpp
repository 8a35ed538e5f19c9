// Family "kv_compress": KV-cache compression (day 10 · 08) next to the decode time it saves.
//
// Grid: B = 1, Hq/Hkv = 32/8, D = 128, block 16, the cache of one 32768-token sequence:
//   compress_…_ctx32768_keep4096   08's kv_compress, 32768 → 4096 tokens per KV head (W = 32,
//                                  4 sinks, 32 recent, pool kernel 7);
//   decode_…_ctx32768              06's split_kv_decode over the full cache, and
//   decode_…_ctx4096               over the compressed one (rows only when 06's solution is in
//                                  the binary: `#if defined`, 06 belongs to family decode_fp16).
// The saving per generated token and layer is the difference of the two decode rows; the
// compression pays for itself after t(compress) / (t(decode 32k) − t(decode 4k)) tokens.
//
// Bytes. Compress: what it must move, K read once (the scores need every key), the kept K and
// V read and written once, q_window read; its second pass over K is the implementation's
// choice, not counted. It is compute-bound on the CUDA cores (two passes of G·W × L dot
// products, FLOPs below), so its "% of copy" is low by nature. Decode: the fp16 K and V read
// once, q read and o written (as in family decode_fp16).
//
// The checks: compression of a small cache from common/paged_cache.h (permuted blocks, NaN in
// every slot no sequence owns; lengths {1, 40, 300, 1000}, the shape's heads, D and block size)
// against the CPU reference's selection (the tests' top-k rule: no dropped candidate above a
// kept one beyond fp32 rounding, sinks and recent window present) and the copied rows bit for
// bit; 06's decode against the paged decode reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "paged_cache.h"
#include "reference.h"
#include "reference_kv_compress.h"

#ifdef BENCH_HAVE_08_kv_compress
#include "08_kv_compress.h"
#endif
// `#if defined`: 06 is only the reference point here; it belongs to the "decode_fp16" family.
#if defined(BENCH_HAVE_06_split_kv_decode)
#include "06_split_kv_decode.h"
#endif

namespace bench {
namespace {

constexpr const char* kFamily = "kv_compress";
constexpr const char* kCompressTag = "compress";
constexpr const char* kDecodeTag = "decode";

bool is_compress(const Shape& s) { return s.tag == kCompressTag; }

// A compression shape (keep > 0) or a decode shape (keep == 0) of one paged cache.
Shape kv_shape(int b, int h, int kv, int ctx, int d, int bs, int keep, int window) {
  Shape s;
  s.family = kFamily;
  s.context = ctx;
  s.tag = keep > 0 ? kCompressTag : kDecodeTag;
  auto& p = s.paged;
  p.batch = b;
  p.heads_q = h;
  p.heads_kv = kv;
  p.head_dim = d;
  p.block_size = bs;
  p.max_blocks_per_seq = (ctx + bs - 1) / bs;
  p.num_blocks = b * p.max_blocks_per_seq;
  s.extra["keep"] = keep;
  s.extra["window"] = window;
  std::ostringstream o;
  o << (keep > 0 ? "compress" : "decode") << "_b" << b << "_h" << h << "_kv" << kv << "_ctx" << ctx;
  if (keep > 0) o << "_keep" << keep << "_w" << window;
  o << "_d" << d << "_bs" << bs;
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},    {"heads_q", std::to_string(h)},    {"heads_kv", std::to_string(kv)},
           {"head_dim", std::to_string(d)}, {"context", std::to_string(ctx)},  {"block_size", std::to_string(bs)},
           {"keep", std::to_string(keep)},  {"window", std::to_string(window)}};
  return s;
}

#if defined(BENCH_HAVE_08_kv_compress)
KvCompressParams compress_params(const Shape& s) {
  KvCompressParams c;
  c.window = int(s.extra.at("window"));
  c.n_sink = 4;
  c.n_recent = c.window;
  c.budget = int(s.extra.at("keep"));
  c.pool_kernel = 7;
  return c;
}
#endif

double kv_flops(const Shape& s) {
  const auto& p = s.paged;
  if (is_compress(s))  // two passes of 2·D FLOPs per (window row, key), rows = Hq · W
    return 2.0 * 2.0 * p.batch * p.heads_q * double(s.extra.at("window")) * double(s.context) * p.head_dim;
  return 4.0 * p.batch * p.heads_q * double(s.context) * p.head_dim;
}

double kv_bytes(const Shape& s) {
  const auto& p = s.paged;
  const double row = 2.0 * p.head_dim;  // one fp16 K or V row
  if (is_compress(s)) {
    const double keep = double(std::min<int64_t>(s.extra.at("keep"), s.context));
    const double q = double(p.batch) * p.heads_q * double(s.extra.at("window")) * row;
    return double(p.batch) * p.heads_kv * (double(s.context) + 4.0 * keep) * row + q;
  }
  return 2.0 * p.batch * p.heads_kv * double(s.context) * row + 2.0 * double(p.q_elems()) * 2.0;
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title = "KV-cache compression 32k -> 4k (08) vs decode over the full and the compressed cache (06)";
  f.order = 780;
  f.shape_syntax = "kv_compress:b=1,h=32,kv=8,ctx=32768,d=128,bs=16,keep=4096,w=32 | kv_compress:decode,ctx=4096";
  f.grid = [] {
    return std::vector<Shape>{kv_shape(1, 32, 8, 32768, 128, 16, 4096, 32), kv_shape(1, 32, 8, 32768, 128, 16, 0, 0),
                              kv_shape(1, 32, 8, 4096, 128, 16, 0, 0)};
  };
  f.parse = [](ShapeSpec& spec) {
    const int h = int(spec.take("h", 32));
    const int keep = spec.flag("decode") ? 0 : int(spec.take("keep", 4096));
    return kv_shape(int(spec.take("b", 1)), h, int(spec.take("kv", 8)), int(spec.take("ctx", 32768)),
                    int(spec.take("d", 128)), int(spec.take("bs", 16)), keep, keep > 0 ? int(spec.take("w", 32)) : 0);
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << s.tag << "h" << s.paged.heads_q << "kv" << s.paged.heads_kv << "d" << s.paged.head_dim << "bs"
      << s.paged.block_size << "w" << s.extra.at("window");
    return o.str();
  };
  f.flops = kv_flops;
  f.bytes = kv_bytes;
  return f;
}

#if defined(BENCH_HAVE_08_kv_compress) || defined(BENCH_HAVE_06_split_kv_decode)
course::DeviceBuffer<uint16_t> half_filled(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(std::max<int64_t>(n, 1)));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}
#endif

// ---------------------------------------------------------------------------------------------
// 08: the compression.
#if defined(BENCH_HAVE_08_kv_compress)

__half* as_half(course::DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__half*>(b.data()); }

void fail(Check& c, const std::string& why) {
  if (c.status != Check::kOk) return;
  c.status = Check::kFail;
  c.detail = why;
}

void check_compress(const Shape& s, Check& c, cudaStream_t st) {
  if (!is_compress(s)) throw std::invalid_argument("kv_compress: a decode row (keep=0) is 06's");
  KvCompressParams kc = compress_params(s);
  kc.budget = std::max(64, 2 * kc.window);  // a small problem with the shape's heads, D, block size and window
  const course::PagedCache pc0 =
      course::build_paged_cache({1, 40, 300, 1000}, s.paged.heads_q, s.paged.heads_kv, s.paged.head_dim,
                                s.paged.block_size, seed_for("kvc_cache", 0));
  const course::PagedParams& p = pc0.p;
  const auto k = course::round_to_half(pc0.k), v = course::round_to_half(pc0.v);
  const auto q = course::round_to_half(
      course::random_normal(size_t(p.batch) * p.heads_q * kc.window * p.head_dim, seed_for("kvc_q", 0)));
  course::DeviceBuffer<uint16_t> dq(course::to_half_bits(q)), dk(course::to_half_bits(k)), dv(course::to_half_bits(v));
  course::DeviceBuffer<int32_t> dt(pc0.table), dl(pc0.lens);
  const course::PagedParams op = kv_compress_out_params(p, kc);
  const int ob = op.max_blocks_per_seq;
  course::DeviceBuffer<uint16_t> ko(size_t(op.cache_elems())), vo(size_t(op.cache_elems()));
  course::DeviceBuffer<int32_t> ot(size_t(p.batch) * ob), ol(size_t(p.batch)),
      kept(size_t(p.batch) * p.heads_kv * kc.budget);
  course::DeviceBuffer<float> ws(kv_compress_workspace_bytes(p, kc) / sizeof(float) + 1);
  ko.poison();
  vo.poison();
  kept.poison();
  ws.poison();
  inputs_ready();
  kv_compress(as_half(dq), as_half(dk), as_half(dv), dt.data(), dl.data(), as_half(ko), as_half(vo), ot.data(),
              ol.data(), kept.data(), ws.data(), p, kc, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaGetLastError());
  const auto g_kept = kept.download(), g_lens = ol.download(), g_table = ot.download();
  const auto g_k = course::half_bits_to_float(ko.download()), g_v = course::half_bits_to_float(vo.download());

  course::ref::KvSelectParams rc;
  rc.window = kc.window;
  rc.n_sink = kc.n_sink;
  rc.n_recent = kc.n_recent;
  rc.budget = kc.budget;
  rc.pool_kernel = kc.pool_kernel;
  std::vector<double> pooled;
  course::ref::kv_compress_kept(q, k, pc0.table, pc0.lens, p, rc, &pooled);
  const int64_t T = int64_t(p.max_blocks_per_seq) * p.block_size;
  const int D = p.head_dim, bs = p.block_size;
  std::vector<float> got, want;  // the copied rows, gathered from the new cache and from the input
  for (int b = 0; b < p.batch; ++b) {
    const int len = pc0.lens[size_t(b)], n = std::min(len, kc.budget);
    std::ostringstream at;
    at << "context_lens={1,40,300,1000} sequence " << b << " (L = " << len << ")";
    if (g_lens[size_t(b)] != n) fail(c, at.str() + ": out_context_lens is " + std::to_string(g_lens[size_t(b)]));
    for (int i = 0; i < ob; ++i)
      if (g_table[size_t(b) * ob + i] != b * ob + i) fail(c, at.str() + ": out_block_table entry " + std::to_string(i));
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const int32_t* row = &g_kept[(size_t(b) * p.heads_kv + hk) * kc.budget];
      std::vector<char> is_kept(size_t(len), 0);
      bool shape_ok = true;
      for (int r = 0; r < n; ++r) {
        if (row[r] < 0 || row[r] >= len || (r > 0 && row[r] <= row[r - 1]))
          shape_ok = false;
        else
          is_kept[size_t(row[r])] = 1;
      }
      if (!shape_ok) {
        fail(c, at.str() + ", KV head " + std::to_string(hk) + ": kept_indices not ascending in [0, L)");
        continue;
      }
      if (len > kc.budget) {
        double kept_min = std::numeric_limits<double>::infinity(), drop_max = -kept_min;
        for (int t = 0; t < len; ++t) {
          const bool always = t < kc.n_sink || t >= len - kc.n_recent;
          if (always && !is_kept[size_t(t)]) fail(c, at.str() + ": a sink or recent token was dropped");
          if (always) continue;
          const double sc = pooled[(size_t(b) * p.heads_kv + hk) * T + t];
          if (is_kept[size_t(t)])
            kept_min = std::min(kept_min, sc);
          else
            drop_max = std::max(drop_max, sc);
        }
        const double tol =
            1e-4 * std::max(std::fabs(kept_min), std::fabs(drop_max)) + 1e-7 * p.group_size() * kc.window;
        if (drop_max > kept_min + tol)
          fail(c, at.str() + ", KV head " + std::to_string(hk) + ": a dropped candidate scores above a kept one");
      }
      for (int r = 0; r < n; ++r) {
        const int t = row[r];
        const int src_block = pc0.table[size_t(b) * p.max_blocks_per_seq + t / bs];
        const size_t src = ((size_t(src_block) * p.heads_kv + hk) * bs + t % bs) * D;
        const size_t dst = ((size_t(b * ob + r / bs) * p.heads_kv + hk) * bs + r % bs) * D;
        got.insert(got.end(), g_k.begin() + int64_t(dst), g_k.begin() + int64_t(dst + D));
        got.insert(got.end(), g_v.begin() + int64_t(dst), g_v.begin() + int64_t(dst + D));
        want.insert(want.end(), k.begin() + int64_t(src), k.begin() + int64_t(src + D));
        want.insert(want.end(), v.begin() + int64_t(src), v.begin() + int64_t(src + D));
      }
    }
  }
  merge(c,
        course::compare(got, want, course::Dims{{"row", int64_t(got.size()) / D}, {"d", D}}, course::Tolerance::fp32()),
        "kept K and V rows in the new cache vs the input's");
}

Kernel compress_kernel() {
  Kernel k;
  k.exercise = "08_kv_compress";
  k.launcher = "kv_compress";
  k.family = kFamily;
  k.order = 10;
  k.tags = {kCompressTag};
  k.validate = check_compress;
  k.device_bytes = [](const Shape& s) {
    if (!is_compress(s)) return 0.0;
    const auto& p = s.paged;
    const KvCompressParams c = compress_params(s);
    const course::PagedParams op = kv_compress_out_params(p, c);
    return 2.0 * double(2 * p.cache_elems() + 2 * op.cache_elems()) +
           2.0 * double(p.batch) * p.heads_q * c.window * p.head_dim + double(kv_compress_workspace_bytes(p, c)) +
           4.0 * double(p.batch) * p.heads_kv * c.budget;
  };
  k.time = [](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    if (!is_compress(s)) throw std::invalid_argument("kv_compress: a decode row (keep=0) is 06's");
    const auto& p = s.paged;
    const KvCompressParams c = compress_params(s);
    const course::PagedParams op = kv_compress_out_params(p, c);
    // Blocks scattered through the pool, as after a while of serving (the decode families' table).
    const auto table = course::permuted_block_table(p.batch, p.max_blocks_per_seq, p.num_blocks, 1234);
    const std::vector<int32_t> lens(size_t(p.batch), s.context);
    course::DeviceBuffer<int32_t> dt(table), dl(lens);
    auto q = half_filled(int64_t(p.batch) * p.heads_q * c.window * p.head_dim, 1, st);
    auto kc = half_filled(p.cache_elems(), 3, st), vc = half_filled(p.cache_elems(), 4, st);
    course::DeviceBuffer<uint16_t> ko(size_t(op.cache_elems())), vo(size_t(op.cache_elems()));
    course::DeviceBuffer<int32_t> ot(size_t(p.batch) * op.max_blocks_per_seq), ol(size_t(p.batch));
    course::DeviceBuffer<int32_t> kept(size_t(p.batch) * p.heads_kv * c.budget);
    course::DeviceBuffer<float> ws(kv_compress_workspace_bytes(p, c) / sizeof(float) + 1);
    inputs_ready();
    return timed(
        [&] {
          kv_compress(as_half(q), as_half(kc), as_half(vc), dt.data(), dl.data(), as_half(ko), as_half(vo), ot.data(),
                      ol.data(), kept.data(), ws.data(), p, c, st);
        },
        st, cfg, fl);
  };
  return k;
}
#endif

// ---------------------------------------------------------------------------------------------
// 06: decode over the full and over the compressed cache.
#if defined(BENCH_HAVE_06_split_kv_decode)

void check_decode(const Shape& s, Check& c, cudaStream_t st) {
  if (is_compress(s)) throw std::invalid_argument("split_kv_decode: a compression row is 08's");
  const auto& bp = s.paged;
  const course::PagedCache pc = course::build_paged_cache({1, bp.block_size + 1, 300}, bp.heads_q, bp.heads_kv,
                                                          bp.head_dim, bp.block_size, seed_for("kvc_decode_cache", 0));
  const course::PagedParams& p = pc.p;
  const auto q = course::round_to_half(course::random_normal(size_t(p.q_elems()), seed_for("kvc_decode_q", 0)));
  const auto k = course::round_to_half(pc.k), v = course::round_to_half(pc.v);
  course::DeviceBuffer<uint16_t> dq(course::to_half_bits(q)), dk(course::to_half_bits(k)), dv(course::to_half_bits(v));
  course::DeviceBuffer<int32_t> dt(pc.table), dl(pc.lens);
  course::DeviceBuffer<float> ws(split_kv_decode_workspace_bytes(p) / sizeof(float) + 1);
  course::DeviceBuffer<uint16_t> dout(size_t(p.q_elems()));
  dout.poison();
  inputs_ready();
  split_kv_decode(reinterpret_cast<const __half*>(dq.data()), reinterpret_cast<const __half*>(dk.data()),
                  reinterpret_cast<const __half*>(dv.data()), dt.data(), dl.data(),
                  reinterpret_cast<__half*>(dout.data()), ws.data(), p, st);
  merge(c,
        course::check_device_output(dout, course::ref::paged_decode_attention(q, k, v, pc.table, pc.lens, p),
                                    course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}},
                                    course::Tolerance::fp16()),
        "fp16 decode, context_lens={1,bs+1,300}");
}

Kernel decode_kernel() {
  Kernel k;
  k.exercise = "06_split_kv_decode";
  k.launcher = "split_kv_decode";
  k.family = kFamily;
  k.order = 20;
  k.tags = {kDecodeTag};
  k.validate = check_decode;
  k.device_bytes = [](const Shape& s) {
    const auto& p = s.paged;
    return 2.0 * double(2 * p.cache_elems() + 2 * p.q_elems()) + double(split_kv_decode_workspace_bytes(p));
  };
  k.time = [](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    if (is_compress(s)) throw std::invalid_argument("split_kv_decode: a compression row is 08's");
    const auto& p = s.paged;
    const auto table = course::permuted_block_table(p.batch, p.max_blocks_per_seq, p.num_blocks, 1234);
    const std::vector<int32_t> lens(size_t(p.batch), s.context);
    course::DeviceBuffer<int32_t> dt(table), dl(lens);
    auto q = half_filled(p.q_elems(), 1, st), o = half_filled(p.q_elems(), 2, st);
    auto kc = half_filled(p.cache_elems(), 3, st), vc = half_filled(p.cache_elems(), 4, st);
    course::DeviceBuffer<float> ws(split_kv_decode_workspace_bytes(p) / sizeof(float) + 1);
    inputs_ready();
    return timed(
        [&] {
          split_kv_decode(reinterpret_cast<const __half*>(q.data()), reinterpret_cast<const __half*>(kc.data()),
                          reinterpret_cast<const __half*>(vc.data()), dt.data(), dl.data(),
                          reinterpret_cast<__half*>(o.data()), ws.data(), p, st);
        },
        st, cfg, fl);
  };
  return k;
}
#endif

bool register_all() {
  add_family(make_family());
#if defined(BENCH_HAVE_08_kv_compress)
  add_kernel(compress_kernel());
#endif
#if defined(BENCH_HAVE_06_split_kv_decode)
  add_kernel(decode_kernel());
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
