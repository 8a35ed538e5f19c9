// Tests for day06/04_paged_attention: decode over a paged KV cache built the hard way.
//
// Every case builds a cache (common/paged_cache.h) in which
//   * the physical blocks of all sequences are randomly permuted (a kernel that uses the
//     logical block number as the physical one reads someone else's tokens);
//   * every slot at or past context_lens[b] in a sequence's last block, every physical block no
//     sequence uses, and every block_table entry past a sequence's last block point at NaN
//     (a kernel that reads one element too many returns NaN);
//   * context lengths 0, 1, bs-1, bs, bs+1, 1000, 4096 and a random one share one batch.
// The [index] cases test the page-address helper paged_attention_kv_offset() on the CPU alone
// (no GPU needed: `build/bin/ex_04_paged_attention "[index]"`), against a brute-force gather.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
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
  return "Hq=" + std::to_string(c.heads_q) + " Hkv=" + std::to_string(c.heads_kv) + " D=" + std::to_string(c.head_dim) +
         " block_size=" + std::to_string(c.block_size) + " context_lens={" + lens + "}";
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
  INFO(describe(c) << (large_logits ? ", logits ~1e3" : "") << ", seed = " << seed << " (set COURSE_SEED to vary)");
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
                      course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}}, course::Tolerance::fp32());
}

// ---- [index]: the page address on the CPU -------------------------------------------------
//
// The brute force knows nothing of the address formula. It walks the pool in memory order
// (physical block, then KV head, then slot, then element) to learn where each (block, head, slot)
// row starts, walks every sequence's block table in order (logical block, then slot) to learn
// which row holds its token t, and writes the label of (b, t, hk, d) there. The helper must then
// find each token's D labels at the offset it returns.
struct IndexCase {
  int batch, heads_kv, head_dim, block_size, blocks_per_seq, spare_blocks;
};

std::string describe(const IndexCase& c) {
  return "batch=" + std::to_string(c.batch) + " heads_kv=" + std::to_string(c.heads_kv) +
         " head_dim=" + std::to_string(c.head_dim) + " block_size=" + std::to_string(c.block_size) +
         " max_blocks_per_seq=" + std::to_string(c.blocks_per_seq);
}

int64_t label(int b, int t, int hk, int d) { return ((int64_t(b) * 100000 + t) * 100 + hk) * 1000 + d; }

// Empty when the helper agrees with the brute force on every token, head and element of every
// sequence; otherwise the first disagreement, naming its inputs.
std::string first_gather_mismatch(const IndexCase& c, const std::vector<int32_t>& table) {
  const int num_blocks = c.batch * c.blocks_per_seq + c.spare_blocks;
  std::map<std::tuple<int, int, int>, int64_t> row_start;  // (physical, hk, slot) -> first element
  int64_t pos = 0;
  for (int phys = 0; phys < num_blocks; ++phys)
    for (int hk = 0; hk < c.heads_kv; ++hk)
      for (int slot = 0; slot < c.block_size; ++slot) {
        row_start[{phys, hk, slot}] = pos;
        pos += c.head_dim;
      }
  std::vector<int64_t> cache(size_t(pos), -1);  // -1: no token of any sequence lives here
  for (int b = 0; b < c.batch; ++b) {
    int t = 0;
    for (int j = 0; j < c.blocks_per_seq; ++j)
      for (int slot = 0; slot < c.block_size; ++slot, ++t)
        for (int hk = 0; hk < c.heads_kv; ++hk)
          for (int d = 0; d < c.head_dim; ++d)
            cache[size_t(row_start[{table[size_t(b) * c.blocks_per_seq + j], hk, slot}] + d)] = label(b, t, hk, d);
  }
  for (int b = 0; b < c.batch; ++b) {
    const int32_t* seq_blocks = table.data() + size_t(b) * c.blocks_per_seq;
    for (int t = 0; t < c.blocks_per_seq * c.block_size; ++t)
      for (int hk = 0; hk < c.heads_kv; ++hk) {
        const int64_t off = paged_attention_kv_offset(seq_blocks, t, hk, c.heads_kv, c.block_size, c.head_dim);
        std::ostringstream where;
        where << describe(c) << ", block table row of sequence " << b << " = {";
        for (int j = 0; j < c.blocks_per_seq; ++j) where << (j ? "," : "") << seq_blocks[j];
        where << "}: paged_attention_kv_offset(t=" << t << ", hk=" << hk << ") returned " << off;
        const int j = t / c.block_size, slot = t % c.block_size;  // where the brute force put it
        const int64_t want = row_start[{seq_blocks[j], hk, slot}];
        where << ", expected " << want << " (physical block " << seq_blocks[j] << ", slot " << slot << ")";
        if (off < 0 || off + c.head_dim > int64_t(cache.size()))
          return where.str() + "; that is outside the cache of " + std::to_string(cache.size()) + " elements";
        for (int d = 0; d < c.head_dim; ++d)
          if (cache[size_t(off + d)] != label(b, t, hk, d))
            return where.str() + "; element d=" + std::to_string(d) + " there is not token " + std::to_string(t) + "'s";
      }
  }
  return "";
}

}  // namespace

TEST_CASE("paged_attention_kv_offset: the lesson's worked example (block_size 4, token 9)",
          "[day06][paged_attention][index][quick]") {
  // README, "The address computation": block table {7, 2, 5}, block_size 4, Hkv = 2, D = 8.
  // Token 9 is in logical block 2 -> physical block 5, slot 1; head 1's rows of block 5 start
  // at 5·64 + 1·32 = 352, so slot 1 starts at 360.
  const std::vector<int32_t> table{7, 2, 5};
  struct Want {
    int t, hk;
    int64_t offset;
  };
  for (const Want& w : {Want{9, 1, 360}, Want{9, 0, 328}, Want{0, 0, 448}, Want{5, 1, 168}, Want{11, 1, 376}}) {
    INFO("block table {7, 2, 5}, block_size 4, heads_kv 2, head_dim 8: token t=" << w.t << ", hk=" << w.hk);
    CHECK(paged_attention_kv_offset(table.data(), w.t, w.hk, 2, 4, 8) == w.offset);
  }
}

TEST_CASE("paged_attention_kv_offset: a brute-force gather over small random block tables",
          "[day06][paged_attention][index]") {
  int64_t index = 0;
  for (int block_size : {1, 2, 3, 4, 5, 7, 16})
    for (int heads_kv : {1, 2, 3})
      for (int head_dim : {1, 4, 8})
        for (int blocks_per_seq : {1, 3}) {
          const IndexCase c{3, heads_kv, head_dim, block_size, blocks_per_seq, 2};
          const std::vector<int32_t> table =
              course::permuted_block_table(c.batch, c.blocks_per_seq, c.batch * c.blocks_per_seq + c.spare_blocks,
                                           course::case_seed("paged_index", index++));
          const std::string mismatch = first_gather_mismatch(c, table);
          INFO(mismatch);
          CHECK(mismatch.empty());
        }
}

TEST_CASE("paged_attention: small GQA batch around one block", "[day06][paged_attention][quick]") {
  check_case({4, 2, 64, 16, {1, 15, 16, 17, 0, 40}}, course::case_seed("paged_quick", 0));
  check_case({8, 1, 32, 8, {9, 3}}, course::case_seed("paged_quick", 1));
}

TEST_CASE("paged_attention: block sizes, head ratios and mixed context lengths", "[day06][paged_attention]") {
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

TEST_CASE("paged_attention: large logits (|scores| up to ~1e3) stay finite and accurate", "[day06][paged_attention]") {
  check_case({8, 2, 128, 16, {1, 17, 1000, 4096}}, course::case_seed("paged_magnitude", 0), true);
}

TEST_CASE("paged_attention rejects bad arguments before launching anything", "[day06][paged_attention][args][quick]") {
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
  COURSE_CHECK_INVALID_ARGUMENT("heads_q",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.heads_q = -4; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.head_dim = 96; })));
  COURSE_CHECK_INVALID_ARGUMENT("block_size",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.block_size = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("num_blocks",
                                paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.num_blocks = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "max_blocks_per_seq", paged_attention(qd, cd, cd, td, ld, od, with([](auto& p) { p.max_blocks_per_seq = 0; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (float x : o.download()) untouched = untouched && course::is_poison_f32(x);
  CHECK(untouched);  // nothing was written
}
