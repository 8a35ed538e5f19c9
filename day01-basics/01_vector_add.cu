// Day 01 · Exercise 01 · vector add: thread indexing, the grid-stride loop, bounds checks.
// Lesson: day01-basics/01_vector_add/README.md. Test: make test EX=01_vector_add
#include <algorithm>

#include "01_vector_add.h"
#include "check_args.h"
#include "cuda_check.h"

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int64_t n) {
  // TODO(1) (≈ 1 line): this thread's global index (where its block starts in the grid, plus its
  //          place in the block), in int64_t because n can exceed 2^31 (lesson: "Which element is mine?").
  // TODO(2) (≈ 3 lines): the grid may hold fewer threads than there are elements: this thread adds
  //          every element that falls to it, and touches none at or past n (lesson: "Grid-stride loops").
}

void vector_add(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  course::require_not_null(a, "vector_add", "a");
  course::require_not_null(b, "vector_add", "b");
  course::require_not_null(c, "vector_add", "c");
  course::require_non_negative(n, "vector_add", "n");
  if (n == 0) return;  // a launch with zero blocks is an error, and there is no work anyway

  const int threads = 256;  // a multiple of the warp size (32); see the lesson for why 256
  // TODO(3) (≈ 4 lines): as many blocks as one thread per element needs, but at most 32 per SM (ask
  //          the device how many SMs it has): the grid-stride loop covers the rest
  //          (lesson: "How many blocks?").
  const int blocks = 1;  // TODO(3): replace
  vector_add_kernel<<<blocks, threads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}
