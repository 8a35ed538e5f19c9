// DeviceWeights: one allocation, packed projections, filled from the host or on the GPU.
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "cuda_check.h"
#include "kernels.h"
#include "random_init.h"
#include "weights_gpu.h"

namespace serving {

namespace {

// Element counts of one layer's tensors.
struct LayerSizes {
  int64_t norm, q, kv, o, inter_rows, down;
  explicit LayerSizes(const ModelConfig& c)
      : norm(c.hidden_size),
        q(int64_t(c.num_heads) * c.head_dim * c.hidden_size),
        kv(int64_t(c.num_kv_heads) * c.head_dim * c.hidden_size),
        o(int64_t(c.hidden_size) * c.num_heads * c.head_dim),
        inter_rows(int64_t(c.intermediate_size) * c.hidden_size),
        down(int64_t(c.hidden_size) * c.intermediate_size) {}
};

// Each tensor starts on a 256-byte boundary (cuBLAS and the 16-byte vector loads want that).
int64_t padded(int64_t elems) { return (elems + 127) / 128 * 128; }

void copy_in(__half* dst, const std::vector<uint16_t>& src, int64_t expected, const std::string& what) {
  if (int64_t(src.size()) != expected)
    throw std::invalid_argument("DeviceWeights::upload: tensor '" + what + "' has " + std::to_string(src.size()) +
                                " elements, expected " + std::to_string(expected));
  CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
}

}  // namespace

DeviceWeights::~DeviceWeights() {
  if (base_) cudaFree(base_);
}

DeviceWeights::DeviceWeights(DeviceWeights&& o) noexcept { *this = std::move(o); }

DeviceWeights& DeviceWeights::operator=(DeviceWeights&& o) noexcept {
  if (this != &o) {
    if (base_) cudaFree(base_);
    config_ = o.config_;
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    embed = o.embed;
    layers = std::move(o.layers);
    final_norm = o.final_norm;
    lm_head = o.lm_head;
  }
  return *this;
}

void DeviceWeights::allocate(const ModelConfig& c) {
  c.validate();
  config_ = c;
  const LayerSizes s(c);
  const int64_t embed_n = int64_t(c.vocab_size) * c.hidden_size;
  int64_t total = padded(embed_n) + padded(c.hidden_size) + (c.tie_word_embeddings ? 0 : padded(embed_n));
  const int64_t per_layer =
      2 * padded(s.norm) + padded(s.q + 2 * s.kv) + padded(s.o) + padded(2 * s.inter_rows) + padded(s.down);
  total += per_layer * c.num_layers;
  bytes_ = size_t(total) * sizeof(__half);
  CUDA_CHECK(cudaMalloc(&base_, bytes_));
  __half* p = static_cast<__half*>(base_);
  auto take = [&](int64_t n) {
    __half* r = p;
    p += padded(n);
    return r;
  };
  embed = take(embed_n);
  final_norm = take(c.hidden_size);
  lm_head = c.tie_word_embeddings ? embed : take(embed_n);
  layers.resize(c.num_layers);
  for (DeviceLayer& l : layers) {
    l.input_norm = take(s.norm);
    l.qkv = take(s.q + 2 * s.kv);
    l.o = take(s.o);
    l.post_norm = take(s.norm);
    l.gate_up = take(2 * s.inter_rows);
    l.down = take(s.down);
  }
}

DeviceWeights DeviceWeights::upload(const HostWeights& w) {
  DeviceWeights d;
  d.allocate(w.config);
  const ModelConfig& c = w.config;
  const LayerSizes s(c);
  const int64_t embed_n = int64_t(c.vocab_size) * c.hidden_size;
  copy_in(d.embed, w.embed, embed_n, "embed");
  copy_in(d.final_norm, w.final_norm, c.hidden_size, "final_norm");
  if (!c.tie_word_embeddings) copy_in(d.lm_head, w.lm_head, embed_n, "lm_head");
  if (int(w.layers.size()) != c.num_layers)
    throw std::invalid_argument("DeviceWeights::upload: " + std::to_string(w.layers.size()) + " layers, config has " +
                                std::to_string(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& h = w.layers[i];
    DeviceLayer& l = d.layers[i];
    const std::string at = " of layer " + std::to_string(i);
    copy_in(l.input_norm, h.input_norm, s.norm, "input_norm" + at);
    copy_in(l.qkv, h.q, s.q, "q" + at);  // packed: q rows, then k rows, then v rows
    copy_in(l.qkv + s.q, h.k, s.kv, "k" + at);
    copy_in(l.qkv + s.q + s.kv, h.v, s.kv, "v" + at);
    copy_in(l.o, h.o, s.o, "o" + at);
    copy_in(l.post_norm, h.post_norm, s.norm, "post_norm" + at);
    copy_in(l.gate_up, h.gate, s.inter_rows, "gate" + at);  // packed: gate rows, then up rows
    copy_in(l.gate_up + s.inter_rows, h.up, s.inter_rows, "up" + at);
    copy_in(l.down, h.down, s.down, "down" + at);
  }
  return d;
}

DeviceWeights DeviceWeights::random(const ModelConfig& c, uint64_t seed) {
  DeviceWeights d;
  d.allocate(c);
  const LayerSizes s(c);
  const int64_t embed_n = int64_t(c.vocab_size) * c.hidden_size;
  const int L = c.num_layers;
  auto fill = [&](__half* dst, int64_t n, TensorKind kind, int layer) {
    fill_random(dst, n, seed, kind, layer, random_init_std(kind, L), 0);
  };
  fill(d.embed, embed_n, TensorKind::kEmbed, -1);
  fill(d.final_norm, c.hidden_size, TensorKind::kFinalNorm, -1);
  if (!c.tie_word_embeddings) fill(d.lm_head, embed_n, TensorKind::kLmHead, -1);
  for (int i = 0; i < L; ++i) {
    DeviceLayer& l = d.layers[i];
    fill(l.input_norm, s.norm, TensorKind::kInputNorm, i);
    fill(l.qkv, s.q, TensorKind::kQ, i);
    fill(l.qkv + s.q, s.kv, TensorKind::kK, i);
    fill(l.qkv + s.q + s.kv, s.kv, TensorKind::kV, i);
    fill(l.o, s.o, TensorKind::kO, i);
    fill(l.post_norm, s.norm, TensorKind::kPostNorm, i);
    fill(l.gate_up, s.inter_rows, TensorKind::kGate, i);
    fill(l.gate_up + s.inter_rows, s.inter_rows, TensorKind::kUp, i);
    fill(l.down, s.down, TensorKind::kDown, i);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

}  // namespace serving
