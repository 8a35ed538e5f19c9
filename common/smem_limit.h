// How much shared memory one thread block may use on the current GPU, as launchers that pick a
// tile configuration by size should ask it.
//
// The answer is the device's opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on
// an H100, 99 KiB on consumer Ampere/Ada, 64 KiB on Turing), lowered to COURSE_SMEM_LIMIT
// (bytes) when that environment variable is set. The override exists for testing: on one big
// GPU it makes a launcher choose the configuration a smaller GPU would choose, so every code
// path the course ships can run on the GPU we have (tools/gpu_verify.sh runs the suite at
// 99 KiB and 64 KiB this way). It can only lower the limit, never raise it.
#pragma once

namespace course {

int smem_limit_per_block();

}  // namespace course
