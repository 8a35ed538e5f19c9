// The standard shape grids, the command-line shape syntax, and the cost model.
//
// Prefill: B·N = 16k tokens and H·D = 2048 (a 2k-wide model) at every N, so every shape holds
// the same number of tokens: moving along N changes only how much each token attends to (the
// N² term), which is the effect the table is about. Decode: the shapes of a serving batch.
#include <array>
#include <sstream>
#include <stdexcept>

#include "bench.h"

namespace bench {

const char* family_name(Family f) {
  switch (f) {
    case Family::kVector: return "vector";
    case Family::kMatmul: return "matmul";
    case Family::kRowReduce: return "reduce";
    case Family::kSoftmax: return "softmax";
    case Family::kPrefill: return "prefill";
    case Family::kDecode: return "decode";
  }
  return "?";
}

namespace {

std::string make_name(const Shape& s) {
  std::ostringstream o;
  switch (s.family) {
    case Family::kVector: o << "n" << s.n; break;
    case Family::kMatmul: o << "m" << s.m << "_n" << s.nn << "_k" << s.k; break;
    case Family::kRowReduce:
    case Family::kSoftmax: o << "r" << s.rows << "_c" << s.cols; break;
    case Family::kPrefill: {
      const auto& p = s.attn;
      o << "b" << p.batch << "_h" << p.heads_q << "_kv" << p.heads_kv << "_n" << p.seq_q;
      if (p.seq_k != p.seq_q) o << "_nk" << p.seq_k;
      o << "_d" << p.head_dim << (p.causal ? "_causal" : "");
      break;
    }
    case Family::kDecode: {
      const auto& p = s.paged;
      o << "b" << p.batch << "_h" << p.heads_q << "_kv" << p.heads_kv << "_ctx" << s.context
        << "_d" << p.head_dim << "_bs" << p.block_size;
      break;
    }
  }
  return o.str();
}

Shape prefill_shape(int b, int h, int kv, int nq, int nk, int d, bool causal) {
  Shape s;
  s.family = Family::kPrefill;
  s.attn.batch = b;
  s.attn.heads_q = h;
  s.attn.heads_kv = kv;
  s.attn.seq_q = nq;
  s.attn.seq_k = nk;
  s.attn.head_dim = d;
  s.attn.causal = causal;
  s.gqa_grid = kv != h;
  s.name = make_name(s);
  return s;
}

Shape decode_shape(int b, int h, int kv, int ctx, int d, int bs) {
  Shape s;
  s.family = Family::kDecode;
  s.context = ctx;
  s.paged.batch = b;
  s.paged.heads_q = h;
  s.paged.heads_kv = kv;
  s.paged.head_dim = d;
  s.paged.block_size = bs;
  s.paged.max_blocks_per_seq = (ctx + bs - 1) / bs;
  s.paged.num_blocks = b * s.paged.max_blocks_per_seq;
  s.name = make_name(s);
  return s;
}

}  // namespace

std::vector<Shape> default_shapes(Family f) {
  std::vector<Shape> v;
  Shape s;
  s.family = f;
  switch (f) {
    case Family::kVector:
      // 64 MiB and 1 GiB per operand: both far beyond L2, the second amortises the tail.
      for (int64_t n : {int64_t(1) << 24, int64_t(1) << 28}) {
        s.n = n;
        s.name = make_name(s);
        v.push_back(s);
      }
      break;
    case Family::kMatmul:
      // Two squares and the Q·Kᵀ shape of one 4k-token head at D = 128.
      for (auto mnk : {std::array<int, 3>{1024, 1024, 1024}, std::array<int, 3>{4096, 4096, 4096},
                       std::array<int, 3>{4096, 4096, 128}}) {
        s.m = mnk[0];
        s.nn = mnk[1];
        s.k = mnk[2];
        s.name = make_name(s);
        v.push_back(s);
      }
      break;
    case Family::kRowReduce:
    case Family::kSoftmax:
      // 256 MiB each: many short rows, square, few very long rows (a 32k-token score row).
      for (auto rc : {std::array<int, 2>{65536, 1024}, std::array<int, 2>{8192, 8192},
                      std::array<int, 2>{2048, 32768}}) {
        s.rows = rc[0];
        s.cols = rc[1];
        s.name = make_name(s);
        v.push_back(s);
      }
      break;
    case Family::kPrefill:
      for (int d : {64, 128})
        for (bool causal : {false, true})
          for (int n : {512, 1024, 2048, 4096, 8192}) {
            const int b = 16384 / n, h = 2048 / d;
            v.push_back(prefill_shape(b, h, h, n, n, d, causal));      // MHA
            v.push_back(prefill_shape(b, h, h / 4, n, n, d, causal));  // GQA, group of 4
          }
      break;
    case Family::kDecode:
      for (int kv : {32, 8})
        for (int b : {1, 16, 64})
          for (int ctx : {1024, 4096, 16384}) v.push_back(decode_shape(b, 32, kv, ctx, 128, 16));
      break;
  }
  return v;
}

Shape parse_shape(const std::string& spec) {
  const std::string usage =
      "shape spec examples: prefill:b=2,h=32,kv=8,n=1000,nk=1000,d=64,causal | "
      "decode:b=16,h=32,kv=8,ctx=4096,d=128,bs=16 | vector:n=1000000 | matmul:m=512,n=512,k=64 | "
      "reduce:rows=4096,cols=1000 | softmax:rows=4096,cols=1000";
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("bad shape '" + spec + "'; " + usage);
  const std::string fam = spec.substr(0, colon);
  long long b = 1, h = 32, kv = -1, n = 1024, nk = -1, d = -1, ctx = 1024, bs = 16, m = 1024,
            k = 1024, rows = 1024, cols = 1024;
  bool causal = false;
  std::stringstream ss(spec.substr(colon + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "causal") {
      causal = true;
      continue;
    }
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("bad shape item '" + item + "'; " + usage);
    const std::string key = item.substr(0, eq);
    long long val = 0;
    try {
      val = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw std::invalid_argument("bad number in '" + item + "'; " + usage);
    }
    if (val <= 0) throw std::invalid_argument("'" + item + "' must be positive; " + usage);
    if (key == "b") b = val;
    else if (key == "h") h = val;
    else if (key == "kv") kv = val;
    else if (key == "n") n = val;
    else if (key == "nk") nk = val;
    else if (key == "d") d = val;
    else if (key == "ctx") ctx = val;
    else if (key == "bs") bs = val;
    else if (key == "m") m = val;
    else if (key == "k") k = val;
    else if (key == "rows") rows = val;
    else if (key == "cols") cols = val;
    else throw std::invalid_argument("unknown shape key '" + key + "'; " + usage);
  }
  if (kv < 0) kv = h;
  Shape s;
  if (fam == "prefill") {
    s = prefill_shape(int(b), int(h), int(kv), int(n), int(nk > 0 ? nk : n), int(d > 0 ? d : 64),
                      causal);
  } else if (fam == "decode") {
    s = decode_shape(int(b), int(h), int(kv), int(ctx), int(d > 0 ? d : 128), int(bs));
  } else {
    if (fam == "vector") s.family = Family::kVector;
    else if (fam == "matmul") s.family = Family::kMatmul;
    else if (fam == "reduce") s.family = Family::kRowReduce;
    else if (fam == "softmax") s.family = Family::kSoftmax;
    else throw std::invalid_argument("unknown shape family '" + fam + "'; " + usage);
    s.n = n;
    s.m = int(m);
    s.nn = int(n);
    s.k = int(k);
    s.rows = int(rows);
    s.cols = int(cols);
    s.name = make_name(s);
  }
  s.from_grid = false;
  return s;
}

double shape_flops(const Shape& s) {
  switch (s.family) {
    case Family::kMatmul: return 2.0 * s.m * s.nn * s.k;
    case Family::kPrefill: {
      // Two GEMMs (Q·Kᵀ and P·V) of 2·Nq·Nk·D each per (batch, query head). Causal: count
      // half, the convention FlashAttention's papers use, so causal and full rows compare.
      const auto& p = s.attn;
      const double f = 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
      return p.causal ? 0.5 * f : f;
    }
    case Family::kDecode:
      return 4.0 * s.paged.batch * s.paged.heads_q * double(s.context) * s.paged.head_dim;
    default: return 0.0;  // bandwidth kernels: FLOP/s says nothing about them
  }
}

double shape_bytes(const Shape& s) {
  const double f = sizeof(float);
  switch (s.family) {
    case Family::kVector: return 3.0 * f * double(s.n);                        // a, b read; c written
    case Family::kMatmul: return f * (double(s.m) * s.k + double(s.nn) * s.k + double(s.m) * s.nn);
    case Family::kRowReduce: return f * (double(s.rows) * s.cols + 2.0 * s.rows);  // x; max, sum
    case Family::kSoftmax: return 2.0 * f * double(s.rows) * s.cols;                // x; y
    case Family::kPrefill: {
      const auto& p = s.attn;
      return f * double(2 * p.q_elems() + 2 * p.kv_elems());  // Q, K, V read; O written
    }
    case Family::kDecode: {
      const auto& p = s.paged;
      const double kv = 2.0 * f * p.batch * p.heads_kv * double(s.context) * p.head_dim;
      const double meta = 4.0 * (double(p.batch) * p.max_blocks_per_seq + p.batch);
      return kv + 2.0 * f * double(p.q_elems()) + meta;  // K, V, block table read; q in, o out
    }
  }
  return 0.0;
}

}  // namespace bench
