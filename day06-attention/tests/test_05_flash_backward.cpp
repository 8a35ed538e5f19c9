// Tests for day06/05_flash_backward: dQ, dK and dV against the fp64 backward reference
// (common/reference_backward.h) on a shape grid around the tile sizes (1, below a tile,
// non-multiples, 2048), Nq != Nk both ways under a causal mask (rows that see no key), GQA
// groups (Hq, Hkv) = (8, 8), (8, 2), (8, 1), (32, 8), head_dim 32/64/128, batch and heads > 1,
// and logits of magnitude 1e3.
//
// What the launcher reads is what a forward pass would hand it: O and L computed in double by the
// reference and rounded to fp32. Rounding L moves every P_ij = exp(S_ij − L_i) of row i by the
// same factor φ_i = exp(L_i − fl(L_i)) (1 ± 3e-5 when |L_i| ≈ 1e3), and since dV, dP and D_i are
// all linear in dO, the gradients exact arithmetic computes from that L are the exact gradients
// for dO_i scaled by φ_i. So the reference runs on φ_i · dO_i: what remains is the kernel's own
// arithmetic, held to the fp32 bound for sums (exact inputs rather than looser tolerances, as in
// exercise 02's large-logit test).
//
// Outputs and the workspace are NaN-poisoned and guarded. The [index] cases check the index
// helper flash_backward_query_tiles on the CPU alone (no CUDA call):
// `build/bin/sol_05_flash_backward "[index]"` runs them without a GPU.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "05_flash_backward.h"
#include "gpu_test.h"
#include "reference_backward.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

std::vector<double> to_f64(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
std::vector<float> to_f32(const std::vector<double>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i]);
  return y;
}

// The launcher's inputs and the gradients it must return.
struct Problem {
  std::vector<float> q, k, v, o, d_o, lse;
  std::vector<float> dq, dk, dv;
};

Problem make_problem(const AttentionParams& p, std::vector<float> q, std::vector<float> k, std::vector<float> v,
                     std::vector<float> d_o) {
  Problem pr;
  const auto q64 = to_f64(q), k64 = to_f64(k), v64 = to_f64(v);
  const auto fwd = course::ref::attention_forward_lse_f64(q64, k64, v64, p);
  pr.o = to_f32(fwd.o);
  pr.lse = to_f32(fwd.lse);
  std::vector<double> g = to_f64(d_o);  // φ_i · dO_i (see the top of the file)
  const size_t D = size_t(p.head_dim);
  for (size_t row = 0; row < fwd.lse.size(); ++row) {
    if (!std::isfinite(fwd.lse[row])) continue;  // a row that sees no key: P = 0 whatever L is
    const double phi = std::exp(fwd.lse[row] - double(pr.lse[row]));
    for (size_t d = 0; d < D; ++d) g[row * D + d] *= phi;
  }
  const auto bwd = course::ref::attention_backward_f64(q64, k64, v64, g, p);
  pr.dq = to_f32(bwd.dq);
  pr.dk = to_f32(bwd.dk);
  pr.dv = to_f32(bwd.dv);
  pr.q = std::move(q);
  pr.k = std::move(k);
  pr.v = std::move(v);
  pr.d_o = std::move(d_o);
  return pr;
}

// Every gradient is a sum of at most max(D, G·Nq, Nk) products (dK, dV over the group's query
// rows, dQ over the keys, dP and D_i over D): Tolerance::fp32_sum of that many terms.
course::Tolerance tolerance(const AttentionParams& p) {
  const long long terms = std::max({(long long)p.head_dim, (long long)p.group_size() * p.seq_q, (long long)p.seq_k});
  return course::Tolerance::fp32_sum(terms);
}

void run_and_check(const AttentionParams& p, const Problem& pr) {
  auto d_q = course::to_device(pr.q), d_k = course::to_device(pr.k), d_v = course::to_device(pr.v);
  auto d_o = course::to_device(pr.o), d_do = course::to_device(pr.d_o), d_lse = course::to_device(pr.lse);
  DeviceBuffer<float> dq(size_t(p.q_elems())), dk(size_t(p.kv_elems())), dv(size_t(p.kv_elems()));
  DeviceBuffer<float> ws((flash_backward_workspace_bytes(p) + sizeof(float) - 1) / sizeof(float));
  dq.poison();
  dk.poison();
  dv.poison();
  ws.poison();  // D_i must be written before it is read: a NaN here would reach every gradient
  flash_backward(d_q.data(), d_k.data(), d_v.data(), d_o.data(), d_do.data(), d_lse.data(), dq.data(), dk.data(),
                 dv.data(), ws.data(), p);
  const course::Dims q_dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  const course::Dims kv_dims{{"b", p.batch}, {"hkv", p.heads_kv}, {"j", p.seq_k}, {"d", p.head_dim}};
  const course::Tolerance tol = tolerance(p);
  {
    INFO("gradient dV = Pᵀ dO (summed over the group)");
    COURSE_CHECK_OUTPUT(dv, pr.dv, kv_dims, tol);
  }
  {
    INFO("gradient dK = scale · dSᵀ Q (summed over the group)");
    COURSE_CHECK_OUTPUT(dk, pr.dk, kv_dims, tol);
  }
  {
    INFO("gradient dQ = scale · dS K");
    COURSE_CHECK_OUTPUT(dq, pr.dq, q_dims, tol);
  }
  const std::string ws_damage = ws.guard_damage();
  INFO("workspace of flash_backward_workspace_bytes(p) bytes: " << ws_damage);
  CHECK(ws_damage.empty());
}

struct Case {
  int b, hq, hkv, nq, nk, d;
  bool causal;
  const char* why;
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "B=" << c.b << " Hq=" << c.hq << " Hkv=" << c.hkv << " Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d
    << (c.causal ? " causal" : "") << " (" << c.why << ")";
  return s.str();
}

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = AttentionParams::make(c.b, c.hq, c.hkv, c.nq, c.nk, c.d, c.causal);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    INFO(describe(c) << ", seed = " << seed << " (set COURSE_SEED to vary)");
    run_and_check(p, make_problem(p, course::random_normal(size_t(p.q_elems()), seed),
                                  course::random_normal(size_t(p.kv_elems()), seed + 1),
                                  course::random_normal(size_t(p.kv_elems()), seed + 2),
                                  course::random_normal(size_t(p.q_elems()), seed + 3)));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// [index]: the query tiles of a key tile, on the CPU

TEST_CASE("flash_backward_query_tiles: exactly the query tiles with a row that sees the tile's first key",
          "[index][quick]") {
  int bad = 0, checked = 0;
  for (bool causal : {false, true})
    for (int br : {1, 2, 3, 8, 32})
      for (int nq = 1; nq <= 40; ++nq)
        for (int nk = 1; nk <= 40; ++nk)
          for (int k0 = 0; k0 < nk; ++k0) {
            const AttentionParams p = AttentionParams::make(1, 1, 1, nq, nk, 64, causal);
            const int tiles = (nq + br - 1) / br;
            // Brute force: the tiles holding a row that sees k0. (Under bottom-right alignment the
            // last row sees every key, so they are a run ending at the last tile; checked too.)
            int first = tiles, end = 0, seeing = 0;
            for (int t = 0; t < tiles; ++t) {
              bool sees = false;
              for (int i = t * br; i < std::min((t + 1) * br, nq); ++i) sees = sees || p.key_visible(i, k0);
              if (sees) first = std::min(first, t), end = t + 1, ++seeing;
            }
            if (seeing != end - first || end != tiles) FAIL("brute force: not a run of tiles ending at the last");
            const FlashBackwardTiles got = flash_backward_query_tiles(k0, nq, nk, causal, br);
            ++checked;
            if (got.first != first || got.end != end) {
              if (++bad <= 5) {
                std::ostringstream m;
                m << "flash_backward_query_tiles(k0=" << k0 << ", seq_q=" << nq << ", seq_k=" << nk
                  << ", causal=" << causal << ", br=" << br << ") = [" << got.first << ", " << got.end
                  << "), expected [" << first << ", " << end << ")";
                FAIL_CHECK(m.str());
              }
            }
          }
  INFO(bad << " of " << checked << " (k0, seq_q, seq_k, causal, br) combinations wrong");
  CHECK(bad == 0);
}

TEST_CASE("flash_backward_query_tiles: the lesson's worked example", "[index][quick]") {
  struct Ex {
    int k0, nq, nk;
    bool causal;
    int br, first, end;
  };
  const Ex examples[] = {
      {256, 100, 300, true, 16, 3, 7},   // off = 200: row 56 is the first to see key 256, in tile 3
      {0, 100, 300, true, 16, 0, 7},     // key 0 is seen by every row
      {256, 100, 300, false, 16, 0, 7},  // no mask: every tile
      {64, 300, 100, true, 16, 16, 19},  // off = −200: row 264 is the first to see key 64
      {0, 1, 1, true, 16, 0, 1},         // one query, one key
  };
  for (const Ex& e : examples) {
    const FlashBackwardTiles got = flash_backward_query_tiles(e.k0, e.nq, e.nk, e.causal, e.br);
    INFO("flash_backward_query_tiles(k0=" << e.k0 << ", seq_q=" << e.nq << ", seq_k=" << e.nk << ", causal=" << e.causal
                                          << ", br=" << e.br << ") = [" << got.first << ", " << got.end
                                          << "), expected [" << e.first << ", " << e.end << ")");
    CHECK(got.first == e.first);
    CHECK(got.end == e.end);
  }
}

// ---------------------------------------------------------------------------------------------
// The kernel against the reference

TEST_CASE("flash_backward: small shapes", "[day06][flash_backward][quick]") {
  run_grid("bwd_small", {
                            {1, 1, 1, 1, 1, 64, false, "one query, one key"},
                            {1, 1, 1, 1, 1, 64, true, "one query, one key, causal"},
                            {2, 3, 3, 17, 17, 32, true, "below one tile"},
                            {1, 2, 2, 67, 67, 64, false, "not a tile multiple"},
                            {1, 2, 2, 67, 67, 128, true, "not a tile multiple, causal"},
                            {1, 1, 1, 5, 200, 64, false, "short query, keys over several tiles"},
                            {1, 1, 1, 200, 5, 32, false, "many query tiles, one short key tile"},
                        });
}

TEST_CASE("flash_backward: Nq != Nk, causal alignment is bottom-right", "[day06][flash_backward][quick]") {
  run_grid("bwd_nq_ne_nk", {
                               {1, 2, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
                               {1, 2, 2, 1, 150, 32, true, "one query sees every key (decode step)"},
                               {1, 2, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key, their dQ is zero"},
                               {1, 1, 1, 130, 1, 32, true, "only the last query row sees the single key"},
                               {2, 2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
                           });
}

TEST_CASE("flash_backward: GQA sums dK and dV over the group", "[day06][flash_backward][quick]") {
  run_grid("bwd_gqa", {
                          {1, 8, 8, 70, 70, 64, true, "(8, 8): MHA"},
                          {1, 8, 2, 70, 90, 64, false, "(8, 2): groups of 4"},
                          {2, 8, 1, 45, 100, 128, true, "(8, 1): MQA, Nq < Nk"},
                          {1, 32, 8, 33, 65, 32, true, "(32, 8): groups of 4, 8 KV heads"},
                          {1, 8, 2, 100, 60, 128, true, "(8, 2), Nq > Nk: some rows of every head see nothing"},
                      });
}

TEST_CASE("flash_backward: tile boundaries, head dims, longer sequences", "[day06][flash_backward]") {
  run_grid("bwd_grid",
           {
               {2, 2, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
               {3, 2, 2, 1000, 1000, 32, false, "non-multiple, D=32"},
               {1, 3, 3, 64, 64, 64, true, "exactly two tiles each way"},
               {1, 1, 1, 65, 129, 64, true, "one past a tile boundary, both ways"},
               {1, 4, 2, 511, 1537, 128, true, "GQA chunked prefill over many tiles"},
               {1, 1, 1, 1, 2048, 128, false, "one query, 2048 keys: one row's dQ summed over 64 key tiles"},
               {1, 8, 2, 1024, 1024, 64, true, "GQA prefill, causal"},
               {1, 2, 2, 2048, 2048, 64, false, "prefill, 2048"},
           });
}

// Logits of about ±1e3 + N(0, 1): every row gets a large offset, so exp(S) alone overflows (or
// underflows to 0 for the rows at −1e3) while the softmax itself stays spread over many keys and
// the gradients are well conditioned. Q and K hold multiples of 1/16 with component 0 of every
// key equal to 32 and of every query ±250 (plus its sixteenths), and p.scale = 1/8 is a power of
// two: every logit is exact in fp32 (sums of multiples of 1/256 below 2^16), so what is left is
// the kernel's arithmetic around L_i (the reference runs on φ_i · dO_i, see the top of the file).
TEST_CASE("flash_backward: logits of magnitude 1e3 stay finite and exact", "[day06][flash_backward][quick]") {
  const std::vector<Case> cases{{1, 2, 2, 150, 150, 64, false, "large logits"},
                                {1, 2, 2, 150, 150, 64, true, "large logits, causal"},
                                {1, 4, 2, 40, 300, 64, true, "large logits, GQA, Nq < Nk"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    AttentionParams p = AttentionParams::make(c.b, c.hq, c.hkv, c.nq, c.nk, c.d, c.causal);
    p.scale = 0.125f;
    const uint64_t seed = course::case_seed("bwd_magnitude", int64_t(idx));
    INFO(describe(c) << ", scale=1/8, logits ±1e3, seed = " << seed);
    auto q = course::random_normal_sixteenths(size_t(p.q_elems()), seed);
    auto k = course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1);
    course::Rng sign(seed + 4);
    const size_t D = size_t(c.d);
    for (size_t row = 0; row < q.size() / D; ++row) q[row * D] += sign.uniform() < 0.5 ? -250.f : 250.f;
    for (size_t row = 0; row < k.size() / D; ++row) k[row * D] = 32.f;
    run_and_check(p, make_problem(p, std::move(q), std::move(k), course::random_normal(size_t(p.kv_elems()), seed + 2),
                                  course::random_normal(size_t(p.q_elems()), seed + 3)));
  }
}

TEST_CASE("flash_backward rejects bad arguments before launching anything", "[day06][flash_backward][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 8, 8, 64, false);
  DeviceBuffer<float> in(size_t(good.q_elems())), l(size_t(good.seq_q) * good.heads_q);
  DeviceBuffer<float> dq(size_t(good.q_elems())), dk(size_t(good.kv_elems())), dv(size_t(good.kv_elems()));
  DeviceBuffer<float> ws(flash_backward_workspace_bytes(good) / sizeof(float) + 1);
  in.fill_zero();
  l.fill_zero();
  dq.poison();
  dk.poison();
  dv.poison();
  const float* x = in.data();
  const float* L = l.data();
  float* w = ws.data();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  auto call = [&](const float* q, const float* k, const float* v, const float* o, const float* d_o, const float* lse,
                  float* gq, float* gk, float* gv, float* work,
                  const AttentionParams& p) { flash_backward(q, k, v, o, d_o, lse, gq, gk, gv, work, p); };
  float* gq = dq.data();
  float* gk = dk.data();
  float* gv = dv.data();
  COURSE_CHECK_INVALID_ARGUMENT("q", call(nullptr, x, x, x, x, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("k", call(x, nullptr, x, x, x, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("v", call(x, x, nullptr, x, x, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("o", call(x, x, x, nullptr, x, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("d_o", call(x, x, x, x, nullptr, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("lse", call(x, x, x, x, x, nullptr, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("dq", call(x, x, x, x, x, L, nullptr, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("dk", call(x, x, x, x, x, L, gq, nullptr, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("dv", call(x, x, x, x, x, L, gq, gk, nullptr, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("workspace", call(x, x, x, x, x, L, gq, gk, gv, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("q", call(x + 1, x, x, x, x, L, gq, gk, gv, w, good));  // not 16-byte aligned
  COURSE_CHECK_INVALID_ARGUMENT("d_o", call(x, x, x, x, x + 1, L, gq, gk, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("dk", call(x, x, x, x, x, L, gq, gk + 2, gv, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("batch", call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.heads_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k", call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.seq_k = -3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.head_dim = 48; })));
  COURSE_CHECK_INVALID_ARGUMENT("window", call(x, x, x, x, x, L, gq, gk, gv, w, with([](auto& p) { p.window = 16; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (const DeviceBuffer<float>* b : {&dq, &dk, &dv})
    for (float y : b->download()) CHECK(course::is_poison_f32(y));  // nothing was written, not even dq's zeros
}
