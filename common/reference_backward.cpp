// CPU reference for the attention backward pass (declared in reference_backward.h).
//
// Two passes, as FlashAttention-2's backward splits the work, so that every output row is
// written by one worker and the result does not depend on the thread count:
//   1. per query row i (parallel over tiles of 8 rows): S_i, m_i, ℓ_i, L_i, O_i (the arithmetic
//      of ref::attention), then D_i, dP_i = dO_i Vᵀ, dS_i = P_i ∘ (dP_i − D_i), dQ_i = scale · dS_i K;
//   2. per key row j of a KV head (parallel over tiles of 8 keys): for every query head of the
//      group and every row i that sees j, recompute S_ij and dP_ij, P_ij = exp(S_ij − L_i), and
//      accumulate dV_j += P_ij dO_i, dK_j += dS_ij Q_i; finally dK_j *= scale.
// Every logit S_ij is the dot product Σ_t q_t k_t summed in ascending t in both passes (and in
// ref::attention), times scale, so both passes see the same P. The dot products run over a
// transposed copy of K (pass 1) or Q (pass 2), one key (query) per lane, which the compiler can
// vectorise without reordering any sum.
#include "reference_backward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "parallel.h"

namespace course::ref {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_inputs(const char* fn, const AttentionParams& p, size_t q, size_t k, size_t v, const size_t* d_o) {
  if (p.batch < 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.seq_q < 0 || p.seq_k < 0 || p.head_dim <= 0 ||
      p.heads_q % p.heads_kv != 0)
    throw std::invalid_argument(std::string(fn) + ": inconsistent AttentionParams");
  if (q != size_t(p.q_elems()) || k != size_t(p.kv_elems()) || v != size_t(p.kv_elems()) ||
      (d_o && *d_o != size_t(p.q_elems())))
    throw std::invalid_argument(std::string(fn) +
                                ": tensor sizes do not match AttentionParams (q, d_o: B·Hq·Nq·D; "
                                "k, v: B·Hkv·Nk·D)");
}

// [rows, n, d] -> [rows, d, n]
std::vector<double> transpose_heads(const std::vector<double>& x, int64_t heads, int n, int d) {
  std::vector<double> t(x.size());
  for (int64_t h = 0; h < heads; ++h) {
    const double* src = &x[size_t(h) * n * d];
    double* dst = &t[size_t(h) * n * d];
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < d; ++c) dst[size_t(c) * n + r] = src[size_t(r) * d + c];
  }
  return t;
}

// First and one-past-last key query i sees ([0, 0) when none). The masks of attention_params.h
// make this a contiguous band; the loops below still test key_visible for every (i, j).
void key_range(const AttentionParams& p, int i, int& j0, int& j1) {
  j0 = 0;
  while (j0 < p.seq_k && !p.key_visible(i, j0)) ++j0;
  j1 = p.seq_k;
  while (j1 > j0 && !p.key_visible(i, j1 - 1)) --j1;
}

void query_range(const AttentionParams& p, int j, int& i0, int& i1) {
  i0 = 0;
  while (i0 < p.seq_q && !p.key_visible(i0, j)) ++i0;
  i1 = p.seq_q;
  while (i1 > i0 && !p.key_visible(i1 - 1, j)) --i1;
}

// Rows (pass 1) or keys (pass 2) handled together by one task, so that a K (Q) head read from
// memory serves kTile of them. Tiling changes no sum's order: results do not depend on it.
constexpr int kTile = 8;

struct Result {
  std::vector<double> o, lse, delta, dq, dk, dv;
};

// Pass 1 (and the whole forward when d_o is null).
void query_rows(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                const std::vector<double>* d_o, const AttentionParams& p, Result& r) {
  const int D = p.head_dim, Nq = p.seq_q, Nk = p.seq_k;
  const double scale = p.softmax_scale();
  const int64_t kv_heads = int64_t(p.batch) * p.heads_kv;
  const std::vector<double> kt = transpose_heads(k, kv_heads, Nk, D);
  const std::vector<double> vt = d_o ? transpose_heads(v, kv_heads, Nk, D) : std::vector<double>();
  r.o.assign(size_t(p.o_elems()), 0.0);
  r.lse.assign(size_t(p.batch) * p.heads_q * Nq, kNegInf);
  if (d_o) {
    r.delta.assign(r.lse.size(), 0.0);
    r.dq.assign(size_t(p.q_elems()), 0.0);
  }
  const int tiles = (Nq + kTile - 1) / kTile;
  parallel_for(int64_t(p.batch) * p.heads_q * tiles, [&](int64_t task) {
    const int64_t bh = task / tiles;
    const int i_begin = int(task % tiles) * kTile, R = std::min(kTile, Nq - i_begin);
    const size_t row0 = size_t(bh) * Nq + i_begin;  // global index of the tile's first row
    const int b = int(bh / p.heads_q), h = int(bh % p.heads_q);
    const size_t kv_head = size_t(b) * p.heads_kv + p.kv_head_of(h);
    const double* kh = &k[kv_head * Nk * D];
    const double* vh = &v[kv_head * Nk * D];
    const double* kth = &kt[kv_head * Nk * D];  // [D, Nk]
    int lo = Nk, hi = 0;                        // the union of the tile's key bands
    for (int rr = 0; rr < R; ++rr) {
      int j0, j1;
      key_range(p, i_begin + rr, j0, j1);
      if (j0 < j1) lo = std::min(lo, j0), hi = std::max(hi, j1);
    }
    if (lo >= hi) return;  // no row sees a key: O = 0, L = −inf, D = 0, dQ = 0 (already there)
    const int W = hi - lo;
    auto visible = [&](int rr, int j) { return p.key_visible(i_begin + rr, j); };

    // S over the band: s[rr][j] = scale · Σ_t q_t k_jt, t ascending for every (row, key).
    std::vector<double> s(size_t(R) * W, 0.0);
    for (int t = 0; t < D; ++t) {
      const double* krow = kth + size_t(t) * Nk + lo;
      for (int rr = 0; rr < R; ++rr) {
        const double qt = q[(row0 + rr) * D + t];
        double* srow = &s[size_t(rr) * W];
        for (int j = 0; j < W; ++j) srow[j] += qt * krow[j];
      }
    }
    std::vector<double> m(R, kNegInf), l(R, 0.0), L(R, kNegInf), acc(size_t(R) * D, 0.0);
    for (int rr = 0; rr < R; ++rr)
      for (int j = lo; j < hi; ++j) {
        double& sij = s[size_t(rr) * W + (j - lo)];
        sij *= scale;
        if (visible(rr, j)) m[rr] = std::max(m[rr], sij);
      }
    // O_i = Σ_j exp(S_ij − m_i) V_j / ℓ_i, the arithmetic of ref::attention (j ascending).
    for (int j = lo; j < hi; ++j) {
      const double* vj = vh + size_t(j) * D;
      for (int rr = 0; rr < R; ++rr) {
        if (!visible(rr, j)) continue;
        const double w = std::exp(s[size_t(rr) * W + (j - lo)] - m[rr]);
        l[rr] += w;
        double* a = &acc[size_t(rr) * D];
        for (int t = 0; t < D; ++t) a[t] += w * vj[t];
      }
    }
    for (int rr = 0; rr < R; ++rr) {
      if (m[rr] == kNegInf) continue;  // this row sees no key
      double* oi = &r.o[(row0 + rr) * D];
      for (int t = 0; t < D; ++t) oi[t] = acc[size_t(rr) * D + t] / l[rr];
      L[rr] = m[rr] + std::log(l[rr]);
      r.lse[row0 + rr] = L[rr];
    }
    if (!d_o) return;

    // D_i = rowsum(dO_i ∘ O_i);  dP_ij = dO_i · V_j;  dS_ij = P_ij (dP_ij − D_i).
    std::vector<double> delta(R, 0.0);
    for (int rr = 0; rr < R; ++rr) {
      const double* doi = &(*d_o)[(row0 + rr) * D];
      const double* oi = &r.o[(row0 + rr) * D];
      for (int t = 0; t < D; ++t) delta[rr] += doi[t] * oi[t];
      r.delta[row0 + rr] = delta[rr];
    }
    const double* vth = &vt[kv_head * Nk * D];
    std::vector<double> dp(size_t(R) * W, 0.0);
    for (int t = 0; t < D; ++t) {
      const double* vrow = vth + size_t(t) * Nk + lo;
      for (int rr = 0; rr < R; ++rr) {
        const double g_t = (*d_o)[(row0 + rr) * D + t];
        double* dprow = &dp[size_t(rr) * W];
        for (int j = 0; j < W; ++j) dprow[j] += g_t * vrow[j];
      }
    }
    // dQ_i = scale · Σ_j dS_ij K_j.
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = lo; j < hi; ++j) {
      const double* kj = kh + size_t(j) * D;
      for (int rr = 0; rr < R; ++rr) {
        if (!visible(rr, j)) continue;
        const size_t e = size_t(rr) * W + (j - lo);
        const double pij = std::exp(s[e] - L[rr]);
        const double ds = pij * (dp[e] - delta[rr]);
        double* a = &acc[size_t(rr) * D];
        for (int t = 0; t < D; ++t) a[t] += ds * kj[t];
      }
    }
    for (int rr = 0; rr < R; ++rr) {
      if (m[rr] == kNegInf) continue;
      double* dqi = &r.dq[(row0 + rr) * D];
      for (int t = 0; t < D; ++t) dqi[t] = scale * acc[size_t(rr) * D + t];
    }
  });
}

// Pass 2: dK and dV, one tile of key rows of one KV head per task, summed over the group's
// query heads (g ascending, then i ascending, for every key).
void key_rows(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
              const std::vector<double>& d_o, const AttentionParams& p, Result& r) {
  const int D = p.head_dim, Nq = p.seq_q, Nk = p.seq_k, G = p.group_size();
  const double scale = p.softmax_scale();
  const int64_t q_heads = int64_t(p.batch) * p.heads_q;
  const std::vector<double> qt = transpose_heads(q, q_heads, Nq, D);
  const std::vector<double> d_ot = transpose_heads(d_o, q_heads, Nq, D);
  r.dk.assign(size_t(p.kv_elems()), 0.0);
  r.dv.assign(size_t(p.kv_elems()), 0.0);
  const int tiles = (Nk + kTile - 1) / kTile;
  parallel_for(int64_t(p.batch) * p.heads_kv * tiles, [&](int64_t task) {
    const int64_t bhk = task / tiles;  // b · Hkv + hk
    const int j_begin = int(task % tiles) * kTile, R = std::min(kTile, Nk - j_begin);
    const size_t krow0 = size_t(bhk) * Nk + j_begin;  // global index of the tile's first key
    const int b = int(bhk / p.heads_kv), hk = int(bhk % p.heads_kv);
    int lo = Nq, hi = 0;  // the union of the rows that see the tile's keys
    for (int rr = 0; rr < R; ++rr) {
      int i0, i1;
      query_range(p, j_begin + rr, i0, i1);
      if (i0 < i1) lo = std::min(lo, i0), hi = std::max(hi, i1);
    }
    if (lo >= hi) return;  // no query sees these keys: dK = dV = 0
    const int W = hi - lo;
    std::vector<double> s(size_t(R) * W), dp(size_t(R) * W);
    std::vector<double> dk(size_t(R) * D, 0.0), dv(size_t(R) * D, 0.0);
    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g;  // the query heads reading KV head hk: h / G == hk
      const size_t qhead = size_t(b) * p.heads_q + h;
      const double* qh = &q[qhead * Nq * D];
      const double* doh = &d_o[qhead * Nq * D];
      const double* qth = &qt[qhead * Nq * D];     // [D, Nq]
      const double* doth = &d_ot[qhead * Nq * D];  // [D, Nq]
      const double* Lh = &r.lse[qhead * Nq];
      const double* Dh = &r.delta[qhead * Nq];
      std::fill(s.begin(), s.end(), 0.0);
      std::fill(dp.begin(), dp.end(), 0.0);
      for (int t = 0; t < D; ++t) {
        const double* qrow = qth + size_t(t) * Nq + lo;
        const double* dorow = doth + size_t(t) * Nq + lo;
        for (int rr = 0; rr < R; ++rr) {
          const double kt = k[(krow0 + rr) * D + t], vt = v[(krow0 + rr) * D + t];
          double* srow = &s[size_t(rr) * W];
          double* dprow = &dp[size_t(rr) * W];
          for (int i = 0; i < W; ++i) {
            srow[i] += qrow[i] * kt;  // q_it · k_jt: the product pass 1 forms, in the same t order
            dprow[i] += dorow[i] * vt;
          }
        }
      }
      for (int i = lo; i < hi; ++i) {
        if (Lh[i] == kNegInf) continue;  // a row that sees no key adds nothing
        const double* qi = qh + size_t(i) * D;
        const double* doi = doh + size_t(i) * D;
        for (int rr = 0; rr < R; ++rr) {
          if (!p.key_visible(i, j_begin + rr)) continue;
          const size_t e = size_t(rr) * W + (i - lo);
          const double pij = std::exp(scale * s[e] - Lh[i]);
          const double ds = pij * (dp[e] - Dh[i]);
          double* dvj = &dv[size_t(rr) * D];
          double* dkj = &dk[size_t(rr) * D];
          for (int t = 0; t < D; ++t) {
            dvj[t] += pij * doi[t];
            dkj[t] += ds * qi[t];
          }
        }
      }
    }
    for (int rr = 0; rr < R; ++rr)
      for (int t = 0; t < D; ++t) {
        r.dk[(krow0 + rr) * D + t] = scale * dk[size_t(rr) * D + t];
        r.dv[(krow0 + rr) * D + t] = dv[size_t(rr) * D + t];
      }
  });
}

std::vector<double> widen(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }
std::vector<float> narrow(const std::vector<double>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i]);
  return y;
}

Result forward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
               const AttentionParams& p) {
  Result r;
  query_rows(q, k, v, nullptr, p, r);
  return r;
}

Result backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                const std::vector<double>& d_o, const AttentionParams& p) {
  Result r;
  query_rows(q, k, v, &d_o, p, r);
  key_rows(q, k, v, d_o, p, r);
  return r;
}

}  // namespace

AttentionForward attention_forward_lse(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, const AttentionParams& p) {
  check_inputs("ref::attention_forward_lse", p, q.size(), k.size(), v.size(), nullptr);
  const Result r = forward(widen(q), widen(k), widen(v), p);
  return {narrow(r.o), narrow(r.lse)};
}

AttentionForwardF64 attention_forward_lse_f64(const std::vector<double>& q, const std::vector<double>& k,
                                              const std::vector<double>& v, const AttentionParams& p) {
  check_inputs("ref::attention_forward_lse_f64", p, q.size(), k.size(), v.size(), nullptr);
  Result r = forward(q, k, v, p);
  return {std::move(r.o), std::move(r.lse)};
}

AttentionBackward attention_backward(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const std::vector<float>& d_o,
                                     const AttentionParams& p) {
  const size_t n_do = d_o.size();
  check_inputs("ref::attention_backward", p, q.size(), k.size(), v.size(), &n_do);
  const Result r = backward(widen(q), widen(k), widen(v), widen(d_o), p);
  return {narrow(r.o), narrow(r.lse), narrow(r.delta), narrow(r.dq), narrow(r.dk), narrow(r.dv)};
}

AttentionBackwardF64 attention_backward_f64(const std::vector<double>& q, const std::vector<double>& k,
                                            const std::vector<double>& v, const std::vector<double>& d_o,
                                            const AttentionParams& p) {
  const size_t n_do = d_o.size();
  check_inputs("ref::attention_backward_f64", p, q.size(), k.size(), v.size(), &n_do);
  Result r = backward(q, k, v, d_o, p);
  return {std::move(r.o), std::move(r.lse), std::move(r.delta), std::move(r.dq), std::move(r.dk), std::move(r.dv)};
}

}  // namespace course::ref
