// Tests for day10/06_split_kv_decode: flash-decoding over a paged fp16 KV cache.
//
// Every case builds the day-06 hard cache (common/paged_cache.h): physical blocks randomly
// permuted, NaN in every slot at or past a sequence's length, in every unowned block and behind
// every unused block_table entry. Its values are rounded to fp16 once on the host, and the CPU
// reference (course::ref::paged_decode_attention, double accumulation) runs on those rounded
// values, so what is left to compare is the kernel's own arithmetic.
//
// Each cache is run with the automatic split count AND with forced counts (SplitKvOptions,
// test-only): 1 (no merge), 2, 3, 7 and "many" (more splits than tokens in most sequences, so
// many splits are empty), independently of the GPU's SM count. The workspace is NaN-poisoned
// before every launch: a merge that reads the slot of an empty split returns NaN.
//
// The [index] cases check the index helper split_kv_split_range on the CPU alone (no CUDA call):
// `build/bin/sol_06_split_kv_decode "[index]"` runs them without a GPU.
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "06_split_kv_decode.h"
#include "gpu_test.h"
#include "paged_cache.h"
#include "reference.h"

namespace {

using course::DeviceBuffer;

const __half* as_half(const DeviceBuffer<uint16_t>& b) { return reinterpret_cast<const __half*>(b.data()); }
__half* as_half(DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__half*>(b.data()); }

struct Case {
  int heads_q, heads_kv, head_dim, block_size;
  std::vector<int32_t> lens;  // one per sequence
};

std::string describe(const Case& c) {
  std::string lens;
  for (int32_t n : c.lens) lens += (lens.empty() ? "" : ",") + std::to_string(n);
  return "Hq=" + std::to_string(c.heads_q) + " Hkv=" + std::to_string(c.heads_kv) + " D=" + std::to_string(c.head_dim) +
         " block_size=" + std::to_string(c.block_size) + " context_lens={" + lens + "}";
}

// One uploaded problem and its reference output; run() launches it with any split count.
struct Problem {
  course::PagedCache pc;
  std::vector<float> q, ref;
  DeviceBuffer<uint16_t> d_q, d_k, d_v;
  DeviceBuffer<int32_t> d_table, d_lens;
};

// The cache of common/paged_cache.h with q, K and V rounded to fp16. `edit` may change the
// values (still fp32, rounded afterwards) and the params before the reference runs.
template <class Edit>
Problem make_problem(const Case& c, uint64_t seed, Edit edit) {
  Problem pr;
  pr.pc = course::build_paged_cache(c.lens, c.heads_q, c.heads_kv, c.head_dim, c.block_size, seed);
  pr.q = course::random_normal(size_t(pr.pc.p.q_elems()), seed + 1);
  edit(pr);
  pr.q = course::round_to_half(pr.q);
  pr.pc.k = course::round_to_half(pr.pc.k);  // NaN stays NaN
  pr.pc.v = course::round_to_half(pr.pc.v);
  pr.ref = course::ref::paged_decode_attention(pr.q, pr.pc.k, pr.pc.v, pr.pc.table, pr.pc.lens, pr.pc.p);
  pr.d_q = course::to_device(course::to_half_bits(pr.q));
  pr.d_k = course::to_device(course::to_half_bits(pr.pc.k));
  pr.d_v = course::to_device(course::to_half_bits(pr.pc.v));
  pr.d_table = course::to_device(pr.pc.table);
  pr.d_lens = course::to_device(pr.pc.lens);
  return pr;
}
Problem make_problem(const Case& c, uint64_t seed) {
  return make_problem(c, seed, [](Problem&) {});
}

// forced_splits 0: the launcher's own choice.
void run_and_check(Problem& pr, int forced_splits) {
  const course::PagedParams& p = pr.pc.p;
  SplitKvOptions opt;
  opt.num_splits = forced_splits;
  const int splits = split_kv_decode_num_splits(p, opt);
  INFO("num_splits = " << splits << (forced_splits ? " (forced)" : " (automatic)"));
  if (forced_splits) REQUIRE(splits == forced_splits);
  const size_t ws_bytes = split_kv_decode_workspace_bytes(p, opt);
  DeviceBuffer<float> ws(std::max<size_t>(ws_bytes / sizeof(float), 1));
  ws.poison();  // partials nobody wrote are NaN
  DeviceBuffer<uint16_t> d_o(size_t(p.q_elems()));
  d_o.poison();
  split_kv_decode(as_half(pr.d_q), as_half(pr.d_k), as_half(pr.d_v), pr.d_table.data(), pr.d_lens.data(), as_half(d_o),
                  ws_bytes ? ws.data() : nullptr, p, 0, opt);
  COURSE_CHECK_OUTPUT(d_o, pr.ref, course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}},
                      course::Tolerance::fp16());
}

// The split counts every problem runs with: automatic, one, a few, and many (mostly empty).
void run_all_splits(Problem& pr, int many = 64) {
  for (int s : {0, 1, 2, 3, 7, many}) run_and_check(pr, s);
}

// Context lengths around one block, empty, medium and random, sharing one batch.
std::vector<int32_t> mixed_lens(int bs, course::Rng& rng) {
  return {1, std::max(bs - 1, 1), bs, bs + 1, 0, 1000, int32_t(rng.uniform_int(1, 3000))};
}

// What is wrong with the ranges split_kv_split_range gives the num_splits splits of a sequence of
// len tokens in a window of `window` tokens (split_len = ceil(window / num_splits), the header's
// rule), checked against the header's contract; "" when nothing is.
std::string split_ranges_error(long long window, int num_splits, int len) {
  const int split_len = int((window + num_splits - 1) / num_splits);
  const long long used = std::min<long long>((len + (long long)split_len - 1) / split_len, num_splits);
  const std::string problem = "window " + std::to_string(window) + ", num_splits " + std::to_string(num_splits) +
                              " (split_len " + std::to_string(split_len) + "), len " + std::to_string(len) + ": ";
  long long next = 0;  // where the next non-empty split must begin: the previous one's end
  long long non_empty = 0;
  for (int s = 0; s < num_splits; ++s) {
    const SplitKvRange r = split_kv_split_range(s, split_len, len);
    const long long chunk = (long long)s * split_len;  // the split's chunk starts here
    const std::string at = problem + "split " + std::to_string(s) + " got [" + std::to_string(r.begin) + ", " +
                           std::to_string(r.end) + "), ";
    if (chunk >= len) {
      if (r.end > r.begin)
        return at + "expected an empty range (end <= begin): its chunk starts at " + std::to_string(chunk) +
               " >= len, so it holds no token";
      continue;
    }
    const long long want_end = std::min<long long>(len, chunk + split_len);
    const std::string want = "expected [" + std::to_string(chunk) + ", " + std::to_string(want_end) + ")";
    if (r.end <= r.begin) return at + want + ": an empty range for a split whose chunk starts before len";
    if (r.begin > next)
      return at + want + ": tokens [" + std::to_string(next) + ", " + std::to_string(r.begin) + ") belong to no split";
    if (r.begin < next) return at + want + ": overlaps the previous split, which ends at " + std::to_string(next);
    if (r.end > len) return at + want + ": reaches past len (slots at or past len are garbage)";
    if (r.end != want_end)
      return at + want + ": the split's chunk is [" + std::to_string(chunk) + ", " + std::to_string(chunk + split_len) +
             "), cut at len";
    next = r.end;
    ++non_empty;
  }
  if (next != len) return problem + "the non-empty splits end at " + std::to_string(next) + ", not at len";
  if (non_empty != used)
    return problem + std::to_string(non_empty) +
           " non-empty splits, expected ceil(len / split_len) = " + std::to_string(used) +
           " (the merge reads exactly those)";
  return "";
}

// Runs split_ranges_error over (window, num_splits, len) triples; reports the first few failures.
template <class ForEach>
void check_split_ranges(ForEach for_each_problem) {
  long long problems = 0, failures = 0;
  for_each_problem([&](long long window, int num_splits, int len) {
    ++problems;
    const std::string err = split_ranges_error(window, num_splits, len);
    if (err.empty()) return;
    if (++failures <= 5) FAIL_CHECK(err);
  });
  INFO(failures << " of " << problems << " (window, num_splits, len) problems have wrong split ranges");
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("split_kv_split_range: splits tile [0, len) in order, every window up to 40 tokens", "[index][quick]") {
  // Every window of 1..40 tokens with 1..window+3 splits (more splits than tokens: some chunks
  // start past the window) and 1024, and every length 0..window.
  check_split_ranges([](auto&& check) {
    for (int window = 1; window <= 40; ++window) {
      std::vector<int> counts;
      for (int n = 1; n <= window + 3; ++n) counts.push_back(n);
      counts.push_back(1024);
      for (int n : counts)
        for (int len = 0; len <= window; ++len) check(window, n, len);
    }
  });
}

TEST_CASE("split_kv_split_range: exact where a split's chunk ends past INT_MAX", "[index][quick]") {
  // Windows up to INT_MAX tokens (the largest the launcher accepts): with 1024 splits of
  // 2^21 tokens the last chunk of a 2^31 − 1 window would end at 2^31, one past INT_MAX.
  check_split_ranges([](auto&& check) {
    for (long long window : {(long long)INT_MAX, (long long)INT_MAX - 1, (long long)INT_MAX - 1000, (1LL << 30) + 1}) {
      for (int n : {1, 2, 3, 7, 1023, 1024}) {
        const long long split_len = (window + n - 1) / n;
        for (long long len :
             {0LL, 1LL, split_len - 1, split_len, split_len + 1, window / 2, window - split_len, window - 1, window})
          if (len >= 0 && len <= window) check(window, n, int(len));
      }
    }
  });
}

TEST_CASE("split_kv_decode: small GQA batch around one block, 1..64 splits", "[day10][split_kv_decode][quick]") {
  const Case a{4, 2, 64, 16, {1, 15, 16, 17, 0, 40}};
  const uint64_t seed_a = course::case_seed("split_kv_quick", 0);
  INFO(describe(a) << ", seed = " << seed_a << " (set COURSE_SEED to vary)");
  Problem pa = make_problem(a, seed_a);
  run_all_splits(pa);
  const Case b{8, 1, 32, 8, {9, 3}};
  const uint64_t seed_b = course::case_seed("split_kv_quick", 1);
  INFO(describe(b) << ", seed = " << seed_b);
  Problem pb = make_problem(b, seed_b);
  run_all_splits(pb, 1024);  // 1024 splits of a 24-token window: 1000+ of them empty everywhere
}

TEST_CASE("split_kv_decode: block sizes 8/16/32 x head ratios (32,8) (8,1) (40,40) (64,8), mixed lengths",
          "[day10][split_kv_decode]") {
  const std::vector<std::vector<int>> ratios{{32, 8, 128}, {8, 1, 64}, {40, 40, 32}, {64, 8, 128}};
  int idx = 0;
  for (int bs : {8, 16, 32}) {
    for (const auto& r : ratios) {
      const uint64_t seed = course::case_seed("split_kv_grid", idx++);
      course::Rng rng(seed ^ 0x5A11ull);
      const Case c{r[0], r[1], r[2], bs, mixed_lens(bs, rng)};
      INFO(describe(c) << ", seed = " << seed << " (set COURSE_SEED to vary)");
      Problem pr = make_problem(c, seed);
      run_all_splits(pr, 300);
    }
  }
}

TEST_CASE("split_kv_decode: a context of 65536+ tokens mixed with 0, 1, bs-1, bs, bs+1 in one batch",
          "[day10][split_kv_decode]") {
  const Case c{32, 8, 128, 16, {65536 + 37, 0, 1, 15, 16, 17, 5000}};
  const uint64_t seed = course::case_seed("split_kv_long", 0);
  INFO(describe(c) << ", seed = " << seed << " (set COURSE_SEED to vary)");
  Problem pr = make_problem(c, seed);
  for (int s : {0, 1, 7, 1024}) run_and_check(pr, s);
}

TEST_CASE("split_kv_decode: large logits (|scores| up to ~1e3) merge without overflow", "[day10][split_kv_decode]") {
  // Q and K are multiples of 1/16 scaled by powers of two (exact in fp16) and the scale is a
  // power of two, so the logits are exact in fp32: the split maxima differ by hundreds, and a
  // merge that does not rescale by exp(m_s − M), or exponentiates unshifted scores, is far off.
  const Case c{8, 2, 128, 16, {1, 17, 1000, 4096}};
  const uint64_t seed = course::case_seed("split_kv_magnitude", 0);
  INFO(describe(c) << ", logits ~1e3, seed = " << seed);
  Problem pr = make_problem(c, seed, [&](Problem& x) {
    x.q = course::random_normal_sixteenths(x.q.size(), seed + 1);
    for (float& v : x.q) v *= 256.f;
    for (float& v : x.pc.k)
      if (!std::isnan(v)) v = std::trunc(v * 16.f) / 16.f;
    x.pc.p.scale = 0.25f;
  });
  run_all_splits(pr);
}

TEST_CASE("split_kv_decode: partials stay fp32 (a split's l passes fp16's 65504)", "[day10][split_kv_decode]") {
  // q = 0: every score is 0, every weight exp(0) = 1, so each split's ℓ is its token count:
  // 70000 with two splits of 140000 tokens, beyond the largest half (65504). V is shifted to
  // mean 1 so the expected output (the mean of V, ≈ 1) is far from what an inf or a 0 gives.
  const Case c{1, 1, 32, 32, {140000}};
  const uint64_t seed = course::case_seed("split_kv_fp32_partials", 0);
  INFO(describe(c) << ", q = 0, V ~ 1 + N(0, 1), seed = " << seed);
  Problem pr = make_problem(c, seed, [](Problem& x) {
    std::fill(x.q.begin(), x.q.end(), 0.f);
    for (float& v : x.pc.v)
      if (!std::isnan(v)) v += 1.f;
  });
  for (int s : {2, 3}) run_and_check(pr, s);
}

TEST_CASE("split_kv_decode: the automatic split count fills the GPU only when the batch does not",
          "[day10][split_kv_decode][quick]") {
  course::PagedParams p;
  p.heads_q = 32;
  p.heads_kv = 8;
  p.head_dim = 128;
  p.block_size = 16;
  p.max_blocks_per_seq = 131072 / 16;
  p.num_blocks = p.max_blocks_per_seq;
  p.batch = 1;
  int sms = 0, dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  INFO("SMs = " << sms);
  // One sequence, 8 KV heads: 8 blocks without splitting, far fewer than the GPU holds.
  if (sms >= 16) CHECK(split_kv_decode_num_splits(p) > 1);
  CHECK(split_kv_decode_workspace_bytes(p) ==
        size_t(p.batch) * p.heads_q * split_kv_decode_num_splits(p) * (p.head_dim + 2) * sizeof(float));
  // Splits never get shorter than 256 tokens: a 512-token window gets at most 2.
  p.max_blocks_per_seq = 512 / 16;
  CHECK(split_kv_decode_num_splits(p) <= 2);
  // A batch that alone fills every SM many times over is not split, and needs no workspace.
  p.batch = 4096;
  p.max_blocks_per_seq = 4096 / 16;
  CHECK(split_kv_decode_num_splits(p) == 1);
  CHECK(split_kv_decode_workspace_bytes(p) == 0);
  SplitKvOptions forced;
  forced.num_splits = 5;
  CHECK(split_kv_decode_num_splits(p, forced) == 5);
  CHECK(split_kv_decode_workspace_bytes(p, forced) == size_t(4096) * 32 * 5 * 130 * sizeof(float));
}

TEST_CASE("split_kv_decode rejects bad arguments before launching anything", "[day10][split_kv_decode][args][quick]") {
  course::PagedParams good;
  good.batch = 2;
  good.heads_q = 4;
  good.heads_kv = 2;
  good.head_dim = 64;
  good.block_size = 16;
  good.num_blocks = 4;
  good.max_blocks_per_seq = 2;
  SplitKvOptions two;
  two.num_splits = 2;
  DeviceBuffer<uint16_t> q(size_t(good.q_elems())), cache(size_t(good.cache_elems())), o(size_t(good.q_elems()));
  DeviceBuffer<int32_t> table(std::vector<int32_t>{0, 1, 2, 3}), lens(std::vector<int32_t>{5, 20});
  DeviceBuffer<float> ws(split_kv_decode_workspace_bytes(good, two) / sizeof(float));
  q.fill_zero();
  cache.fill_zero();
  o.poison();
  const __half* qd = as_half(q);
  const __half* cd = as_half(cache);
  const int32_t* td = table.data();
  const int32_t* ld = lens.data();
  __half* od = as_half(o);
  float* wd = ws.data();
  auto with = [&](auto edit) {
    course::PagedParams p = good;
    edit(p);
    return p;
  };
  auto splits = [](int n) {
    SplitKvOptions opt;
    opt.num_splits = n;
    return opt;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", split_kv_decode(nullptr, cd, cd, td, ld, od, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("k_cache", split_kv_decode(qd, nullptr, cd, td, ld, od, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("v_cache", split_kv_decode(qd, cd, nullptr, td, ld, od, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("block_table", split_kv_decode(qd, cd, cd, nullptr, ld, od, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("context_lens", split_kv_decode(qd, cd, cd, td, nullptr, od, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("o", split_kv_decode(qd, cd, cd, td, ld, nullptr, wd, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("workspace", split_kv_decode(qd, cd, cd, td, ld, od, nullptr, good, 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "batch", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.batch = 0; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "heads_q", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.heads_q = -4; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "heads_kv", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.heads_kv = 3; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "head_dim", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.head_dim = 96; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "block_size", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.block_size = 0; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "num_blocks", split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.num_blocks = 0; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT(
      "max_blocks_per_seq",
      split_kv_decode(qd, cd, cd, td, ld, od, wd, with([](auto& p) { p.max_blocks_per_seq = 0; }), 0, two));
  COURSE_CHECK_INVALID_ARGUMENT("num_splits", split_kv_decode(qd, cd, cd, td, ld, od, wd, good, 0, splits(-1)));
  COURSE_CHECK_INVALID_ARGUMENT("num_splits", split_kv_decode(qd, cd, cd, td, ld, od, wd, good, 0, splits(1025)));
  COURSE_CHECK_INVALID_ARGUMENT("num_splits", split_kv_decode_workspace_bytes(good, splits(-3)));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", split_kv_decode_num_splits(with([](auto& p) { p.head_dim = 48; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (uint16_t x : o.download()) untouched = untouched && x == course::kPoisonF16Bits;
  CHECK(untouched);  // nothing was written
}
