// The "without this course" baseline: attention from two cuBLAS GEMMs and a masked softmax
// through an N×N workspace (see cublas_attention.cu). Registered by family_prefill.cpp.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "attention_params.h"

namespace bench {

size_t cublas_attention_workspace_bytes(const course::AttentionParams& p);
void cublas_attention(const float* q, const float* k, const float* v, float* o, float* workspace,
                      const course::AttentionParams& p, cudaStream_t stream);

}  // namespace bench
