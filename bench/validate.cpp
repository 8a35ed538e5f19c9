// Before a kernel is timed, its output on a small shape that resembles the benchmark shape
// (same head_dim, mask, GQA group, block size, row length...) is compared with the CPU
// reference (common/reference.h) by the same compare() the tests use. A fast wrong kernel is
// worthless, and a solution can regress while someone tunes it: the "check" column says the
// number next to it belongs to a kernel that computed the right thing.
//
// Inputs here are course::random_normal draws (like the tests'); outputs are NaN-poisoned
// DeviceBuffers with guard regions, so "never written" and "wrote out of bounds" are caught too.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "bench.h"
#include "compare.h"
#include "device_buffer.h"
#include "device_compare.h"
#include "random.h"
#include "reference.h"

namespace bench {

std::string Check::label() const {
  switch (status) {
    case kOk: return "ok";
    case kFail: return "FAIL";
    case kUnsupported: return "unsupported";
    case kError: return "ERROR";
    case kSkipped: return "-";
  }
  return "?";
}

namespace {

using course::check_device_output;
using course::CompareResult;
using course::DeviceBuffer;
using course::Dims;
using course::Tolerance;

uint64_t seed_for(const std::string& what, int64_t i) { return course::case_seed("bench/" + what, i); }

DeviceBuffer<float> output_buffer(size_t n) {
  DeviceBuffer<float> b(n);
  b.poison();
  return b;
}

// Inputs and poison are written with cudaMemcpy from pageable memory, which may return before
// the data has landed; make sure it has before the kernel (on the bench's stream) reads it.
void inputs_ready() { CUDA_CHECK(cudaDeviceSynchronize()); }

// Folds one compare() into the running verdict (the worst one wins).
void merge(Check& c, const CompareResult& r, const std::string& what) {
  c.rel_l2 = std::max(c.rel_l2, r.rel_l2);
  if (!r.ok && c.status == Check::kOk) {
    c.status = Check::kFail;
    c.detail = what + ":\n" + r.report;
  }
}

void check_vector(const Kernel& kern, Check& c, cudaStream_t st) {
  const int64_t n = 100003;  // not a multiple of any block size
  const auto a = course::random_normal(n, seed_for("vector", 0));
  const auto b = course::random_normal(n, seed_for("vector", 1));
  DeviceBuffer<float> da(a), db(b);
  auto dc = output_buffer(n);
  inputs_ready();
  kern.vector(da.data(), db.data(), dc.data(), n, st);
  merge(c, check_device_output(dc, course::ref::add(a, b), Dims{{"i", n}}), "n=100003");
}

void check_matmul(const Kernel& kern, const Shape& s, Check& c, cudaStream_t st) {
  const int m = 67, n = 129, k = s.k;  // odd tile remainders, the benchmark's reduction length
  const auto a = course::random_normal(size_t(m) * k, seed_for("matmul", 0));
  const auto b = course::random_normal(size_t(n) * k, seed_for("matmul", 1));
  DeviceBuffer<float> da(a), db(b);
  auto dc = output_buffer(size_t(m) * n);
  inputs_ready();
  kern.matmul(da.data(), db.data(), dc.data(), m, n, k, st);
  merge(c, check_device_output(dc, course::ref::matmul_abt(a, b, m, n, k), Dims{{"r", m}, {"c", n}},
                            Tolerance::fp32_sum(k)),
        "m=67 n=129 k=" + std::to_string(k));
}

void check_rows(const Kernel& kern, const Shape& s, Check& c, cudaStream_t st) {
  const int rows = 7, cols = s.cols;  // the benchmark's row length: where row kernels break
  const auto x = course::random_normal(size_t(rows) * cols, seed_for("rows", cols), 0.f, 3.f);
  DeviceBuffer<float> dx(x);
  const std::string what = "rows=7 cols=" + std::to_string(cols);
  if (kern.family == Family::kRowReduce) {
    auto dmax = output_buffer(rows), dsum = output_buffer(rows);
    inputs_ready();
    kern.row_reduce(dx.data(), dmax.data(), dsum.data(), rows, cols, st);
    merge(c, check_device_output(dmax, course::ref::row_max(x, rows, cols), Dims{{"r", rows}}),
          what + " row_max");
    merge(c, check_device_output(dsum, course::ref::row_sum(x, rows, cols), Dims{{"r", rows}},
                                 Tolerance::fp32_sum(cols)),
          what + " row_sum");
  } else {
    auto dy = output_buffer(x.size());
    inputs_ready();
    kern.softmax(dx.data(), dy.data(), rows, cols, st);
    merge(c, check_device_output(dy, course::ref::softmax_rows(x, rows, cols),
                              Dims{{"r", rows}, {"c", cols}}),
          what);
  }
}

void check_prefill(const Kernel& kern, const Shape& s, Check& c, cudaStream_t st) {
  // Same D, mask and GQA group as the benchmark shape; sequence lengths that are not tile
  // multiples, and a Nq != Nk case for the bottom-right causal alignment.
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
    DeviceBuffer<float> dq(q), dk(k), dv(v);
    auto dout = output_buffer(p.o_elems());
    DeviceBuffer<float> ws(kern.workspace_bytes ? (kern.workspace_bytes(p) + 3) / 4 : 1);
    inputs_ready();
    kern.prefill(dq.data(), dk.data(), dv.data(), dout.data(), ws.data(), p, st);
    std::ostringstream what;
    what << "b=2 hq=" << p.heads_q << " hkv=2 nq=" << p.seq_q << " nk=" << p.seq_k
         << " d=" << p.head_dim << (p.causal ? " causal" : "");
    merge(c, check_device_output(dout, course::ref::attention(q, k, v, p),
                              Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}}),
          what.str());
  }
}

void check_decode(const Kernel& kern, const Shape& s, Check& c, cudaStream_t st) {
  course::PagedParams p = s.paged;
  const std::vector<int32_t> lens = {1, p.block_size + 1, 300};  // partial last blocks
  p.batch = int(lens.size());
  p.max_blocks_per_seq = (300 + p.block_size - 1) / p.block_size;
  int used = 0;
  for (int32_t l : lens) used += (l + p.block_size - 1) / p.block_size;
  p.num_blocks = used + 3;  // spare blocks no sequence uses
  // Physical blocks in shuffled order, so a kernel that ignores the block table fails.
  std::vector<int32_t> perm(p.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  course::Rng rng(seed_for("decode_perm", 0));
  for (int i = p.num_blocks - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform_int(0, i)]);
  std::vector<int32_t> table(size_t(p.batch) * p.max_blocks_per_seq, 0);
  int next = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int j = 0; j < (lens[b] + p.block_size - 1) / p.block_size; ++j)
      table[size_t(b) * p.max_blocks_per_seq + j] = perm[next++];
  auto kc = course::random_normal(p.cache_elems(), seed_for("decode_k", 0));
  auto vc = course::random_normal(p.cache_elems(), seed_for("decode_v", 0));
  // Every slot no sequence owns holds NaN: reading one poisons the output.
  std::vector<char> owned(p.cache_elems(), 0);
  const size_t block_elems = size_t(p.heads_kv) * p.block_size * p.head_dim;
  for (int b = 0; b < p.batch; ++b)
    for (int t = 0; t < lens[b]; ++t) {
      const size_t blk = table[size_t(b) * p.max_blocks_per_seq + t / p.block_size];
      for (int h = 0; h < p.heads_kv; ++h)
        for (int d = 0; d < p.head_dim; ++d)
          owned[blk * block_elems + (size_t(h) * p.block_size + t % p.block_size) * p.head_dim + d] = 1;
    }
  for (size_t i = 0; i < owned.size(); ++i)
    if (!owned[i]) kc[i] = vc[i] = std::nanf("");
  const auto q = course::random_normal(p.q_elems(), seed_for("decode_q", 0));
  DeviceBuffer<float> dq(q), dk(kc), dv(vc);
  DeviceBuffer<int32_t> dt(table), dl(lens);
  auto dout = output_buffer(p.q_elems());
  inputs_ready();
  kern.paged(dq.data(), dk.data(), dv.data(), dt.data(), dl.data(), dout.data(), p, st);
  std::ostringstream what;
  what << "context_lens={1," << p.block_size + 1 << ",300} hq=" << p.heads_q
       << " hkv=" << p.heads_kv << " d=" << p.head_dim << " bs=" << p.block_size;
  merge(c, check_device_output(dout, course::ref::paged_decode_attention(q, kc, vc, table, lens, p),
                            Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}}),
        what.str());
}

// What the validation depends on, so each (kernel, key) is validated once per run.
std::string validation_key(const Shape& s) {
  std::ostringstream o;
  switch (s.family) {
    case Family::kMatmul: o << "k" << s.k; break;
    case Family::kRowReduce:
    case Family::kSoftmax: o << "c" << s.cols; break;
    case Family::kPrefill:
      o << "g" << s.attn.group_size() << "d" << s.attn.head_dim << "c" << s.attn.causal;
      break;
    case Family::kDecode:
      o << "h" << s.paged.heads_q << "kv" << s.paged.heads_kv << "d" << s.paged.head_dim << "bs"
        << s.paged.block_size;
      break;
    default: break;
  }
  return o.str();
}

}  // namespace

Check validate(const Kernel& kern, const Shape& s, cudaStream_t stream) {
  static std::map<std::string, Check> cache;
  const std::string key = kern.name + "|" + validation_key(s);
  const auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second;

  Check c;
  c.status = Check::kOk;
  try {
    switch (s.family) {
      case Family::kVector: check_vector(kern, c, stream); break;
      case Family::kMatmul: check_matmul(kern, s, c, stream); break;
      case Family::kRowReduce:
      case Family::kSoftmax: check_rows(kern, s, c, stream); break;
      case Family::kPrefill: check_prefill(kern, s, c, stream); break;
      case Family::kDecode: check_decode(kern, s, c, stream); break;
    }
  } catch (const std::invalid_argument& e) {
    c.status = Check::kUnsupported;  // the launcher's contract excludes this shape
    c.detail = e.what();
  } catch (const std::exception& e) {
    c.status = Check::kError;
    c.detail = e.what();
    cudaGetLastError();  // clear a non-sticky error so the next kernel starts clean
  }
  cache[key] = c;
  return c;
}

}  // namespace bench
