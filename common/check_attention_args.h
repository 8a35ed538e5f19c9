// The argument checks every dense attention launcher shares, in one place, so that a launcher
// states only what is particular to it (the head dims it was compiled for, MHA only, no window).
//
//   q, k, v, o    not null, and aligned to `align` bytes: the kernels copy tiles in 16-byte
//                 pieces (float4, uint4, cp.async), and cudaMalloc pointers always are
//   batch, heads  >= 1 and <= 65535, because they index grid dimensions y and z
//   heads_kv      divides heads_q (query head h reads KV head h / (Hq / Hkv))
//   seq_q, seq_k  >= 1
// Throws std::invalid_argument naming the field (common/check_args.h), before any launch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "attention_params.h"
#include "check_args.h"

namespace course {

inline void require_aligned(const void* ptr, std::size_t align, const char* launcher, const char* field) {
  require(reinterpret_cast<std::uintptr_t>(ptr) % align == 0, launcher, field,
          "must be " + std::to_string(align) + "-byte aligned (tiles are copied in 16-byte pieces)");
}

inline void require_attention_tensors(const void* q, const void* k, const void* v, const void* o,
                                      const AttentionParams& p, const char* launcher, std::size_t align = 16) {
  const char* names[4] = {"q", "k", "v", "o"};
  const void* ptrs[4] = {q, k, v, o};
  for (int i = 0; i < 4; ++i) {
    require_not_null(ptrs[i], launcher, names[i]);
    require_aligned(ptrs[i], align, launcher, names[i]);
  }
  require_positive(p.batch, launcher, "batch");
  require(p.batch <= 65535, launcher, "batch", "must be <= 65535 (a grid dimension)");
  require_positive(p.heads_q, launcher, "heads_q");
  require(p.heads_q <= 65535, launcher, "heads_q", "must be <= 65535 (a grid dimension)");
  require_positive(p.heads_kv, launcher, "heads_kv");
  require(p.heads_kv <= p.heads_q && p.heads_q % p.heads_kv == 0, launcher, "heads_kv",
          "must divide heads_q (got heads_q=" + std::to_string(p.heads_q) + ", heads_kv=" + std::to_string(p.heads_kv) +
              ")");
  require_positive(p.seq_q, launcher, "seq_q");
  require_positive(p.seq_k, launcher, "seq_k");
}

}  // namespace course
