// See paged_cache.h.
#include "paged_cache.h"

#include <algorithm>
#include <stdexcept>

#include "poison.h"
#include "random.h"

namespace course {

namespace {

// A random permutation of 0 .. n-1 (Fisher-Yates with the course's Rng, so it is the same on
// every platform).
std::vector<int32_t> permutation(int n, Rng& rng) {
  std::vector<int32_t> perm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) perm[size_t(i)] = i;
  for (int i = n - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.uniform_int(0, i))]);
  return perm;
}

}  // namespace

PagedCache build_paged_cache(const std::vector<int32_t>& context_lens, int heads_q, int heads_kv, int head_dim,
                             int block_size, uint64_t seed, int spare_columns, int spare_blocks) {
  if (context_lens.empty() || block_size < 1 || spare_blocks < 1 || spare_columns < 0)
    throw std::invalid_argument("build_paged_cache: empty batch, block_size < 1 or spare_blocks < 1");
  Rng rng(seed);
  PagedCache pc;
  pc.lens = context_lens;
  PagedParams& p = pc.p;
  p.batch = int(context_lens.size());
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.block_size = block_size;
  const int bs = block_size;
  int used = 0, longest = 1;
  for (int32_t n : context_lens) {
    used += (n + bs - 1) / bs;
    longest = std::max(longest, (n + bs - 1) / bs);
  }
  p.max_blocks_per_seq = longest + spare_columns;
  p.num_blocks = used + spare_blocks;
  const std::vector<int32_t> physical = permutation(p.num_blocks, rng);
  const int32_t nan_block = physical[size_t(used)];  // unowned blocks: physical[used ..]

  const size_t row = size_t(p.head_dim);
  const size_t block_elems = size_t(p.heads_kv) * bs * row;
  pc.k.assign(size_t(p.cache_elems()), poison_f32());
  pc.v.assign(size_t(p.cache_elems()), poison_f32());
  pc.table.assign(size_t(p.batch) * p.max_blocks_per_seq, nan_block);
  int next = 0;
  for (int b = 0; b < p.batch; ++b) {
    const int len = context_lens[size_t(b)];
    for (int lb = 0; lb * bs < len; ++lb) {
      const int32_t phys = physical[size_t(next++)];
      pc.table[size_t(b) * p.max_blocks_per_seq + lb] = phys;
      for (int hk = 0; hk < p.heads_kv; ++hk)
        for (int s = 0; s < bs && lb * bs + s < len; ++s) {  // slots past len stay NaN
          const size_t at = size_t(phys) * block_elems + (size_t(hk) * bs + s) * row;
          for (size_t d = 0; d < row; ++d) {
            pc.k[at + d] = float(rng.normal());
            pc.v[at + d] = float(rng.normal());
          }
        }
    }
  }
  return pc;
}

std::vector<int32_t> permuted_block_table(int batch, int blocks_per_seq, int num_blocks, uint64_t seed) {
  const size_t entries = size_t(batch) * size_t(blocks_per_seq);
  if (size_t(num_blocks) < entries)
    throw std::invalid_argument("permuted_block_table: num_blocks < batch · blocks_per_seq");
  Rng rng(seed);
  std::vector<int32_t> perm = permutation(num_blocks, rng);
  perm.resize(entries);
  return perm;
}

}  // namespace course
