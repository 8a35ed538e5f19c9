// Tests for day10/04_fp16_wmma: fp16 flash attention on tensor cores, against the CPU reference
// run in double on the SAME fp16-rounded inputs, with the fp16 tolerance (common/compare.h).
//
// Besides the usual shape grid (1, below a tile, tails such as 67 and 1000, Nq != Nk both ways
// under the bottom-right causal mask, rows that see no key -> zeros, D = 64 and 128, 2048) three
// cases target what half precision gets wrong:
//   * scores accumulated in fp16 instead of fp32: a common offset in Q and K makes the partial
//     dot products large (~512), where fp16's spacing is 0.5;
//   * exp of a score from which the running max was not subtracted: logits of ±1e3 overflow fp32,
//     and fp16 already overflows at exp(11.1) = 65504;
//   * the tile configurations of smaller GPUs, chosen here through COURSE_SMEM_LIMIT.
#include <cstdlib>
#include <string>
#include <vector>

#include "04_fp16_wmma.h"
#include "gpu_test.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

const __half* as_half(const DeviceBuffer<uint16_t>& b) { return reinterpret_cast<const __half*>(b.data()); }
__half* as_half(DeviceBuffer<uint16_t>& b) { return reinterpret_cast<__half*>(b.data()); }

// Runs flash_attention_wmma on q, k, v (fp32 values, rounded to fp16 here) and compares O with
// the reference on the rounded values, so the only differences left are the kernel's own.
void check_wmma(const AttentionParams& p, const std::vector<float>& q32, const std::vector<float>& k32,
                const std::vector<float>& v32) {
  const auto q = course::round_to_half(q32), k = course::round_to_half(k32), v = course::round_to_half(v32);
  auto d_q = course::to_device(course::to_half_bits(q));
  auto d_k = course::to_device(course::to_half_bits(k));
  auto d_v = course::to_device(course::to_half_bits(v));
  DeviceBuffer<uint16_t> d_o(size_t(p.o_elems()));
  d_o.poison();
  flash_attention_wmma(as_half(d_q), as_half(d_k), as_half(d_v), as_half(d_o), p);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  COURSE_CHECK_OUTPUT(d_o, course::ref::attention(q, k, v, p), dims, course::Tolerance::fp16());
}

struct Case {
  int b, h, nq, nk, d;
  bool causal;
  const char* why;
  int h_kv = 0;  // 0: MHA (Hkv = Hq)
};

AttentionParams params_of(const Case& c) {
  return AttentionParams::make(c.b, c.h, c.h_kv > 0 ? c.h_kv : c.h, c.nq, c.nk, c.d, c.causal);
}

#define CASE_INFO(c, p, seed)                                                                               \
  INFO("B=" << (c).b << " Hq=" << (c).h << " Hkv=" << (p).heads_kv << " Nq=" << (c).nq << " Nk=" << (c).nk  \
            << " D=" << (c).d << ((c).causal ? " causal" : "") << " (" << (c).why << "), seed = " << (seed) \
            << " (set COURSE_SEED to vary)")

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    CASE_INFO(c, p, seed);
    check_wmma(p, course::random_normal(size_t(p.q_elems()), seed),
               course::random_normal(size_t(p.kv_elems()), seed + 1),
               course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

}  // namespace

TEST_CASE("flash_attention_wmma: small shapes", "[day10][fp16_wmma][quick]") {
  run_grid("wmma_small", {
                             {1, 1, 1, 1, 64, false, "one query, one key"},
                             {1, 1, 1, 1, 128, true, "one query, one key, causal"},
                             {2, 3, 17, 17, 64, true, "below one tile"},
                             {1, 2, 67, 67, 128, false, "not a tile multiple"},
                             {1, 2, 67, 67, 64, true, "not a tile multiple, causal"},
                             {1, 1, 5, 200, 128, false, "short query, keys over several tiles"},
                         });
}

TEST_CASE("flash_attention_wmma: Nq != Nk, causal alignment is bottom-right", "[day10][fp16_wmma][quick]") {
  run_grid("wmma_nq_ne_nk", {
                                {1, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
                                {1, 2, 1, 150, 128, true, "one query sees every key (decode step)"},
                                {1, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key and must be zero"},
                                {1, 1, 130, 1, 128, true, "only the last query row sees the single key"},
                                {2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
                            });
}

TEST_CASE("flash_attention_wmma: tile boundaries, head dims, batch and heads", "[day10][fp16_wmma]") {
  run_grid("wmma_grid", {
                            {2, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
                            {3, 2, 1000, 1000, 64, false, "non-multiple, D=64"},
                            {1, 3, 64, 64, 64, true, "exactly one tile"},
                            {1, 1, 65, 129, 128, true, "one past a tile boundary, both ways"},
                            {1, 2, 511, 1537, 128, true, "chunked prefill over many tiles"},
                            {1, 1, 1, 2048, 64, false, "one query, 2048 keys: the running max must be rescaled"},
                            {2, 8, 67, 67, 64, true, "GQA 8/2, causal, tails", 2},
                        });
}

TEST_CASE("flash_attention_wmma: long sequences (2048)", "[day10][fp16_wmma]") {
  run_grid("wmma_long", {
                            {2, 4, 2048, 2048, 64, false, "prefill, no mask"},
                            {1, 2, 2048, 2048, 128, true, "prefill, causal, D=128"},
                            {1, 2, 2048, 1024, 64, true, "Nq > Nk, half the rows see nothing"},
                        });
}

// fp16 has 11 significant bits: between 512 and 1024 its spacing is 0.5, so 512 + 0.2 = 512.
// With Q and K both offset by 2, every dot product is about 4·D = 512 plus a few units, and a
// kernel that keeps the running sum in fp16 loses up to 0.25 at each rounding: errors of a few
// hundredths in the logits, a few percent in the weights, many times the fp16 tolerance (the
// s_half_accum variant fails here on an H100, and passes most unit-normal cases). (The per-row part of
// the offset, 2·Σq, cancels in the softmax; 2·Σk differs per key and spreads the weights.)
// In fp32 the same sums are exact to ~3e-5.
TEST_CASE("flash_attention_wmma: scores accumulate in fp32 (large dot products)", "[day10][fp16_wmma][quick]") {
  const std::vector<Case> cases{{1, 2, 80, 200, 128, false, "offset 2 in Q and K, D=128"},
                                {1, 2, 130, 130, 128, true, "offset 2 in Q and K, D=128, causal"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed("wmma_fp32_accumulation", int64_t(idx));
    CASE_INFO(c, p, seed);
    check_wmma(p, course::random_normal(size_t(p.q_elems()), seed, 2.f),
               course::random_normal(size_t(p.kv_elems()), seed + 1, 2.f),
               course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

// Logits of about ±1e3 (scale 64, dot products with a spread of ~10). exp of an unsubtracted
// score overflows fp32 above 88 and fp16 above 11.1 (65504 is the largest half), so any place the
// kernel forms exp(s) before subtracting the running max shows up as Inf/NaN or a wrong row.
// Q and K are multiples of 1/16 (exact in fp16), so every dot product and, with the power-of-two
// scale, every logit is exact: the fp16 tolerance still applies unchanged.
TEST_CASE("flash_attention_wmma: logits of magnitude 1e3 never overflow", "[day10][fp16_wmma][quick]") {
  const std::vector<Case> cases{{1, 2, 150, 150, 64, false, "large logits"},
                                {1, 2, 150, 150, 128, true, "large logits, causal"},
                                {1, 1, 40, 300, 128, true, "large logits, Nq < Nk"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    AttentionParams p = params_of(c);
    p.scale = 64.f;
    const uint64_t seed = course::case_seed("wmma_magnitude", int64_t(idx));
    CASE_INFO(c, p, seed);
    INFO("scale = 64: logits spread over about ±1e3");
    check_wmma(p, course::random_normal_sixteenths(size_t(p.q_elems()), seed),
               course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1),
               course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

// The last key tile is partial when Nk is not a multiple of the tile: a kernel must not read past
// the tensors (it would read another head's rows, or memory it does not own) and must give the
// padding keys no weight. Here K and V are followed by rows of NaN: any of them that reaches a
// score or a product with P turns the output into NaN.
TEST_CASE("flash_attention_wmma: nothing past the end of K and V is read", "[day10][fp16_wmma][quick]") {
  const Case cases[] = {{1, 1, 67, 67, 64, false, "NaN rows after K and V"},
                        {1, 1, 33, 100, 128, true, "NaN rows after K and V, causal"}};
  for (size_t idx = 0; idx < 2; ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed("wmma_tail_nan", int64_t(idx));
    CASE_INFO(c, p, seed);
    const auto q = course::round_to_half(course::random_normal(size_t(p.q_elems()), seed));
    const auto k = course::round_to_half(course::random_normal(size_t(p.kv_elems()), seed + 1));
    const auto v = course::round_to_half(course::random_normal(size_t(p.kv_elems()), seed + 2));
    auto with_nan_tail = [&](const std::vector<float>& x) {
      std::vector<uint16_t> bits = course::to_half_bits(x);
      bits.resize(bits.size() + size_t(64 * p.head_dim), uint16_t(0x7E00));  // 64 rows of NaN
      return bits;
    };
    auto d_q = course::to_device(course::to_half_bits(q));
    auto d_k = course::to_device(with_nan_tail(k));
    auto d_v = course::to_device(with_nan_tail(v));
    DeviceBuffer<uint16_t> d_o(size_t(p.o_elems()));
    d_o.poison();
    flash_attention_wmma(as_half(d_q), as_half(d_k), as_half(d_v), as_half(d_o), p);
    const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
    COURSE_CHECK_OUTPUT(d_o, course::ref::attention(q, k, v, p), dims, course::Tolerance::fp16());
  }
}

// What a GPU with less shared memory runs (99 KiB: consumer Ampere/Ada; 64 KiB: Turing): one K/V
// stage and, at D = 128, 32-row query tiles. Same answers expected.
TEST_CASE("flash_attention_wmma: the configurations of smaller GPUs", "[day10][fp16_wmma][quick]") {
  for (const char* limit : {"101376", "65536"}) {
    course::ScopedSmemLimit override_limit(limit);
    INFO("COURSE_SMEM_LIMIT=" << limit);
    run_grid(std::string("wmma_smem_") + limit, {
                                                    {1, 2, 67, 67, 128, true, "tails, causal, D=128"},
                                                    {1, 2, 100, 37, 64, true, "Nq > Nk, D=64"},
                                                    {1, 1, 5, 200, 128, false, "keys over several tiles"},
                                                });
  }
}

TEST_CASE("flash_attention_wmma rejects bad arguments before launching anything", "[day10][fp16_wmma][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 8, 8, 64);
  DeviceBuffer<uint16_t> q(size_t(good.q_elems())), o(size_t(good.o_elems()));
  q.fill_zero();
  o.poison();
  const __half* x = as_half(q);
  __half* y = as_half(o);
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_wmma(nullptr, x, x, y, good));
  COURSE_CHECK_INVALID_ARGUMENT("k", flash_attention_wmma(x, nullptr, x, y, good));
  COURSE_CHECK_INVALID_ARGUMENT("v", flash_attention_wmma(x, x, nullptr, y, good));
  COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention_wmma(x, x, x, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_wmma(x + 1, x, x, y, good));  // not 16-byte aligned
  COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention_wmma(x, x, x, y + 4, good));  // 8 bytes off
  COURSE_CHECK_INVALID_ARGUMENT("batch", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.heads_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.seq_k = -3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.head_dim = 32; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.head_dim = 80; })));
  COURSE_CHECK_INVALID_ARGUMENT("window", flash_attention_wmma(x, x, x, y, with([](auto& p) { p.window = 16; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (uint16_t h : o.download()) CHECK(h == course::kPoisonF16Bits);  // nothing was written
}
