// Tests for day10/08_kv_compress: KV-cache compression in the manner of H2O / SnapKV.
//
// Every case builds the hard paged cache of common/paged_cache.h (physical blocks permuted, NaN
// in every slot no sequence owns), rounds q, K and V to fp16 once on the host, runs the launcher
// with every output and the workspace NaN-poisoned, downloads everything and judges it on the CPU:
//   * lengths and block table: min(L, budget) and b · out_blocks + i, exactly;
//   * the selection, per (sequence, KV head), against the CPU reference's pooled scores
//     (course::ref, double): ascending, −1 past the new length, every sink and recent token kept,
//     and the kept candidates a top-k: no dropped candidate scores above a kept one by more than
//     fp32 rounding (rtol 1e-4). Where scores tie exactly (identical keys) the kept set must be
//     the reference's, bit for bit: the lower index wins;
//   * the copy: slot r of the new cache holds token kept_indices[r]'s K and V bits, and every
//     slot at or past the new length still holds the poison (not written);
//   * decode over the compressed cache (CPU reference, paged) equals dense attention over the
//     kept tokens gathered from the input cache (CPU reference, dense).
// Inputs are normal(0, 1) unless a case shapes them: sinks and recent tokens that score lowest,
// identical keys (exact ties), heavy hitters, and window logits that all lie near −10^4.
// The test binary links only this exercise: 06's kernel is not needed to check the layout.
//
// The three [index] cases check the four index helpers on the CPU alone (no CUDA call; one case
// checks kv_dest_slot and kv_pool_row together):
// `build/bin/sol_08_kv_compress "[index]"` runs them without a GPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "08_kv_compress.h"
#include "gpu_test.h"
#include "paged_cache.h"
#include "reference.h"
#include "reference_kv_compress.h"

namespace {

using course::DeviceBuffer;

const __half* as_half(const DeviceBuffer<uint16_t>& b) { return reinterpret_cast<const __half*>(b.data()); }
__half* as_half(DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__half*>(b.data()); }

KvCompressParams params(int window, int n_sink, int n_recent, int budget, int pool_kernel) {
  KvCompressParams c;
  c.window = window;
  c.n_sink = n_sink;
  c.n_recent = n_recent;
  c.budget = budget;
  c.pool_kernel = pool_kernel;
  return c;
}

struct Case {
  int heads_q, heads_kv, head_dim, block_size;
  std::vector<int32_t> lens;  // one per sequence
  KvCompressParams c;
};

std::string describe(const Case& x) {
  std::string lens;
  for (int32_t n : x.lens) lens += (lens.empty() ? "" : ",") + std::to_string(n);
  return "Hq=" + std::to_string(x.heads_q) + " Hkv=" + std::to_string(x.heads_kv) + " D=" + std::to_string(x.head_dim) +
         " block_size=" + std::to_string(x.block_size) + " context_lens={" + lens +
         "} window=" + std::to_string(x.c.window) + " n_sink=" + std::to_string(x.c.n_sink) +
         " n_recent=" + std::to_string(x.c.n_recent) + " budget=" + std::to_string(x.c.budget) +
         " pool_kernel=" + std::to_string(x.c.pool_kernel);
}

// One uploaded problem.
struct Problem {
  course::PagedCache pc;  // K and V rounded to fp16 (NaN stays NaN)
  std::vector<float> q;   // q_window [B, Hq, W, D], rounded to fp16
  KvCompressParams c;
  std::vector<uint16_t> k_bits, v_bits;  // the input cache as the GPU sees it
  DeviceBuffer<uint16_t> d_q, d_k, d_v;
  DeviceBuffer<int32_t> d_table, d_lens;
};

int64_t width(const course::PagedParams& p) { return int64_t(p.max_blocks_per_seq) * p.block_size; }

// Row (in units of D) of token t of sequence b, KV head hk, in the input cache.
size_t input_row(const Problem& pr, int b, int t, int hk) {
  const auto& p = pr.pc.p;
  const int block = pr.pc.table[size_t(b) * p.max_blocks_per_seq + t / p.block_size];
  return (size_t(block) * p.heads_kv + hk) * p.block_size + t % p.block_size;
}

// The cache of common/paged_cache.h and normal window queries; `edit` may change q, K and V
// (fp32, rounded afterwards) before the upload.
template <class Edit>
Problem make_problem(const Case& x, uint64_t seed, Edit edit) {
  Problem pr;
  pr.c = x.c;
  pr.pc = course::build_paged_cache(x.lens, x.heads_q, x.heads_kv, x.head_dim, x.block_size, seed);
  pr.q = course::random_normal(size_t(pr.pc.p.batch) * x.heads_q * x.c.window * x.head_dim, seed + 1);
  edit(pr);
  pr.q = course::round_to_half(pr.q);
  pr.pc.k = course::round_to_half(pr.pc.k);
  pr.pc.v = course::round_to_half(pr.pc.v);
  pr.k_bits = course::to_half_bits(pr.pc.k);
  pr.v_bits = course::to_half_bits(pr.pc.v);
  pr.d_q = course::to_device(course::to_half_bits(pr.q));
  pr.d_k = course::to_device(pr.k_bits);
  pr.d_v = course::to_device(pr.v_bits);
  pr.d_table = course::to_device(pr.pc.table);
  pr.d_lens = course::to_device(pr.pc.lens);
  return pr;
}
Problem make_problem(const Case& x, uint64_t seed) {
  return make_problem(x, seed, [](Problem&) {});
}

// What the launcher left in its outputs.
struct Outputs {
  course::PagedParams op;      // the new cache's params
  std::vector<uint16_t> k, v;  // the new pool, fp16 bits
  std::vector<int32_t> table, lens, kept;
};

template <class T>
void require_guards(const DeviceBuffer<T>& buf, const char* name) {
  const std::string damage = buf.guard_damage();
  if (!damage.empty()) FAIL_CHECK(name << ": out-of-bounds write: " << damage);
}

// Runs kv_compress with every output and the workspace NaN-poisoned and downloads the outputs.
Outputs run(const Problem& pr) {
  const course::PagedParams& p = pr.pc.p;
  Outputs out;
  out.op = kv_compress_out_params(p, pr.c);
  const int ob = out.op.max_blocks_per_seq;
  DeviceBuffer<uint16_t> k_out(size_t(out.op.cache_elems())), v_out(size_t(out.op.cache_elems()));
  DeviceBuffer<int32_t> table(size_t(p.batch) * ob), lens(size_t(p.batch));
  DeviceBuffer<int32_t> kept(size_t(p.batch) * p.heads_kv * pr.c.budget);
  const size_t ws_bytes = kv_compress_workspace_bytes(p, pr.c);
  DeviceBuffer<float> ws(std::max<size_t>((ws_bytes + 3) / 4, 1));
  k_out.poison();
  v_out.poison();
  table.poison();
  lens.poison();
  kept.poison();
  ws.poison();  // a statistic or score nobody wrote is NaN
  kv_compress(as_half(pr.d_q), as_half(pr.d_k), as_half(pr.d_v), pr.d_table.data(), pr.d_lens.data(), as_half(k_out),
              as_half(v_out), table.data(), lens.data(), kept.data(), ws.data(), p, pr.c);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  require_guards(k_out, "k_out");
  require_guards(v_out, "v_out");
  require_guards(table, "out_block_table");
  require_guards(lens, "out_context_lens");
  require_guards(kept, "kept_indices");
  require_guards(ws, "workspace");
  out.k = k_out.download();
  out.v = v_out.download();
  out.table = table.download();
  out.lens = lens.download();
  out.kept = kept.download();
  return out;
}

// The reference selection and its pooled scores for a problem.
struct Reference {
  std::vector<int32_t> kept;
  std::vector<double> pooled;
};

Reference reference(const Problem& pr) {
  course::ref::KvSelectParams rc;
  rc.window = pr.c.window;
  rc.n_sink = pr.c.n_sink;
  rc.n_recent = pr.c.n_recent;
  rc.budget = pr.c.budget;
  rc.pool_kernel = pr.c.pool_kernel;
  Reference r;
  r.kept = course::ref::kv_compress_kept(pr.q, pr.pc.k, pr.pc.table, pr.pc.lens, pr.pc.p, rc, &r.pooled);
  return r;
}

std::string where(const Problem& pr, int b, int hk) {
  return "sequence " + std::to_string(b) + " (L = " + std::to_string(pr.pc.lens[size_t(b)]) + "), KV head " +
         std::to_string(hk) + ": ";
}

// The new length and block table of every sequence; "" when right.
std::string lengths_error(const Problem& pr, const Outputs& out) {
  const int ob = out.op.max_blocks_per_seq;
  for (int b = 0; b < pr.pc.p.batch; ++b) {
    const int want = std::min(pr.pc.lens[size_t(b)], pr.c.budget);
    if (out.lens[size_t(b)] != want)
      return "out_context_lens[" + std::to_string(b) + "] = " + std::to_string(out.lens[size_t(b)]) +
             ", expected min(L = " + std::to_string(pr.pc.lens[size_t(b)]) +
             ", budget = " + std::to_string(pr.c.budget) + ") = " + std::to_string(want);
    for (int i = 0; i < ob; ++i)
      if (out.table[size_t(b) * ob + i] != b * ob + i)
        return "out_block_table[" + std::to_string(b) + "][" + std::to_string(i) +
               "] = " + std::to_string(out.table[size_t(b) * ob + i]) +
               ", expected b · out_blocks + i = " + std::to_string(b * ob + i);
  }
  return "";
}

// The kept tokens of (b, hk) judged against the reference's pooled scores; "" when right.
std::string selection_error(const Problem& pr, const Outputs& out, const Reference& ref, int b, int hk) {
  const auto& p = pr.pc.p;
  const int len = pr.pc.lens[size_t(b)], budget = pr.c.budget, n = std::min(len, budget);
  const int32_t* row = &out.kept[(size_t(b) * p.heads_kv + hk) * budget];
  const std::string at = where(pr, b, hk);
  for (int r = 0; r < n; ++r) {
    if (row[r] < 0 || row[r] >= len)
      return at + "kept_indices[" + std::to_string(r) + "] = " + std::to_string(row[r]) + ", outside [0, L)";
    if (r > 0 && row[r] <= row[r - 1])
      return at + "kept_indices is not ascending: rank " + std::to_string(r - 1) + " holds " +
             std::to_string(row[r - 1]) + ", rank " + std::to_string(r) + " holds " + std::to_string(row[r]);
  }
  for (int r = n; r < budget; ++r)
    if (row[r] != -1)
      return at + "kept_indices[" + std::to_string(r) + "] = " + std::to_string(row[r]) +
             ": entries at or past the new length " + std::to_string(n) + " must be -1";
  if (len <= budget) {
    for (int r = 0; r < n; ++r)
      if (row[r] != r)
        return at + "L <= budget keeps every token in order, but rank " + std::to_string(r) + " holds " +
               std::to_string(row[r]);
    return "";
  }
  std::vector<char> kept(size_t(len), 0);
  for (int r = 0; r < n; ++r) kept[size_t(row[r])] = 1;
  for (int t = 0; t < pr.c.n_sink; ++t)
    if (!kept[size_t(t)])
      return at + "sink token " + std::to_string(t) + " was dropped (tokens [0, n_sink) are always kept)";
  for (int t = len - pr.c.n_recent; t < len; ++t)
    if (!kept[size_t(t)])
      return at + "recent token " + std::to_string(t) + " was dropped (tokens [L - n_recent, L) are always kept)";
  const double* s = &ref.pooled[(size_t(b) * p.heads_kv + hk) * width(p)];
  double kept_min = std::numeric_limits<double>::infinity(), drop_max = -kept_min;
  int kept_arg = -1, drop_arg = -1;
  for (int t = pr.c.n_sink; t < len - pr.c.n_recent; ++t) {
    if (kept[size_t(t)] && s[t] < kept_min) kept_min = s[t], kept_arg = t;
    if (!kept[size_t(t)] && s[t] > drop_max) drop_max = s[t], drop_arg = t;
  }
  const double tol = 1e-4 * std::max(std::fabs(kept_min), std::fabs(drop_max)) + 1e-7 * p.group_size() * pr.c.window;
  if (kept_arg >= 0 && drop_arg >= 0 && drop_max > kept_min + tol)
    return at + "candidate " + std::to_string(drop_arg) + " (reference pooled score " + std::to_string(drop_max) +
           ") was dropped while candidate " + std::to_string(kept_arg) + " (score " + std::to_string(kept_min) +
           ") was kept: the kept candidates must be the budget - n_sink - n_recent with the highest pooled score";
  return "";
}

// Slot r of the new cache holds token kept[r]'s rows, bit for bit; slots past the new length are
// untouched. "" when right.
std::string copy_error(const Problem& pr, const Outputs& out, int b, int hk) {
  const auto& p = pr.pc.p;
  const int D = p.head_dim, bs = p.block_size, ob = out.op.max_blocks_per_seq;
  const int len = pr.pc.lens[size_t(b)], n = std::min(len, pr.c.budget);
  const int32_t* row = &out.kept[(size_t(b) * p.heads_kv + hk) * pr.c.budget];
  const std::string at = where(pr, b, hk);
  for (int r = 0; r < ob * bs; ++r) {
    const size_t dst = ((size_t(b) * ob + r / bs) * p.heads_kv + hk) * bs + r % bs;
    if (r >= n) {
      for (int d = 0; d < D; ++d)
        if (out.k[dst * D + d] != course::kPoisonF16Bits || out.v[dst * D + d] != course::kPoisonF16Bits)
          return at + "slot of rank " + std::to_string(r) + " (at or past the new length " + std::to_string(n) +
                 ") was written: block " + std::to_string(b * ob + r / bs) + ", slot " + std::to_string(r % bs);
      continue;
    }
    const int t = row[r];
    if (t < 0 || t >= len) continue;  // selection_error reports it
    const size_t src = input_row(pr, b, t, hk);
    for (int d = 0; d < D; ++d) {
      const bool k_ok = out.k[dst * D + d] == pr.k_bits[src * D + d],
                 v_ok = out.v[dst * D + d] == pr.v_bits[src * D + d];
      if (!k_ok || !v_ok)
        return at + "rank " + std::to_string(r) + " (token " + std::to_string(t) + "), d = " + std::to_string(d) +
               ": " + (k_ok ? "V" : "K") + " differs from the input token's (expected in block " +
               std::to_string(b * ob + r / bs) + ", slot " + std::to_string(r % bs) + ", copied bit for bit)";
    }
  }
  return "";
}

// Runs `error(b, hk)` over every (sequence, KV head), reports the first few failures.
template <class Error>
void check_heads(const Problem& pr, const char* what, Error error) {
  int failures = 0, heads = 0;
  for (int b = 0; b < pr.pc.p.batch; ++b)
    for (int hk = 0; hk < pr.pc.p.heads_kv; ++hk) {
      ++heads;
      const std::string err = error(b, hk);
      if (err.empty()) continue;
      if (++failures <= 4) FAIL_CHECK(what << ": " << err);
    }
  INFO(failures << " of " << heads << " (sequence, KV head) pairs have a wrong " << what);
  CHECK(failures == 0);
}

// The full verdict on one run: lengths and table, selection (top-k against the reference's
// pooled scores, or exactly the reference's kept set when `exact`), the copy.
void check_run(const Problem& pr, const Outputs& out, const Reference& ref, bool exact = false) {
  const std::string len_err = lengths_error(pr, out);
  if (!len_err.empty()) FAIL_CHECK(len_err);
  check_heads(pr, "selection", [&](int b, int hk) { return selection_error(pr, out, ref, b, hk); });
  if (exact) {
    check_heads(pr, "kept set (exact ties: the lower index wins)", [&](int b, int hk) -> std::string {
      const size_t base = (size_t(b) * pr.pc.p.heads_kv + hk) * pr.c.budget;
      for (int r = 0; r < pr.c.budget; ++r)
        if (out.kept[base + r] != ref.kept[base + r])
          return where(pr, b, hk) + "rank " + std::to_string(r) + " holds token " + std::to_string(out.kept[base + r]) +
                 ", the reference keeps " + std::to_string(ref.kept[base + r]) +
                 " (equal scores: the lower token index is kept first)";
      return "";
    });
  }
  check_heads(pr, "copy into the new cache", [&](int b, int hk) { return copy_error(pr, out, b, hk); });
}

void run_and_check(const Case& x, uint64_t seed) {
  INFO(describe(x) << ", seed = " << seed << " (set COURSE_SEED to vary)");
  Problem pr = make_problem(x, seed);
  const Outputs out = run(pr);
  check_run(pr, out, reference(pr));
}

// Window rows that share a direction, as a model's queries do: q = u_hk + 0.5 · noise for every
// row of the query heads of KV head hk. Returns u [B, Hkv, D].
std::vector<float> shared_direction_queries(Problem& pr, uint64_t seed) {
  const auto& p = pr.pc.p;
  const int W = pr.c.window, D = p.head_dim, G = p.group_size();
  const std::vector<float> u = course::random_normal(size_t(p.batch) * p.heads_kv * D, seed);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < W; ++i)
        for (int d = 0; d < D; ++d) {
          float& x = pr.q[((size_t(b) * p.heads_q + h) * W + i) * D + d];
          x = u[(size_t(b) * p.heads_kv + h / G) * D + d] + 0.5f * x;
        }
  return u;
}

// Sets K of token t of (b, hk) in the host cache to `scale` · u_(b, hk).
void set_key(Problem& pr, const std::vector<float>& u, int b, int hk, int t, float scale) {
  const int D = pr.pc.p.head_dim;
  const size_t row = input_row(pr, b, t, hk);
  for (int d = 0; d < D; ++d) pr.pc.k[row * D + d] = scale * u[(size_t(b) * pr.pc.p.heads_kv + hk) * D + d];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Index helpers, on the CPU alone.

TEST_CASE("kv_keep_plan: sinks, recent window and top-k count for every len up to 60", "[index][quick]") {
  long long problems = 0, failures = 0;
  for (int len = 0; len <= 60; ++len)
    for (int n_sink = 0; n_sink <= 5; ++n_sink)
      for (int n_recent = 0; n_recent <= 6; ++n_recent)
        for (int budget = std::max(1, n_sink + n_recent); budget <= 45; ++budget) {
          ++problems;
          const KvKeepPlan plan = kv_keep_plan(len, n_sink, n_recent, budget);
          const std::string at = "len " + std::to_string(len) + ", n_sink " + std::to_string(n_sink) + ", n_recent " +
                                 std::to_string(n_recent) + ", budget " + std::to_string(budget) + ": got {sink_end " +
                                 std::to_string(plan.sink_end) + ", recent_begin " + std::to_string(plan.recent_begin) +
                                 ", topk " + std::to_string(plan.topk) + ", kept " + std::to_string(plan.kept) + "}, ";
          std::string err;
          const bool whole = len <= budget;
          const KvKeepPlan want = whole ? KvKeepPlan{len, len, 0, len}
                                        : KvKeepPlan{n_sink, len - n_recent, budget - n_sink - n_recent, budget};
          // The always-kept tokens, one by one: every token when len <= budget, else the sinks and the recent ones.
          int always = 0;
          for (int t = 0; t < len && err.empty(); ++t) {
            const bool want_always = whole || t < n_sink || t >= len - n_recent;
            const bool got_always = t < plan.sink_end || t >= plan.recent_begin;
            always += want_always;
            if (want_always != got_always)
              err = "token " + std::to_string(t) +
                    (want_always ? " must be kept whatever its score" : " must be a candidate") +
                    (whole ? " (len <= budget: every token is kept)"
                           : " (sinks [0, n_sink), recent [len - n_recent, len))");
          }
          if (err.empty() && plan.kept != std::min(len, budget))
            err = "kept must be min(len, budget) = " + std::to_string(std::min(len, budget));
          if (err.empty() && plan.topk != std::min(len, budget) - always)
            err = "topk must be the places left after the sinks and the recent window: " +
                  std::to_string(std::min(len, budget) - always);
          if (err.empty() && (plan.sink_end != want.sink_end || plan.recent_begin != want.recent_begin))
            err = "expected the header's {" + std::to_string(want.sink_end) + ", " + std::to_string(want.recent_begin) +
                  ", " + std::to_string(want.topk) + ", " + std::to_string(want.kept) + "}";
          if (err.empty()) continue;
          if (++failures <= 5) FAIL_CHECK(at + err);
        }
  INFO(failures << " of " << problems << " (len, n_sink, n_recent, budget) plans are wrong");
  CHECK(failures == 0);
}

TEST_CASE("kv_pool_range: the neighbours of every key, every len up to 40 and kernel up to 31", "[index][quick]") {
  long long problems = 0, failures = 0;
  for (int len = 1; len <= 40; ++len)
    for (int kernel = 1; kernel <= 31; kernel += 2)
      for (int t = 0; t < len; ++t) {
        ++problems;
        const KvRange got = kv_pool_range(t, len, kernel);
        const int r = (kernel - 1) / 2;
        const int lo = std::max(0, t - r), hi = std::min(len, t + r + 1);
        if (got.begin == lo && got.end == hi) continue;
        if (++failures <= 5)
          FAIL_CHECK("key " << t << " of " << len << ", pool_kernel " << kernel << ": got [" << got.begin << ", "
                            << got.end << "), expected [" << lo << ", " << hi << "): " << r
                            << " neighbours on each side, cut to the sequence [0, len)");
      }
  INFO(failures << " of " << problems << " (t, len, pool_kernel) ranges are wrong");
  CHECK(failures == 0);
}

TEST_CASE("kv_dest_slot and kv_pool_row: every kept rank gets its own slot in its sequence's blocks",
          "[index][quick]") {
  long long problems = 0, failures = 0;
  for (int batch = 1; batch <= 3; ++batch)
    for (int heads_kv = 1; heads_kv <= 3; ++heads_kv)
      for (int bs = 1; bs <= 9; ++bs)
        for (int budget = 1; budget <= 40; ++budget) {
          const int ob = (budget + bs - 1) / bs;
          const long long rows = (long long)batch * ob * heads_kv * bs;
          std::set<long long> seen;
          for (int b = 0; b < batch; ++b)
            for (int hk = 0; hk < heads_kv; ++hk)
              for (int r = 0; r < budget; ++r) {
                ++problems;
                const KvSlot s = kv_dest_slot(b, r, ob, bs);
                const long long row = kv_pool_row(s.block, hk, s.slot, heads_kv, bs);
                std::string err;
                if (s.block != b * ob + r / bs || s.slot != r % bs)
                  err = "kv_dest_slot gave block " + std::to_string(s.block) + ", slot " + std::to_string(s.slot) +
                        ", expected block b · out_blocks + r / block_size = " + std::to_string(b * ob + r / bs) +
                        ", slot r % block_size = " + std::to_string(r % bs);
                else if (row != ((long long)s.block * heads_kv + hk) * bs + s.slot)
                  err = "kv_pool_row gave row " + std::to_string(row) +
                        ", expected (block · Hkv + hk) · block_size + slot = " +
                        std::to_string(((long long)s.block * heads_kv + hk) * bs + s.slot);
                else if (row < 0 || row >= rows || !seen.insert(row).second)
                  err = "row " + std::to_string(row) + " is outside the pool or taken twice";
                if (err.empty()) continue;
                if (++failures <= 5)
                  FAIL_CHECK("batch " << batch << ", Hkv " << heads_kv << ", block_size " << bs << ", budget " << budget
                                      << " (out_blocks " << ob << "), sequence " << b << ", head " << hk << ", rank "
                                      << r << ": " << err);
              }
        }
  // Pools past 2^31 rows: the row needs 64 bits.
  ++problems;
  const long long big = kv_pool_row(1 << 30, 7, 15, 8, 16);
  if (big != ((1LL << 30) * 8 + 7) * 16 + 15) {
    ++failures;
    FAIL_CHECK("kv_pool_row(block 2^30, hk 7, slot 15, Hkv 8, block_size 16) = "
               << big << ", expected " << ((1LL << 30) * 8 + 7) * 16 + 15 << " (compute it in 64 bits)");
  }
  INFO(failures << " of " << problems << " slots are wrong");
  CHECK(failures == 0);
}

// ---------------------------------------------------------------------------------------------
// The launcher.

TEST_CASE("kv_compress: small GQA batches around the budget, selection and copy", "[day10][kv_compress][quick]") {
  run_and_check({4, 2, 64, 16, {0, 1, 40, 63, 64, 65, 200, 700}, params(8, 4, 8, 64, 7)},
                course::case_seed("kv_compress_quick", 0));
  run_and_check({8, 1, 32, 8, {3, 100, 33}, params(4, 0, 4, 32, 1)}, course::case_seed("kv_compress_quick", 1));
}

TEST_CASE("kv_compress: head ratios (32,8) (8,1) (6,6) (12,4), block sizes 1..32, D 32/64/128, pooling 1/3/7",
          "[day10][kv_compress]") {
  const std::vector<Case> cases{
      {32, 8, 128, 16, {1000, 129, 3000}, params(16, 4, 16, 256, 7)},
      {8, 1, 64, 7, {500, 77, 1200, 1}, params(32, 2, 32, 100, 3)},
      {6, 6, 32, 32, {257, 1024, 600}, params(5, 0, 0, 200, 1)},
      {12, 4, 64, 1, {90, 300}, params(3, 1, 5, 64, 7)},
      {4, 2, 128, 16, {2000, 2048, 2049}, params(64, 4, 64, 2048, 5)},
      {2, 1, 64, 16, {4000}, params(1, 8, 1, 17, 31)},
  };
  for (size_t i = 0; i < cases.size(); ++i) run_and_check(cases[i], course::case_seed("kv_compress_grid", int64_t(i)));
}

TEST_CASE("kv_compress: sinks and the recent window are kept even where their keys score lowest",
          "[day10][kv_compress][quick]") {
  // The window rows share a direction u per KV head; the sinks' and recent tokens' keys point
  // the other way (k = −u: logits ~ −√D, the others ~ N(0, 1.25)), so their scores are the
  // lowest of all. No pooling: a sink's score is its own. Any that a kernel ranks with the
  // candidates is dropped.
  const Case x{8, 2, 64, 16, {300, 1000, 129}, params(8, 4, 16, 64, 1)};
  const uint64_t seed = course::case_seed("kv_compress_sinks", 0);
  INFO(describe(x) << ", seed = " << seed);
  Problem pr = make_problem(x, seed, [&](Problem& pr) {
    const std::vector<float> u = shared_direction_queries(pr, seed + 7);
    for (int b = 0; b < pr.pc.p.batch; ++b) {
      const int len = pr.pc.lens[size_t(b)];
      for (int hk = 0; hk < pr.pc.p.heads_kv; ++hk) {
        for (int t = 0; t < x.c.n_sink; ++t) set_key(pr, u, b, hk, t, -1.f);
        for (int t = len - x.c.n_recent; t < len; ++t) set_key(pr, u, b, hk, t, -1.f);
      }
    }
  });
  const Reference ref = reference(pr);
  const Outputs out = run(pr);
  check_run(pr, out, ref);
}

TEST_CASE("kv_compress: ties go to the lower token index (identical keys)", "[day10][kv_compress][quick]") {
  // Every key of a head equal: every candidate (all of them seen by every window row, as
  // n_recent >= W) gets the same score, bit for bit, on the GPU as on the CPU, so the kept
  // candidates must be exactly the lowest-indexed ones. With pooling too (a max of equal values).
  for (int pool : {1, 7}) {
    const Case x{4, 2, 64, 16, {300, 65, 1000}, params(8, 4, 8, 64, pool)};
    const uint64_t seed = course::case_seed("kv_compress_ties", pool);
    INFO(describe(x) << ", all keys of a head equal, seed = " << seed);
    Problem pr = make_problem(x, seed, [&](Problem& pr) {
      const std::vector<float> u =
          course::random_normal(size_t(pr.pc.p.batch) * pr.pc.p.heads_kv * pr.pc.p.head_dim, seed + 3);
      for (int b = 0; b < pr.pc.p.batch; ++b)
        for (int hk = 0; hk < pr.pc.p.heads_kv; ++hk)
          for (int t = 0; t < pr.pc.lens[size_t(b)]; ++t) set_key(pr, u, b, hk, t, 1.f);
    });
    const Reference ref = reference(pr);
    const Outputs out = run(pr);
    check_run(pr, out, ref, /*exact=*/true);
  }
  // Two levels, no pooling: every third key is u (higher scores), the others w. The top-k takes
  // the u keys first, lowest index first, then, if places are left, the w keys, lowest first.
  for (int budget : {64, 200}) {
    const Case x{8, 2, 32, 8, {400, 301}, params(4, 2, 4, budget, 1)};
    const uint64_t seed = course::case_seed("kv_compress_ties_two_levels", budget);
    INFO(describe(x) << ", keys alternate between two vectors, seed = " << seed);
    Problem pr = make_problem(x, seed, [&](Problem& pr) {
      const auto& p = pr.pc.p;
      const std::vector<float> u = shared_direction_queries(pr, seed + 5);
      std::vector<float> w = course::random_normal(u.size(), seed + 6);
      for (int b = 0; b < p.batch; ++b)
        for (int hk = 0; hk < p.heads_kv; ++hk)
          for (int t = 0; t < pr.pc.lens[size_t(b)]; ++t) {
            if (t % 3 == 0)
              set_key(pr, u, b, hk, t, 0.3f);
            else
              set_key(pr, w, b, hk, t, 0.3f);
          }
    });
    const Reference ref = reference(pr);
    const Outputs out = run(pr);
    check_run(pr, out, ref, /*exact=*/true);
  }
}

TEST_CASE("kv_compress: window logits all near -1e4, far below 0, still rank the keys", "[day10][kv_compress][quick]") {
  // A window row's softmax statistics must start from m = −inf: every logit of a row may lie far
  // below 0. Here every logit of every window row is about −10^4 after the scale: dimension 0
  // carries a common offset (q_0 = −200 in every window row, k_0 = 400 in every key; D = 64,
  // scale 1/8), the other 63 the two levels of the tie test (every third key 0.3·u, the others
  // 0.3·w, against queries along u). The scores keep their two exact levels, so the kept set is
  // the reference's, bit for bit. A running max that starts at 0 instead stays 0, its
  // ℓ = Σ 2^(s − 0) underflows to 0, every probability becomes 0 · (1/0) = NaN, and the ranking
  // is gone.
  const Case x{8, 2, 64, 16, {400, 301, 129}, params(8, 4, 8, 64, 1)};
  const uint64_t seed = course::case_seed("kv_compress_negative_logits", 0);
  INFO(describe(x) << ", every window logit near -1e4, seed = " << seed);
  Problem pr = make_problem(x, seed, [&](Problem& pr) {
    const auto& p = pr.pc.p;
    const int D = p.head_dim;
    const std::vector<float> u = shared_direction_queries(pr, seed + 5);
    const std::vector<float> w = course::random_normal(u.size(), seed + 6);
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk)
        for (int t = 0; t < pr.pc.lens[size_t(b)]; ++t) {
          set_key(pr, t % 3 == 0 ? u : w, b, hk, t, 0.3f);
          pr.pc.k[input_row(pr, b, t, hk) * D] = 400.f;
        }
    for (size_t r = 0; r < pr.q.size() / size_t(D); ++r) pr.q[r * D] = -200.f;
  });
  REQUIRE(pr.pc.p.softmax_scale() == 0.125f);  // the construction: logits near −200 · 400 / 8 = −10^4
  const Reference ref = reference(pr);
  const Outputs out = run(pr);
  check_run(pr, out, ref, /*exact=*/true);
}

TEST_CASE("kv_compress: a few heavy-hitter keys per KV head are all kept, each head its own",
          "[day10][kv_compress][quick]") {
  // Window rows share a direction u per KV head; 6 keys per head (at different positions in
  // every head) are 0.6 · u, logits ~ 0.6·√D above the rest: H2O's heavy hitters. Every head
  // must keep its own six, wherever they sit among the candidates.
  const Case x{8, 4, 128, 16, {2000, 900}, params(16, 4, 16, 128, 7)};
  const uint64_t seed = course::case_seed("kv_compress_heavy", 0);
  INFO(describe(x) << ", seed = " << seed);
  std::vector<std::vector<int>> heavy;  // per (b, hk)
  Problem pr = make_problem(x, seed, [&](Problem& pr) {
    const std::vector<float> u = shared_direction_queries(pr, seed + 11);
    course::Rng rng(seed + 12);
    for (int b = 0; b < pr.pc.p.batch; ++b)
      for (int hk = 0; hk < pr.pc.p.heads_kv; ++hk) {
        const int len = pr.pc.lens[size_t(b)];
        std::set<int> pos;
        while (pos.size() < 6) pos.insert(int(rng.uniform_int(x.c.n_sink, len - x.c.n_recent - 1)));
        heavy.emplace_back(pos.begin(), pos.end());
        for (int t : pos) set_key(pr, u, b, hk, t, 0.6f);
      }
  });
  const Reference ref = reference(pr);
  const Outputs out = run(pr);
  check_run(pr, out, ref);
  for (int b = 0; b < pr.pc.p.batch; ++b)
    for (int hk = 0; hk < pr.pc.p.heads_kv; ++hk) {
      const size_t base = (size_t(b) * pr.pc.p.heads_kv + hk) * x.c.budget;
      const std::set<int> gpu(out.kept.begin() + int64_t(base), out.kept.begin() + int64_t(base) + x.c.budget);
      const std::set<int> cpu(ref.kept.begin() + int64_t(base), ref.kept.begin() + int64_t(base) + x.c.budget);
      for (int t : heavy[size_t(b) * pr.pc.p.heads_kv + hk]) {
        INFO("sequence " << b << ", KV head " << hk << ", heavy hitter at token " << t);
        REQUIRE(cpu.count(t) == 1);  // the construction works: the reference keeps it
        CHECK(gpu.count(t) == 1);
      }
    }
}

TEST_CASE("kv_compress: decode over the compressed cache equals dense attention over the kept tokens",
          "[day10][kv_compress][quick]") {
  // After the GPU compression, on the CPU: the paged decode reference over the new cache (its
  // pool, block table and lengths, exactly as 06's launcher would read them) against dense
  // attention over the kept tokens gathered from the input cache by kept_indices, per sequence.
  const Case x{8, 2, 64, 16, {0, 5, 64, 65, 500, 1500}, params(8, 4, 8, 64, 7)};
  const uint64_t seed = course::case_seed("kv_compress_decode", 0);
  INFO(describe(x) << ", seed = " << seed);
  Problem pr = make_problem(x, seed);
  const Outputs out = run(pr);
  check_run(pr, out, reference(pr));

  const auto& p = pr.pc.p;
  const int D = p.head_dim;
  const auto q = course::round_to_half(course::random_normal(size_t(p.q_elems()), seed + 99));
  const auto paged = course::ref::paged_decode_attention(
      q, course::half_bits_to_float(out.k), course::half_bits_to_float(out.v), out.table, out.lens, out.op);
  std::vector<float> dense(size_t(p.q_elems()), 0.f);
  for (int b = 0; b < p.batch; ++b) {
    const int n = std::min(pr.pc.lens[size_t(b)], x.c.budget);
    if (n == 0) continue;  // no token: zeros
    std::vector<float> k(size_t(p.heads_kv) * n * D), v(k.size());
    for (int hk = 0; hk < p.heads_kv; ++hk)
      for (int r = 0; r < n; ++r) {
        const int t = out.kept[(size_t(b) * p.heads_kv + hk) * x.c.budget + r];
        REQUIRE(t >= 0);
        REQUIRE(t < pr.pc.lens[size_t(b)]);
        const size_t src = input_row(pr, b, t, hk);
        std::copy_n(&pr.pc.k[src * D], D, &k[(size_t(hk) * n + r) * D]);
        std::copy_n(&pr.pc.v[src * D], D, &v[(size_t(hk) * n + r) * D]);
      }
    const std::vector<float> qb(q.begin() + int64_t(b) * p.heads_q * D, q.begin() + int64_t(b + 1) * p.heads_q * D);
    const auto o = course::ref::attention(qb, k, v, course::AttentionParams::make(1, p.heads_q, p.heads_kv, 1, n, D));
    std::copy(o.begin(), o.end(), dense.begin() + int64_t(b) * p.heads_q * D);
  }
  const course::CompareResult r = course::compare(
      paged, dense, course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", D}}, course::Tolerance::fp32());
  if (!r.ok)
    FAIL_CHECK("paged decode over the compressed cache vs dense attention over the kept tokens:\n" << r.report);
  else
    SUCCEED("decode over the compressed cache matches");
}

TEST_CASE("kv_compress: NaN in unused slots never leaks; short sequences are copied whole",
          "[day10][kv_compress][quick]") {
  // Lengths 1, bs - 1, bs, bs + 1 and around the budget, block size 8: many sequences end inside
  // a block, whose tail slots are NaN, and the unused table entries point at an all-NaN block.
  const Case x{4, 4, 32, 8, {1, 7, 8, 9, 47, 48, 49, 211}, params(4, 2, 4, 48, 3)};
  const uint64_t seed = course::case_seed("kv_compress_nan", 0);
  INFO(describe(x) << ", seed = " << seed);
  Problem pr = make_problem(x, seed);
  const Outputs out = run(pr);
  check_run(pr, out, reference(pr));
  // Decode over the new cache reads exactly the written slots: finite everywhere.
  const auto& p = pr.pc.p;
  const auto q = course::random_normal(size_t(p.q_elems()), seed + 5);
  const auto o = course::ref::paged_decode_attention(q, course::half_bits_to_float(out.k),
                                                     course::half_bits_to_float(out.v), out.table, out.lens, out.op);
  size_t bad = 0;
  for (float y : o) bad += std::isfinite(y) ? 0 : 1;
  INFO(bad << " of " << o.size() << " decode outputs over the compressed cache are NaN or Inf");
  CHECK(bad == 0);
}

TEST_CASE("kv_compress: the same inputs keep the same tokens on every run", "[day10][kv_compress][quick]") {
  const Case x{8, 2, 64, 16, {700, 300}, params(8, 4, 8, 64, 7)};
  const uint64_t seed = course::case_seed("kv_compress_deterministic", 0);
  INFO(describe(x) << ", seed = " << seed);
  Problem pr = make_problem(x, seed);
  const Outputs a = run(pr), b = run(pr);
  CHECK(a.kept == b.kept);
  CHECK(a.k == b.k);
  CHECK(a.v == b.v);
}

TEST_CASE("kv_compress: 32k tokens kept to 4096 (Hq/Hkv 32/8, D 128, block 16, W 32, pool 7)", "[day10][kv_compress]") {
  const Case x{32, 8, 128, 16, {32768}, params(32, 4, 32, 4096, 7)};
  run_and_check(x, course::case_seed("kv_compress_long", 0));
}

TEST_CASE("kv_compress: out blocks and out params follow the budget", "[day10][kv_compress][quick]") {
  course::PagedParams p;
  p.batch = 3;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 64;
  p.block_size = 16;
  p.num_blocks = 100;
  p.max_blocks_per_seq = 30;
  const KvCompressParams c = params(8, 4, 8, 100, 7);
  CHECK(kv_compress_out_blocks(p, c) == 7);  // ceil(100 / 16)
  const course::PagedParams op = kv_compress_out_params(p, c);
  CHECK(op.max_blocks_per_seq == 7);
  CHECK(op.num_blocks == 21);
  CHECK(op.heads_q == 8);
  CHECK(op.heads_kv == 2);
  CHECK(op.head_dim == 64);
  CHECK(op.block_size == 16);
  const size_t ws = kv_compress_workspace_bytes(p, c);
  CHECK(ws % sizeof(float) == 0);
  CHECK(ws >= size_t(p.batch) * p.heads_kv * p.max_blocks_per_seq * p.block_size *
                  sizeof(float));  // a score per key at least
}

TEST_CASE("kv_compress rejects bad arguments before launching anything", "[day10][kv_compress][args][quick]") {
  course::PagedParams good;
  good.batch = 2;
  good.heads_q = 4;
  good.heads_kv = 2;
  good.head_dim = 64;
  good.block_size = 16;
  good.num_blocks = 4;
  good.max_blocks_per_seq = 2;
  const KvCompressParams gc = params(4, 2, 4, 16, 3);
  const course::PagedParams op = kv_compress_out_params(good, gc);
  DeviceBuffer<uint16_t> q(size_t(good.batch) * good.heads_q * gc.window * good.head_dim),
      cache(size_t(good.cache_elems()));
  DeviceBuffer<uint16_t> kout(size_t(op.cache_elems())), vout(size_t(op.cache_elems()));
  DeviceBuffer<int32_t> table(std::vector<int32_t>{0, 1, 2, 3}), lens(std::vector<int32_t>{5, 20});
  DeviceBuffer<int32_t> otable(size_t(good.batch) * op.max_blocks_per_seq), olens(size_t(good.batch));
  DeviceBuffer<int32_t> kept(size_t(good.batch) * good.heads_kv * gc.budget);
  DeviceBuffer<float> ws(kv_compress_workspace_bytes(good, gc) / sizeof(float) + 1);
  q.fill_zero();
  cache.fill_zero();
  olens.poison();
  const __half* qd = as_half(q);
  const __half* cd = as_half(cache);
  __half* ko = as_half(kout);
  __half* vo = as_half(vout);
  const int32_t* td = table.data();
  const int32_t* ld = lens.data();
  int32_t* ot = otable.data();
  int32_t* ol = olens.data();
  int32_t* kd = kept.data();
  float* wd = ws.data();
  auto with = [&](auto edit) {
    course::PagedParams p = good;
    edit(p);
    return p;
  };
  auto cfg = [&](auto edit) {
    KvCompressParams c = gc;
    edit(c);
    return c;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q_window", kv_compress(nullptr, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("k_cache", kv_compress(qd, nullptr, cd, td, ld, ko, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("v_cache", kv_compress(qd, cd, nullptr, td, ld, ko, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("block_table", kv_compress(qd, cd, cd, nullptr, ld, ko, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("context_lens", kv_compress(qd, cd, cd, td, nullptr, ko, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("k_out", kv_compress(qd, cd, cd, td, ld, nullptr, vo, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("v_out", kv_compress(qd, cd, cd, td, ld, ko, nullptr, ot, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("out_block_table",
                                kv_compress(qd, cd, cd, td, ld, ko, vo, nullptr, ol, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("out_context_lens",
                                kv_compress(qd, cd, cd, td, ld, ko, vo, ot, nullptr, kd, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("kept_indices", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, nullptr, wd, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT("workspace", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, nullptr, good, gc));
  COURSE_CHECK_INVALID_ARGUMENT(
      "batch", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, with([](auto& p) { p.batch = 0; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT(
      "heads_q", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, with([](auto& p) { p.heads_q = -4; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT(
      "heads_kv", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, with([](auto& p) { p.heads_kv = 3; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT(
      "head_dim", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, with([](auto& p) { p.head_dim = 96; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT("block_size", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd,
                                                          with([](auto& p) { p.block_size = 0; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT("num_blocks", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd,
                                                          with([](auto& p) { p.num_blocks = 0; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT("max_blocks_per_seq", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd,
                                                                  with([](auto& p) { p.max_blocks_per_seq = 0; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT(
      "window", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.window = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "window", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.window = 17; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "n_sink", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.n_sink = -1; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "n_recent", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.n_recent = -2; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "budget", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.budget = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "budget", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good, cfg([](auto& c) { c.budget = 5; })));
  COURSE_CHECK_INVALID_ARGUMENT("pool_kernel", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good,
                                                           cfg([](auto& c) { c.pool_kernel = 4; })));
  COURSE_CHECK_INVALID_ARGUMENT("pool_kernel", kv_compress(qd, cd, cd, td, ld, ko, vo, ot, ol, kd, wd, good,
                                                           cfg([](auto& c) { c.pool_kernel = 33; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", kv_compress_workspace_bytes(with([](auto& p) { p.head_dim = 48; }), gc));
  COURSE_CHECK_INVALID_ARGUMENT("budget", kv_compress_out_params(good, cfg([](auto& c) { c.budget = -1; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (int32_t x : olens.download()) untouched = untouched && uint32_t(x) == course::kPoisonF32Bits;
  CHECK(untouched);  // nothing was written
}
