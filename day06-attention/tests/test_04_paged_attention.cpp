// Tests for day06/04_paged_attention: decode over a paged KV cache built the hard way.
//
// Every case builds a cache (common/paged_cache.h) in which
//   * the physical blocks of all sequences are randomly permuted (a kernel that uses the
//     logical block number as the physical one reads someone else's tokens);
//   * every slot at or past context_lens[b] in a sequence's last block, every physical block no
//     sequence uses, and every block_table entry past a sequence's last block point at NaN
//     (a kernel that reads one element too many returns NaN);
//   * context lengths 0, 1, bs-1, bs, bs+1, 1000, 4096 and a random one share one batch.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "04_paged_attention.h"
#include "gpu_test.h"
#include "paged_cache.h"
#include "reference.h"

namespace {

struct Case {
  int heads_q, heads_kv, head_dim, block_size;
  std::vector<int32_t> lens;  // one per sequence
};

// The mixed batch the task asks for: edges around one block, long and empty contexts.
std::vector<int32_t> mixed_lens(int bs, course::Rng& rng) {
  return {1, std::max(bs - 1, 1), bs, bs + 1, 1000, 4096, 0, int32_t(rng.uniform_int(1, 2000))};
}

std::string describe(const Case& c) {
  std::string lens;
  for (int32_t n : c.lens) lens += (lens.empty() ? "" : ",") + std::to_string(n);
  return "Hq=" + std::to_string(c.heads_q) + " Hkv=" + std::to_string(c.heads_kv) +
         " D=" + std::to_string(c.head_dim) + " block_size=" + std::to_string(c.block_size) +
         " context_lens={" + lens + "}";
}

// The shuffled, NaN-padded cache described at the top of the file (common/paged_cache.h builds
// it; the bench's reference check uses the same builder).
course::PagedCache build_cache(const Case& c, uint64_t seed) {
  return course::build_paged_cache(c.lens, c.heads_q, c.heads_kv, c.head_dim, c.block_size, seed);
}

// large_logits: scores of magnitude ~1e3, where exp() overflows unless the running max is
// subtracted. Q and the cached K are then multiples of 1/16 (scaled by powers of two) and the
// softmax scale is a power of two, so every logit is exact in fp32 and the plain fp32 tolerance
// still applies (see course::random_normal_sixteenths).
void check_case(const Case& c, uint64_t seed, bool large_logits = false) {
  INFO(describe(c) << (large_logits ? ", logits ~1e3" : "") << ", seed = " << seed
                   << " (set COURSE_SEED to vary)");
  course::PagedCache pc = build_cache(c, seed);
  course::PagedParams& p = pc.p;
  std::vector<float> q = course::random_normal(size_t(p.q_elems()), seed + 1);
  if (large_logits) {
    q = course::random_normal_sixteenths(size_t(p.q_elems()), seed + 1);
    for (float& x : q) x *= 256.f;
    for (float& x : pc.k)
      if (!std::isnan(x)) x = std::trunc(x * 16.f) / 16.f;
    p.scale = 0.25f;  // dot products ~ 256·sqrt(D): logits spread over about ±1e3
  }
  auto d_q = course::to_device(q), d_k = course::to_device(pc.k), d_v = course::to_device(pc.v);
  auto d_table = course::to_device(pc.table), d_lens = course::to_device(c.lens);
  course::DeviceBuffer<float> d_o(size_t(p.q_elems()));
  d_o.poison();
  paged_attention(d_q.data(), d_k.data(), d_v.data(), d_table.data(), d_lens.data(), d_o.data(), p);
  COURSE_CHECK_OUTPUT(d_o, course::ref::paged_decode_attention(q, pc.k, pc.v, pc.table, c.lens, p),
                      course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}},
                      course::Tolerance::fp32());
}

}  // namespace

TEST_CASE("paged_attention: small GQA batch around one block", "[day06][paged_attention][quick]") {
  check_case({4, 2, 64, 16, {1, 15, 16, 17, 0, 40}}, course::case_seed("paged_quick", 0));
  check_case({8, 1, 32, 8, {9, 3}}, course::case_seed("paged_quick", 1));
}

TEST_CASE("paged_attention: block sizes, head ratios and mixed context lengths",
          "[day06][paged_attention]") {
  // (Hq, Hkv, D, block size); each runs the mixed batch of context lengths.
  const std::vector<std::vector<int>> grid{
      {8, 2, 128, 16},   // GQA-4
      {8, 1, 64, 8},     // MQA, G = 8
      {32, 8, 128, 32},  // Llama-style 32/8
      {12, 4, 32, 16},   // G = 3 (not a power of two)
      {40, 40, 64, 8},   // MHA, many heads
      {8, 8, 32, 32},    // MHA, D = 32
      {32, 1, 128, 16},  // MQA, G = 32: more query heads than one block serves
      {6, 3, 64, 7},     // a block size that is not a power of two
  };
  for (size_t idx = 0; idx < grid.size(); ++idx) {
    const uint64_t seed = course::case_seed("paged_grid", int64_t(idx));
    course::Rng rng(seed ^ 0x1E75ull);
    const auto& g = grid[idx];
    check_case({g[0], g[1], g[2], g[3], mixed_lens(g[3], rng)}, seed);
  }
}

TEST_CASE("paged_attention: block size 1 and a batch of one", "[day06][paged_attention]") {
  check_case({4, 4, 64, 1, {300, 1, 2}}, course::case_seed("paged_edge", 0));
  check_case({16, 4, 128, 16, {4096}}, course::case_seed("paged_edge", 1));
}

TEST_CASE("paged_attention: large logits (|scores| up to ~1e3) stay finite and accurate",
          "[day06][paged_attention]") {
  check_case({8, 2, 128, 16, {1, 17, 1000, 4096}}, course::case_seed("paged_magnitude", 0), true);
}

TEST_CASE("paged_attention rejects bad arguments before launching anything",
          "[day06][paged_attention][args][quick]") {
  course::PagedParams good;
  good.batch = 2;
  good.heads_q = 4;
  good.heads_kv = 2;
  good.head_dim = 64;
  good.block_size = 16;
  good.num_blocks = 4;
  good.max_blocks_per_seq = 2;
  course::DeviceBuffer<float> q(size_t(good.q_elems())), cache(size_t(good.cache_elems())), o(size_t(good.q_elems()));
  course::DeviceBuffer<int32_t> table(std::vector<int32_t>{0, 1, 2, 3}), lens(std::vector<int32_t>{5, 20});
  q.fill_zero();
  cache.fill_zero();
  o.poison();
  const float* qd = q.data();
  const float* cd = cache.data();
  const int32_t* td = table.data();
  const int32_t* ld = lens.data();
  float* od = o.data();
  auto with = [&](auto edit) {
    course::PagedParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", paged_attention(nullptr, cd, cd, td, ld, od, good));
  COURSE_CHECK_INVALID_ARGUMENT("k_cache", paged_attention(qd, nullptr, cd, td, ld, od, good));
  COURSE_CHECK_INVALID_ARGUMENT("v_cache", paged_attention(qd, cd, nullptr, td, ld, od, good));
  COURSE_CHECK_INVALID_ARGUMENT("block_table", paged_attention(qd, cd, cd, nullptr, ld, od, good));
  COURSE_CHECK_INVALID_ARGUMENT("context_lens", paged_attention(qd, cd, cd, td, nullptr, od, good));
  COURSE_CHECK_INVALID_ARGUMENT("o", paged_attention(qd, cd, cd, td, ld, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("batch", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.heads_q = -4; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.head_dim = 96; })));
  COURSE_CHECK_INVALID_ARGUMENT("block_size", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.block_size = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("num_blocks", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.num_blocks = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("max_blocks_per_seq",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.max_blocks_per_seq = 0; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (float x : o.download()) untouched = untouched && course::is_poison_f32(x);
  CHECK(untouched);  // nothing was written
}
