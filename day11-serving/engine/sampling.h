// Choosing the next token from a row of logits.
//
// Greedy decoding is an arg max, done on the GPU (kernels.h: argmax_rows) so only 12 bytes per
// sequence cross PCIe. Temperature / top-p sampling runs here, on the host, on the one row a
// sequence needs: it sorts the vocabulary, which is simple on the CPU and costs well under a
// millisecond for 128k entries, and it is off the path the benchmarks time (greedy).
//
// The random number is counter-based: u = hash(seed, index of the token in the sequence), so a
// request draws the same numbers whether it runs alone or in any batch, whatever was preempted
// and recomputed; the same seed gives the same text.
#pragma once
#include <cstdint>

namespace serving {

// A uniform double in [0, 1) from (seed, counter): SplitMix64 of the pair, top 53 bits.
double sampling_uniform(uint64_t seed, uint64_t counter);

// Samples from softmax(logits / temperature) restricted to the smallest set of most likely
// tokens whose probability reaches top_p (nucleus sampling), with the uniform number u.
// temperature > 0, 0 < top_p <= 1, 0 <= u < 1. Ties in probability keep the lower id first.
int32_t sample_top_p(const float* logits, int vocab, float temperature, float top_p, double u);

}  // namespace serving
