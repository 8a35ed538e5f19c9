// The backward reference (common/reference_backward.h) checked against central finite differences
// of the forward pass and against closed forms. Every backward exercise trusts this file's
// subject, so each property below is one a wrong reference would break.
//
// The finite differences differentiate the loss f = Σ dO ∘ O, whose gradients are exactly dQ, dK
// and dV; they run on the double twins (attention_forward_lse_f64 / attention_backward_f64) so
// that the step h is not drowned by fp32 rounding of the inputs.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "catch_compat.h"
#include "random.h"
#include "reference.h"
#include "reference_backward.h"

using course::AttentionParams;
namespace ref = course::ref;

namespace {

bool near(double a, double b, double tol = 1e-6) { return std::fabs(a - b) <= tol * (1.0 + std::fabs(b)); }

std::vector<float> randn(size_t n, int64_t idx, float stddev = 1.f) {
  return course::random_normal(n, course::case_seed("reference-backward", idx), 0.f, stddev);
}

std::vector<double> widen(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

AttentionParams make(int b, int hq, int hkv, int nq, int nk, int d, bool causal = false, int window = -1) {
  return AttentionParams::make(b, hq, hkv, nq, nk, d, causal, window);
}

std::string describe(const AttentionParams& p) {
  return "B=" + std::to_string(p.batch) + " Hq=" + std::to_string(p.heads_q) + " Hkv=" + std::to_string(p.heads_kv) +
         " Nq=" + std::to_string(p.seq_q) + " Nk=" + std::to_string(p.seq_k) + " D=" + std::to_string(p.head_dim) +
         (p.causal ? " causal" : "") + (p.window >= 0 ? " window=" + std::to_string(p.window) : "") +
         " scale=" + std::to_string(p.softmax_scale());
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::fabs(v));
  return m;
}

// max |a − b| / max |b|: the error relative to the tensor's scale (a per-element relative error
// is meaningless for the gradient entries that are zero or nearly so).
template <class A, class B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

template <class T>
bool all_finite(const std::vector<T>& x) {
  return std::all_of(x.begin(), x.end(), [](T v) { return std::isfinite(v); });
}

// f = Σ dO ∘ O in double.
double loss(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& d_o, const AttentionParams& p) {
  const auto o = ref::attention_forward_lse_f64(q, k, v, p).o;
  double f = 0;
  for (size_t i = 0; i < o.size(); ++i) f += d_o[i] * o[i];
  return f;
}

// Central differences of f with respect to every element of one input.
std::vector<double> finite_diff(std::vector<double>& x, const std::function<double()>& f, double h) {
  std::vector<double> g(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    const double x0 = x[e];
    x[e] = x0 + h;
    const double fp = f();
    x[e] = x0 - h;
    const double fm = f();
    x[e] = x0;
    g[e] = (fp - fm) / (2 * h);
  }
  return g;
}

struct Inputs {
  std::vector<float> q, k, v, d_o;
};

Inputs random_inputs(const AttentionParams& p, int64_t idx, float stddev = 1.f) {
  return {randn(p.q_elems(), 4 * idx, stddev), randn(p.kv_elems(), 4 * idx + 1, stddev),
          randn(p.kv_elems(), 4 * idx + 2, stddev), randn(p.q_elems(), 4 * idx + 3)};
}

// Does query row i of params p see any key?
bool sees_a_key(const AttentionParams& p, int i) {
  for (int j = 0; j < p.seq_k; ++j)
    if (p.key_visible(i, j)) return true;
  return false;
}

}  // namespace

TEST_CASE("dQ dK dV equal central finite differences of the forward pass", "[reference][backward][fd]") {
  auto scaled = make(1, 2, 1, 5, 6, 4, true);
  scaled.scale = 0.3f;
  const std::vector<AttentionParams> cases{
      make(1, 1, 1, 5, 5, 4),              // MHA, square
      make(2, 4, 2, 6, 6, 8, true),        // causal, GQA 4:2
      make(1, 4, 1, 7, 4, 6, true),        // causal Nq > Nk: rows 0..2 see no key; GQA 4:1
      make(1, 4, 2, 3, 7, 5),              // Nq < Nk, not causal
      make(1, 4, 4, 3, 7, 8, true),        // causal Nq < Nk (bottom-right)
      make(1, 4, 2, 7, 7, 4, true, 2),     // sliding window 2
      make(1, 2, 2, 3, 7, 4, false, 1),    // window with Nq < Nk: keys 0..2 unseen
      scaled,                              // an explicit scale
      make(1, 2, 1, 10, 19, 4, true, 12),  // more rows and keys than one tile of 8 (partial tiles)
  };
  const double h = 1e-5;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& p = cases[c];
    INFO(describe(p));
    const auto in = random_inputs(p, int64_t(c));
    auto q = widen(in.q), k = widen(in.k), v = widen(in.v);
    const auto d_o = widen(in.d_o);
    const auto g = ref::attention_backward_f64(q, k, v, d_o, p);
    const auto f = [&] { return loss(q, k, v, d_o, p); };
    const double eq = rel_err(finite_diff(q, f, h), g.dq);
    const double ek = rel_err(finite_diff(k, f, h), g.dk);
    const double ev = rel_err(finite_diff(v, f, h), g.dv);
    CAPTURE(eq, ek, ev);
    CHECK(eq <= 1e-6);
    CHECK(ek <= 1e-6);
    CHECK(ev <= 1e-6);
    CHECK(max_abs(g.dq) > 1e-3);  // a gradient of zeros would match a constant loss
    CHECK(max_abs(g.dk) > 1e-3);
    CHECK(max_abs(g.dv) > 1e-3);

    // The float API is the double one rounded once.
    const auto gf = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    CHECK(rel_err(gf.dq, g.dq) <= 1e-6);
    CHECK(rel_err(gf.dk, g.dk) <= 1e-6);
    CHECK(rel_err(gf.dv, g.dv) <= 1e-6);
    CHECK(rel_err(gf.o, g.o) <= 1e-6);
    CHECK(rel_err(gf.delta, g.delta) <= 1e-6);
    CHECK(all_finite(gf.dq));
    CHECK(all_finite(gf.dk));
    CHECK(all_finite(gf.dv));
  }
}

// The formulas of reference_backward.h transcribed literally: P materialised per head, one
// (i, j) at a time. Shapes larger than the reference's tiles of 8 rows and 8 keys.
TEST_CASE("the backward equals a literal transcription of its formulas", "[reference][backward]") {
  for (const auto& p : {make(2, 4, 2, 19, 23, 8, true), make(1, 3, 1, 21, 17, 4, true, 5), make(1, 2, 2, 9, 30, 4)}) {
    INFO(describe(p));
    const int D = p.head_dim, Nq = p.seq_q, Nk = p.seq_k;
    const double scale = p.softmax_scale();
    const auto in = random_inputs(p, 10);
    const auto g = ref::attention_backward_f64(widen(in.q), widen(in.k), widen(in.v), widen(in.d_o), p);
    std::vector<double> o(p.q_elems(), 0.0), lse(size_t(p.batch) * p.heads_q * Nq), dq(p.q_elems(), 0.0),
        dk(p.kv_elems(), 0.0), dv(p.kv_elems(), 0.0);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        const size_t qh = (size_t(b) * p.heads_q + h) * Nq, kh = (size_t(b) * p.heads_kv + p.kv_head_of(h)) * Nk;
        auto Q = [&](int i, int t) { return double(in.q[(qh + i) * D + t]); };
        auto dO = [&](int i, int t) { return double(in.d_o[(qh + i) * D + t]); };
        auto K = [&](int j, int t) { return double(in.k[(kh + j) * D + t]); };
        auto V = [&](int j, int t) { return double(in.v[(kh + j) * D + t]); };
        std::vector<double> S(size_t(Nq) * Nk, -INFINITY), P(size_t(Nq) * Nk, 0.0);
        for (int i = 0; i < Nq; ++i) {
          double m = -INFINITY, l = 0;
          for (int j = 0; j < Nk; ++j) {
            if (!p.key_visible(i, j)) continue;
            double dot = 0;
            for (int t = 0; t < D; ++t) dot += Q(i, t) * K(j, t);
            S[i * Nk + j] = scale * dot;
            m = std::max(m, S[i * Nk + j]);
          }
          for (int j = 0; j < Nk; ++j)
            if (p.key_visible(i, j)) l += std::exp(S[i * Nk + j] - m);
          const double L = l > 0 ? m + std::log(l) : -INFINITY;
          lse[qh + i] = L;
          for (int j = 0; j < Nk; ++j)
            if (p.key_visible(i, j)) P[i * Nk + j] = std::exp(S[i * Nk + j] - L);
          for (int j = 0; j < Nk; ++j)
            for (int t = 0; t < D; ++t) o[(qh + i) * D + t] += P[i * Nk + j] * V(j, t);
        }
        for (int i = 0; i < Nq; ++i) {
          double Di = 0;
          for (int t = 0; t < D; ++t) Di += dO(i, t) * o[(qh + i) * D + t];
          for (int j = 0; j < Nk; ++j) {
            double dP = 0;
            for (int t = 0; t < D; ++t) dP += dO(i, t) * V(j, t);
            const double dS = P[i * Nk + j] * (dP - Di);
            for (int t = 0; t < D; ++t) {
              dv[(kh + j) * D + t] += P[i * Nk + j] * dO(i, t);
              dq[(qh + i) * D + t] += scale * dS * K(j, t);
              dk[(kh + j) * D + t] += scale * dS * Q(i, t);
            }
          }
        }
      }
    CHECK(rel_err(g.o, o) <= 1e-12);
    CHECK(rel_err(g.dq, dq) <= 1e-12);
    CHECK(rel_err(g.dk, dk) <= 1e-12);
    CHECK(rel_err(g.dv, dv) <= 1e-12);
    for (size_t r = 0; r < lse.size(); ++r) {
      if (lse[r] == -INFINITY)
        CHECK(g.lse[r] == -INFINITY);
      else
        CHECK(near(g.lse[r], lse[r], 1e-12));
    }
  }
}

TEST_CASE("rows that see no key and keys that no row sees get exact zeros", "[reference][backward]") {
  // Causal Nq > Nk: query rows 0 .. Nq − Nk − 1 see nothing. Window 1 with Nq < Nk: keys
  // before the first row's window are seen by nobody.
  for (const auto& p : {make(2, 4, 2, 6, 3, 8, true), make(1, 2, 1, 3, 8, 4, false, 1)}) {
    INFO(describe(p));
    const auto in = random_inputs(p, 20);
    const auto g = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    const int D = p.head_dim;
    for (int64_t bh = 0; bh < int64_t(p.batch) * p.heads_q; ++bh)
      for (int i = 0; i < p.seq_q; ++i) {
        if (sees_a_key(p, i)) continue;
        const size_t row = size_t(bh) * p.seq_q + i;
        CHECK(g.lse[row] == -std::numeric_limits<float>::infinity());
        CHECK(g.delta[row] == 0.f);
        for (int t = 0; t < D; ++t) {
          CHECK(g.o[row * D + t] == 0.f);
          CHECK(g.dq[row * D + t] == 0.f);
        }
      }
    for (int64_t bh = 0; bh < int64_t(p.batch) * p.heads_kv; ++bh)
      for (int j = 0; j < p.seq_k; ++j) {
        bool seen = false;
        for (int i = 0; i < p.seq_q; ++i) seen = seen || p.key_visible(i, j);
        if (seen) continue;
        for (int t = 0; t < D; ++t) {
          CHECK(g.dk[(size_t(bh) * p.seq_k + j) * D + t] == 0.f);
          CHECK(g.dv[(size_t(bh) * p.seq_k + j) * D + t] == 0.f);
        }
      }
    CHECK(all_finite(g.o));
    CHECK(all_finite(g.dq));
    CHECK(all_finite(g.dk));
    CHECK(all_finite(g.dv));
  }
}

// Q = 0: every visible score is 0, so P_ij = 1/n_i over the n_i keys row i sees, O_i = V̄_i (the
// mean of those V rows), and
//   dV_j = Σ_{i sees j} dO_i / n_i
//   dK   = scale · dSᵀ Q = 0
//   dQ_i = scale · Σ_j P_ij (dO_i · (V_j − V̄_i)) K_j = scale / n_i · Σ_j (dO_i · (V_j − V̄_i)) (K_j − K̄_i)
// i.e. scale times the covariance of K and dO_i · V over the visible keys: dQ_i = 0 when row i
// sees one key, or when the V rows it sees are all equal, or the K rows are.
TEST_CASE("uniform scores (Q = 0): dV averages dO and dQ is a covariance and dK is 0",
          "[reference][backward][closed-form]") {
  for (const auto& p : {make(1, 2, 1, 4, 6, 4), make(2, 4, 2, 7, 5, 8, true), make(1, 2, 2, 9, 9, 4, true, 3)}) {
    INFO(describe(p));
    const int D = p.head_dim, G = p.group_size();
    const double scale = p.softmax_scale();
    const std::vector<float> q(p.q_elems(), 0.f);
    const auto k = randn(p.kv_elems(), 1030), v = randn(p.kv_elems(), 1031), d_o = randn(p.q_elems(), 1032);
    const auto g = ref::attention_backward(q, k, v, d_o, p);
    for (float x : g.dk) CHECK(x == 0.f);
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk) {
        const size_t kv = (size_t(b) * p.heads_kv + hk) * p.seq_k * D;
        // dV_j = Σ over the group's heads and the rows i that see j of dO_i / n_i.
        std::vector<double> dv(size_t(p.seq_k) * D, 0.0);
        for (int hh = 0; hh < G; ++hh) {
          const size_t qh = (size_t(b) * p.heads_q + hk * G + hh) * p.seq_q * D;
          for (int i = 0; i < p.seq_q; ++i) {
            int n = 0;
            double vbar[8] = {}, kbar[8] = {};
            for (int j = 0; j < p.seq_k; ++j)
              if (p.key_visible(i, j)) {
                ++n;
                for (int t = 0; t < D; ++t) {
                  vbar[t] += v[kv + j * D + t];
                  kbar[t] += k[kv + j * D + t];
                }
              }
            std::vector<double> dq(D, 0.0);
            for (int t = 0; t < D; ++t) {
              vbar[t] = n ? vbar[t] / n : 0;
              kbar[t] = n ? kbar[t] / n : 0;
            }
            for (int j = 0; j < p.seq_k; ++j) {
              if (!p.key_visible(i, j)) continue;
              double c = 0;  // dO_i · (V_j − V̄_i)
              for (int t = 0; t < D; ++t) {
                dv[j * D + t] += double(d_o[qh + i * D + t]) / n;
                c += double(d_o[qh + i * D + t]) * (v[kv + j * D + t] - vbar[t]);
              }
              for (int t = 0; t < D; ++t) dq[t] += scale / n * c * (k[kv + j * D + t] - kbar[t]);
            }
            for (int t = 0; t < D; ++t) {
              CHECK(near(g.dq[qh + i * D + t], dq[t]));
              CHECK(near(g.o[qh + i * D + t], vbar[t]));
              if (n == 1) CHECK(g.dq[qh + i * D + t] == 0.f);  // one key: P = 1, dS = 0
            }
          }
        }
        for (int e = 0; e < p.seq_k * D; ++e) CHECK(near(g.dv[kv + e], dv[e]));
      }
  }
}

TEST_CASE("dQ vanishes when the visible V rows are equal or the K rows are", "[reference][backward][closed-form]") {
  const auto p = make(1, 4, 2, 6, 8, 8, true);
  const auto in = random_inputs(p, 40);
  const auto row = randn(p.head_dim, 1041);
  std::vector<float> same(p.kv_elems());
  for (size_t e = 0; e < same.size(); ++e) same[e] = row[e % p.head_dim];
  // Equal V rows: O_i = V_j, so dP_ij = dO_i · V_j = D_i for every j and dS = 0: dQ = dK = 0
  // (up to the rounding of O_i = Σ_j P_ij V_j, ~1e-16).
  const auto gv = ref::attention_backward(in.q, in.k, same, in.d_o, p);
  CHECK(max_abs(widen(gv.dq)) <= 1e-12);
  CHECK(max_abs(widen(gv.dk)) <= 1e-12);
  // Equal K rows: P is uniform whatever Q is; dQ_i = scale · K · Σ_j dS_ij = 0 up to rounding.
  const auto gk = ref::attention_backward(in.q, same, in.v, in.d_o, p);
  CHECK(max_abs(widen(gk.dq)) <= 1e-12);
  CHECK(max_abs(widen(gk.dk)) > 1e-3);  // dK_j = scale · Σ_i dS_ij Q_i need not vanish
}

// One logit far above the rest of its row: P ≈ one-hot on that key, O_i = V_hot, L_i = S_i,hot,
// dV_hot = Σ_i dO_i (over every query head of the group), dV of the other keys ≈ 0, and
// dS_i,hot = 1 · (dO_i · V_hot − dO_i · O_i) = 0, so dK ≈ 0 and dQ ≈ 0.
TEST_CASE("one dominant key: its dV is the sum of dO and dK and dQ vanish", "[reference][backward][closed-form]") {
  struct Case {
    AttentionParams p;
    int hot;
  };
  // Non-causal with the hot key in the middle; causal with key 0, which every row sees.
  for (const auto& c : {Case{make(1, 2, 1, 4, 6, 8), 3}, Case{make(2, 4, 2, 5, 5, 8, true), 0}}) {
    const auto& p = c.p;
    INFO(describe(p));
    const int D = p.head_dim, G = p.group_size();
    auto in = random_inputs(p, 50);
    for (int64_t r = 0; r < int64_t(p.batch) * p.heads_q * p.seq_q; ++r) in.q[r * D] = 1.f;
    for (int64_t r = 0; r < int64_t(p.batch) * p.heads_kv * p.seq_k; ++r)
      in.k[r * D] = (r % p.seq_k == c.hot) ? 400.f : 0.f;  // S_hot − S_other ≈ 400·scale ≈ 141
    const auto g = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    for (float x : g.dk) CHECK(std::fabs(x) <= 1e-12f);
    for (float x : g.dq) CHECK(std::fabs(x) <= 1e-12f);
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk) {
        const size_t kv = (size_t(b) * p.heads_kv + hk) * p.seq_k * D;
        std::vector<double> sum(D, 0.0);
        for (int hh = 0; hh < G; ++hh) {
          const size_t head = size_t(b) * p.heads_q + hk * G + hh;
          for (int i = 0; i < p.seq_q; ++i) {
            const size_t qi = (head * p.seq_q + i) * D;
            double s = 0;
            for (int t = 0; t < D; ++t) {
              sum[t] += in.d_o[qi + t];
              s += double(in.q[qi + t]) * in.k[kv + c.hot * D + t];
              CHECK(near(g.o[qi + t], in.v[kv + c.hot * D + t]));
            }
            CHECK(near(g.lse[head * p.seq_q + i], p.softmax_scale() * s));
          }
        }
        for (int j = 0; j < p.seq_k; ++j)
          for (int t = 0; t < D; ++t) {
            if (j == c.hot)
              CHECK(near(g.dv[kv + j * D + t], sum[t]));
            else
              CHECK(std::fabs(g.dv[kv + j * D + t]) <= 1e-12f);
          }
      }
  }
}

TEST_CASE("GQA backward equals MHA with K and V repeated and dK and dV summed over the group",
          "[reference][backward][gqa]") {
  for (const auto& p : {make(2, 4, 2, 6, 9, 8, true), make(1, 4, 1, 7, 5, 4, true), make(2, 4, 2, 8, 8, 4, true, 3),
                        make(1, 4, 1, 5, 7, 8)}) {
    INFO(describe(p));
    const int D = p.head_dim, G = p.group_size(), n = p.seq_k * D;
    const auto in = random_inputs(p, 60);
    std::vector<float> k_rep, v_rep;  // [B, Hq, Nk, D], head h holding KV head h / G
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        const size_t src = (size_t(b) * p.heads_kv + h / G) * n;
        k_rep.insert(k_rep.end(), in.k.begin() + src, in.k.begin() + src + n);
        v_rep.insert(v_rep.end(), in.v.begin() + src, in.v.begin() + src + n);
      }
    auto mha_p = p;
    mha_p.heads_kv = p.heads_q;
    const auto gqa = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    const auto mha = ref::attention_backward(in.q, k_rep, v_rep, in.d_o, mha_p);
    CHECK(gqa.o == mha.o);  // the same arithmetic on the same numbers
    CHECK(gqa.lse == mha.lse);
    CHECK(gqa.delta == mha.delta);
    CHECK(gqa.dq == mha.dq);
    // dK, dV: compare in double, where only the order of the group sum differs.
    const auto gqa64 = ref::attention_backward_f64(widen(in.q), widen(in.k), widen(in.v), widen(in.d_o), p);
    const auto mha64 = ref::attention_backward_f64(widen(in.q), widen(k_rep), widen(v_rep), widen(in.d_o), mha_p);
    std::vector<double> dk_sum(p.kv_elems(), 0.0), dv_sum(p.kv_elems(), 0.0);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int e = 0; e < n; ++e) {
          dk_sum[(size_t(b) * p.heads_kv + h / G) * n + e] += mha64.dk[(size_t(b) * p.heads_q + h) * n + e];
          dv_sum[(size_t(b) * p.heads_kv + h / G) * n + e] += mha64.dv[(size_t(b) * p.heads_q + h) * n + e];
        }
    CHECK(rel_err(gqa64.dk, dk_sum) <= 1e-12);
    CHECK(rel_err(gqa64.dv, dv_sum) <= 1e-12);
  }
}

TEST_CASE("LSE equals a naive log-sum-exp and O equals ref::attention", "[reference][backward][lse]") {
  for (const auto& p : {make(2, 4, 2, 6, 9, 8), make(1, 4, 1, 7, 4, 8, true), make(1, 2, 2, 9, 9, 4, true, 2),
                        make(1, 2, 1, 3, 8, 6, true)}) {
    INFO(describe(p));
    const int D = p.head_dim, G = p.group_size();
    const auto in = random_inputs(p, 70, 2.f);
    const auto fwd = ref::attention_forward_lse(in.q, in.k, in.v, p);
    REQUIRE(fwd.lse.size() == size_t(p.batch) * p.heads_q * p.seq_q);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        const size_t head = size_t(b) * p.heads_q + h;
        const size_t kv = (size_t(b) * p.heads_kv + h / G) * p.seq_k * D;
        for (int i = 0; i < p.seq_q; ++i) {
          double sum = 0;  // Σ_j exp(S_ij): no max subtracted, the logits here are small
          for (int j = 0; j < p.seq_k; ++j) {
            if (!p.key_visible(i, j)) continue;
            double s = 0;
            for (int t = 0; t < D; ++t) s += double(in.q[(head * p.seq_q + i) * D + t]) * in.k[kv + j * D + t];
            sum += std::exp(double(p.softmax_scale()) * s);
          }
          const float lse = fwd.lse[head * p.seq_q + i];
          if (sum == 0) {
            CHECK(lse == -std::numeric_limits<float>::infinity());
            for (int t = 0; t < D; ++t) CHECK(fwd.o[(head * p.seq_q + i) * D + t] == 0.f);
          } else {
            CHECK(near(lse, std::log(sum)));
          }
        }
      }
    const auto o = ref::attention(in.q, in.k, in.v, p);
    for (size_t e = 0; e < o.size(); ++e) CHECK(near(fwd.o[e], o[e], 1e-7));
    // The backward pass reports the same forward.
    const auto g = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    CHECK(g.o == fwd.o);
    CHECK(g.lse == fwd.lse);
    for (size_t r = 0; r < g.delta.size(); ++r) {  // D_i = rowsum(dO_i ∘ O_i)
      double d = 0;
      for (int t = 0; t < D; ++t) d += double(in.d_o[r * D + t]) * fwd.o[r * D + t];
      CHECK(near(g.delta[r], d, 1e-5));
    }
  }
}

// Σ_j dS_ij = Σ_j P_ij dP_ij − D_i Σ_j P_ij = dO_i · O_i − D_i = 0, so Σ_j dK_j = 0 for every KV
// head; and Σ_j dV_j = Σ_i (Σ_j P_ij) dO_i = Σ of dO over the rows that see a key.
TEST_CASE("gradients stay finite at logits of magnitude 1e3 and keep their sum rules", "[reference][backward][large]") {
  for (const auto& p : {make(2, 4, 2, 16, 16, 8, true), make(1, 4, 1, 12, 9, 8, true), make(1, 2, 1, 9, 13, 8)}) {
    INFO(describe(p));
    const int D = p.head_dim, G = p.group_size();
    const auto in = random_inputs(p, 80, 32.f);  // |S| = |q·k|/sqrt(8) ~ 1e3
    const auto g = ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
    double max_logit = 0;
    for (int i = 0; i < p.seq_q; ++i)
      for (int j = 0; j < p.seq_k; ++j) {
        double s = 0;
        for (int t = 0; t < D; ++t) s += double(in.q[i * D + t]) * in.k[j * D + t];
        max_logit = std::max(max_logit, std::fabs(s * p.softmax_scale()));
      }
    CHECK(max_logit > 1e3);
    CHECK(all_finite(g.o));
    CHECK(all_finite(g.delta));
    CHECK(all_finite(g.dq));
    CHECK(all_finite(g.dk));
    CHECK(all_finite(g.dv));
    for (float x : g.lse) CHECK(!std::isnan(x));
    const double dk_scale = std::max(1.0, double(*std::max_element(g.dk.begin(), g.dk.end(), [](float a, float b) {
                                       return std::fabs(a) < std::fabs(b);
                                     })));
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk)
        for (int t = 0; t < D; ++t) {
          double dk_sum = 0, dv_sum = 0, do_sum = 0;
          for (int j = 0; j < p.seq_k; ++j) {
            dk_sum += g.dk[((size_t(b) * p.heads_kv + hk) * p.seq_k + j) * D + t];
            dv_sum += g.dv[((size_t(b) * p.heads_kv + hk) * p.seq_k + j) * D + t];
          }
          for (int hh = 0; hh < G; ++hh)
            for (int i = 0; i < p.seq_q; ++i)
              if (sees_a_key(p, i)) do_sum += in.d_o[((size_t(b) * p.heads_q + hk * G + hh) * p.seq_q + i) * D + t];
          CHECK(std::fabs(dk_sum) <= 1e-5 * p.seq_k * std::fabs(dk_scale));
          CHECK(near(dv_sum, do_sum, 1e-5));
        }
  }
}

TEST_CASE("the backward reference rejects inconsistent parameters and sizes", "[reference][backward]") {
  const auto p = make(1, 2, 1, 3, 4, 4);
  const std::vector<float> q(p.q_elems()), kv(p.kv_elems());
  CHECK_NOTHROW(ref::attention_backward(q, kv, kv, q, p));
  CHECK_THROWS_AS(ref::attention_backward(q, kv, kv, kv, p), std::invalid_argument);  // dO too small
  CHECK_THROWS_AS(ref::attention_backward(kv, kv, kv, q, p), std::invalid_argument);
  CHECK_THROWS_AS(ref::attention_forward_lse(q, q, kv, p), std::invalid_argument);
  CHECK_THROWS_AS(ref::attention_backward(q, kv, kv, q, make(1, 3, 2, 3, 4, 4)), std::invalid_argument);
}
