// A minimal parallel-for for the CPU reference. The reference is the slow side of every GPU
// test; spreading independent rows over the host's cores keeps large shapes affordable.
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace course {

template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t workers = std::min<int64_t>(hw, n);
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (int64_t w = 0; w < workers; ++w) {
    // Strided assignment: rows late in a causal problem are longer, striding balances them.
    pool.emplace_back([&, w] {
      for (int64_t i = w; i < n; i += workers) fn(i);
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace course
