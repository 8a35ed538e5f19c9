// Timed runs (see workloads.h). Inputs are filled on the GPU (device_fill.h): the values only
// have to be ordinary numbers, and drawing gigabytes on the CPU would dominate the run time.
// Correctness is established separately, on small shapes, by validate.cpp.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>

#include "device_buffer.h"
#include "device_fill.h"
#include "workloads.h"

namespace bench {

namespace {

using course::DeviceBuffer;

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1 << 30));
  return buf;
}

DeviceBuffer<float> filled(int64_t n, uint64_t seed, cudaStream_t st) {
  DeviceBuffer<float> b(size_t(std::max<int64_t>(n, 1)));
  fill_uniform(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

template <class Launch>
Measurement time_it(Launch&& launch, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
  return time_launch(std::forward<Launch>(launch), st, cfg, fl);
}

size_t workspace_bytes(const Kernel& k, const Shape& s) {
  return k.workspace_bytes ? k.workspace_bytes(s.attn) : 0;
}

}  // namespace

double device_bytes_needed(const Kernel& k, const Shape& s) {
  double b = shape_bytes(s);
  if (s.family == Family::kPrefill) b += double(workspace_bytes(k, s));
  return b;
}

RunOutcome run_timed(const Kernel& k, const Shape& s, cudaStream_t st, const TimingConfig& cfg,
                     L2Flusher& fl) {
  RunOutcome out;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double need = device_bytes_needed(k, s);
  if (need > 0.92 * double(free_b)) {  // leave room for the runtime and cuBLAS
    out.note = "skipped: needs " + gib(need) + ", " + gib(double(free_b)) + " free";
    return out;
  }
  try {
    switch (s.family) {
      case Family::kVector: {
        auto a = filled(s.n, 1, st), b = filled(s.n, 2, st), c = filled(s.n, 3, st);
        out.m = time_it([&] { k.vector(a.data(), b.data(), c.data(), s.n, st); }, st, cfg, fl);
        break;
      }
      case Family::kMatmul: {
        auto a = filled(int64_t(s.m) * s.k, 1, st), b = filled(int64_t(s.nn) * s.k, 2, st);
        auto c = filled(int64_t(s.m) * s.nn, 3, st);
        out.m = time_it([&] { k.matmul(a.data(), b.data(), c.data(), s.m, s.nn, s.k, st); }, st,
                        cfg, fl);
        break;
      }
      case Family::kRowReduce: {
        auto x = filled(int64_t(s.rows) * s.cols, 1, st);
        auto mx = filled(s.rows, 2, st), sm = filled(s.rows, 3, st);
        out.m = time_it([&] { k.row_reduce(x.data(), mx.data(), sm.data(), s.rows, s.cols, st); },
                        st, cfg, fl);
        break;
      }
      case Family::kSoftmax: {
        auto x = filled(int64_t(s.rows) * s.cols, 1, st), y = filled(int64_t(s.rows) * s.cols, 2, st);
        out.m = time_it([&] { k.softmax(x.data(), y.data(), s.rows, s.cols, st); }, st, cfg, fl);
        break;
      }
      case Family::kPrefill: {
        const auto& p = s.attn;
        auto q = filled(p.q_elems(), 1, st), kk = filled(p.kv_elems(), 2, st);
        auto v = filled(p.kv_elems(), 3, st), o = filled(p.o_elems(), 4, st);
        DeviceBuffer<float> ws((workspace_bytes(k, s) + 3) / 4 + 1);
        out.m = time_it([&] { k.prefill(q.data(), kk.data(), v.data(), o.data(), ws.data(), p, st); },
                        st, cfg, fl);
        break;
      }
      case Family::kDecode: {
        const auto& p = s.paged;
        // Every sequence holds `context` tokens in blocks scattered through the pool, as after
        // a while of serving; the permutation is fixed so runs are comparable.
        std::vector<int32_t> perm(p.num_blocks);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937(1234));
        std::vector<int32_t> table(size_t(p.batch) * p.max_blocks_per_seq);
        std::copy(perm.begin(), perm.begin() + table.size(), table.begin());
        std::vector<int32_t> lens(p.batch, s.context);
        DeviceBuffer<int32_t> dt(table), dl(lens);
        auto q = filled(p.q_elems(), 1, st), o = filled(p.q_elems(), 2, st);
        auto kc = filled(p.cache_elems(), 3, st), vc = filled(p.cache_elems(), 4, st);
        out.m = time_it([&] {
          k.paged(q.data(), kc.data(), vc.data(), dt.data(), dl.data(), o.data(), p, st);
        }, st, cfg, fl);
        break;
      }
    }
    out.timed = true;
    if (out.m.reps < cfg.reps) out.note = "reps trimmed to " + std::to_string(out.m.reps);
  } catch (const std::invalid_argument& e) {
    out.note = std::string("unsupported: ") + e.what();
  } catch (const std::exception& e) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it and go on
    out.note = std::string("error: ") + e.what();
  }
  return out;
}

}  // namespace bench
