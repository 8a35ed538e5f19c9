// The L2 flush buffer (see timing.h for why the bench flushes at all).
#include "timing.h"

namespace bench {

namespace {
size_t flush_bytes() {
  int dev = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  // Twice the L2: with a non-LRU replacement policy, writing exactly L2-many bytes can leave
  // some old lines resident.
  return std::max<size_t>(size_t(2) * size_t(l2), size_t(64) << 20);
}
}  // namespace

L2Flusher::L2Flusher() : buf_(flush_bytes()) {}

void L2Flusher::flush(cudaStream_t stream) {
  // A different byte each time, so no layer of the memory system can skip a no-op write.
  value_ = (value_ + 1) & 0xFF;
  CUDA_CHECK(cudaMemsetAsync(buf_.data(), value_, buf_.bytes(), stream));
}

}  // namespace bench
