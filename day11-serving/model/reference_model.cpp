#include "reference_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "fp16_host.h"
#include "parallel.h"

namespace serving {

namespace {

// fp16 rounding of an activation where the engine stores one (ReferenceOptions::round_fp16).
inline double r16(double x, bool on) { return on ? course::round_to_half(static_cast<float>(x)) : x; }

std::vector<float> to_float(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = course::half_bits_to_float(bits[i]);
  return out;
}

// y[t, o] = Σ_i W[o, i] · x[t, i] for W [out, in] row-major (a Hugging Face Linear's weight).
void linear(const std::vector<float>& W, int out, int in, const std::vector<double>& x, int T, std::vector<double>& y,
            bool round) {
  y.assign(static_cast<size_t>(T) * out, 0.0);
  constexpr int kRows = 32;
  const int blocks = (out + kRows - 1) / kRows;
  course::parallel_for(int64_t{T} * blocks, [&](int64_t job) {
    const int t = static_cast<int>(job / blocks), o0 = static_cast<int>(job % blocks) * kRows;
    const double* xt = x.data() + static_cast<size_t>(t) * in;
    for (int o = o0; o < std::min(out, o0 + kRows); ++o) {
      const float* w = W.data() + static_cast<size_t>(o) * in;
      double s = 0;
      for (int i = 0; i < in; ++i) s += static_cast<double>(w[i]) * xt[i];
      y[static_cast<size_t>(t) * out + o] = r16(s, round);
    }
  });
}

// out[t] = rmsnorm(x[t]) ⊙ w, in Hugging Face's order: normalise (rounded to fp16 in round mode),
// then multiply by the weight.
void rmsnorm(const std::vector<double>& x, const std::vector<float>& w, int T, int H, double eps,
             std::vector<double>& out, bool round) {
  out.resize(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t) {
    const double* xt = x.data() + static_cast<size_t>(t) * H;
    double ss = 0;
    for (int i = 0; i < H; ++i) ss += xt[i] * xt[i];
    const double inv = 1.0 / std::sqrt(ss / H + eps);
    for (int i = 0; i < H; ++i) out[static_cast<size_t>(t) * H + i] = r16(r16(xt[i] * inv, round) * w[i], round);
  }
}

}  // namespace

void reference_rope_neox(double* x, int head_dim, double position, double theta) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * i / head_dim);
    const double angle = position * inv_freq, c = std::cos(angle), s = std::sin(angle);
    const double a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = a * s + b * c;
  }
}

ReferenceModel::ReferenceModel(const HostWeights& w) : config_(w.config) {
  config_.validate();
  if (static_cast<int>(w.layers.size()) != config_.num_layers) {
    throw std::invalid_argument("ReferenceModel: " + std::to_string(w.layers.size()) + " layers, the config says " +
                                std::to_string(config_.num_layers));
  }
  layers_.resize(config_.num_layers);
  for (const WeightSlot& s : weight_slots(config_)) {
    const std::vector<uint16_t>& bits = w.tensor(s);
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    if (static_cast<int64_t>(bits.size()) != n) {
      throw std::invalid_argument("ReferenceModel: tensor '" + s.name + "' holds " + std::to_string(bits.size()) +
                                  " values, expected " + std::to_string(n));
    }
    std::vector<float> t = to_float(bits);
    if (s.kind == TensorKind::kEmbed) {
      embed_ = std::move(t);
    } else if (s.kind == TensorKind::kFinalNorm) {
      final_norm_ = std::move(t);
    } else if (s.kind == TensorKind::kLmHead) {
      out_ = std::move(t);
    } else {
      layers_[s.layer][s.kind] = std::move(t);
    }
  }
  if (config_.tie_word_embeddings) out_ = embed_;
}

std::vector<float> ReferenceModel::forward(const std::vector<int32_t>& tokens, const ReferenceOptions& opt,
                                           ReferenceTrace* trace) const {
  const ModelConfig& c = config_;
  const int T = static_cast<int>(tokens.size()), H = c.hidden_size, D = c.head_dim, Hq = c.num_heads,
            Hkv = c.num_kv_heads, I = c.intermediate_size, V = c.vocab_size, group = Hq / Hkv;
  const bool rd = opt.round_fp16;
  const double eps = c.rms_norm_eps, scale = 1.0 / std::sqrt(static_cast<double>(D));
  if (opt.first_position < 0) throw std::invalid_argument("ReferenceModel::forward: argument 'first_position' < 0");
  for (int t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) {
      throw std::invalid_argument("ReferenceModel::forward: argument 'token' " + std::to_string(tokens[t]) + " at " +
                                  std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  if (trace) *trace = ReferenceTrace{};

  std::vector<double> x(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < H; ++i) x[static_cast<size_t>(t) * H + i] = embed_[static_cast<size_t>(tokens[t]) * H + i];
  }
  std::vector<double> h, q, k, v, a, o, g, u;
  for (const Layer& l : layers_) {
    // Attention block.
    rmsnorm(x, l.input_norm, T, H, eps, h, rd);
    linear(l.q, Hq * D, H, h, T, q, rd);
    linear(l.k, Hkv * D, H, h, T, k, rd);
    linear(l.v, Hkv * D, H, h, T, v, rd);
    for (int t = 0; t < T; ++t) {
      const double pos = static_cast<double>(opt.first_position) + t;
      for (int hd = 0; hd < Hq; ++hd) {
        double* qh = q.data() + (static_cast<size_t>(t) * Hq + hd) * D;
        reference_rope_neox(qh, D, pos, c.rope_theta);
        for (int d = 0; d < D; ++d) qh[d] = r16(qh[d], rd);
      }
      for (int hd = 0; hd < Hkv; ++hd) {
        double* kh = k.data() + (static_cast<size_t>(t) * Hkv + hd) * D;
        reference_rope_neox(kh, D, pos, c.rope_theta);
        for (int d = 0; d < D; ++d) kh[d] = r16(kh[d], rd);
      }
    }
    a.assign(static_cast<size_t>(T) * Hq * D, 0.0);
    course::parallel_for(int64_t{T} * Hq, [&](int64_t job) {
      const int t = static_cast<int>(job / Hq), hd = static_cast<int>(job % Hq), kvh = hd / group;
      const double* qh = q.data() + (static_cast<size_t>(t) * Hq + hd) * D;
      std::vector<double> s(static_cast<size_t>(t) + 1);
      double m = -INFINITY;
      for (int j = 0; j <= t; ++j) {  // causal: token t sees tokens 0..t
        const double* kj = k.data() + (static_cast<size_t>(j) * Hkv + kvh) * D;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += qh[d] * kj[d];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - m));
      double* ah = a.data() + (static_cast<size_t>(t) * Hq + hd) * D;
      for (int j = 0; j <= t; ++j) {
        const double* vj = v.data() + (static_cast<size_t>(j) * Hkv + kvh) * D;
        const double p = s[j] / sum;
        for (int d = 0; d < D; ++d) ah[d] += p * vj[d];
      }
      for (int d = 0; d < D; ++d) ah[d] = r16(ah[d], rd);
    });
    if (trace) trace->attn.push_back(a);
    linear(l.o, H, Hq * D, a, T, o, rd);
    for (size_t i = 0; i < x.size(); ++i) x[i] = r16(x[i] + o[i], rd);

    // MLP block (SwiGLU).
    rmsnorm(x, l.post_norm, T, H, eps, h, rd);
    linear(l.gate, I, H, h, T, g, rd);
    linear(l.up, I, H, h, T, u, rd);
    for (size_t i = 0; i < g.size(); ++i) g[i] = r16(g[i] / (1.0 + std::exp(-g[i])) * u[i], rd);
    linear(l.down, H, I, g, T, o, rd);
    for (size_t i = 0; i < x.size(); ++i) x[i] = r16(x[i] + o[i], rd);
    if (trace) trace->hidden.push_back(x);
  }
  rmsnorm(x, final_norm_, T, H, eps, h, rd);
  if (trace) trace->final_normed = h;
  std::vector<double> logits;
  linear(out_, V, H, h, T, logits, rd);
  return std::vector<float>(logits.begin(), logits.end());
}

std::vector<int32_t> ReferenceModel::greedy(const std::vector<int32_t>& prompt, int new_tokens,
                                            const ReferenceOptions& opt) const {
  if (prompt.empty()) throw std::invalid_argument("ReferenceModel::greedy: argument 'prompt' must not be empty");
  std::vector<int32_t> seq = prompt, out;
  const int V = config_.vocab_size;
  for (int n = 0; n < new_tokens; ++n) {
    const std::vector<float> logits = forward(seq, opt);
    const float* last = logits.data() + (seq.size() - 1) * static_cast<size_t>(V);
    const int32_t best = static_cast<int32_t>(std::max_element(last, last + V) - last);  // first max: lowest id
    out.push_back(best);
    seq.push_back(best);
  }
  return out;
}

std::vector<float> reference_logits(const HostWeights& w, const std::vector<int32_t>& tokens,
                                    const ReferenceOptions& opt) {
  return ReferenceModel(w).forward(tokens, opt);
}

}  // namespace serving
