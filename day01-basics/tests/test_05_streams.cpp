// Tests for day01/05_streams: y = f(x) from host memory to host memory, chunk by chunk over
// CUDA streams.
//
// Every run starts from poison everywhere the launcher writes: h_y (host), d_x and d_y (device)
// hold the NaN pattern of common/poison.h, so a chunk that was never copied back reads "never
// written", and a D2H copy that overtakes its kernel copies d_y's poison. Host buffers sit
// between two guard regions like the device ones (DeviceBuffer), checked after every run.
// Inputs are normal(0, 1); the reference is the header's stream_map_reference (f in double).
//
// Timing-dependent contract points have their own cases, built so that the wrong order loses
// by milliseconds, not nanoseconds: the fork (a host callback on the caller's stream fills h_x
// 50 ms late), the final synchronisation (64 MB: h_y is read the moment the call returns).
//
// The [index] cases check the index helper stream_chunk_range on the CPU alone (no CUDA call):
// `build/bin/sol_05_streams "[index]"` runs them without a GPU.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "05_streams.h"
#include "gpu_test.h"
#include "parallel.h"
#include "poison.h"

namespace {

using course::DeviceBuffer;

// ----------------------------------------------------------------------------- index helper
// What is wrong with the ranges stream_chunk_range gives the `chunks` chunks of n elements,
// checked against the header's contract; "" when nothing is. For very many chunks only a sample
// of them is looked at (the first and last few, one in the middle, and the boundary).
std::string chunk_ranges_error(int64_t n, int chunks) {
  const int64_t len = n / chunks + (n % chunks != 0);  // L = ceil(n / chunks), the contract's chunk length
  const std::string problem = "n = " + std::to_string(n) + ", chunks = " + std::to_string(chunks) +
                              " (L = ceil(n / chunks) = " + std::to_string(len) + "): ";
  std::vector<int64_t> cs;
  if (chunks <= 5000) {
    for (int c = 0; c < chunks; ++c) cs.push_back(c);
  } else {
    const int64_t boundary = len > 0 ? n / len + (n % len != 0) : 0;  // first chunk that starts at or past n
    for (int64_t c : {int64_t(0), int64_t(1), int64_t(2), int64_t(chunks / 2), boundary - 1, boundary, boundary + 1,
                      int64_t(chunks) - 2, int64_t(chunks) - 1})
      if (c >= 0 && c < chunks) cs.push_back(c);
    std::sort(cs.begin(), cs.end());
    cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
  }
  int64_t prev_c = -1, prev_end = 0;
  for (int64_t c : cs) {
    const ChunkRange r = stream_chunk_range(n, chunks, int(c));
    // The contract in closed form, computed without overflow: begin = min(n, c·L),
    // end = begin + min(L, n − begin); c·L >= n exactly when c >= ceil(n / L).
    const bool starts_past = len == 0 || c >= n / len + (n % len != 0);
    const int64_t want_begin = starts_past ? n : c * len;
    const int64_t want_end = want_begin + std::min(len, n - want_begin);
    const std::string at = problem + "chunk " + std::to_string(c) + " got [" + std::to_string(r.begin) + ", " +
                           std::to_string(r.end) + "), expected [" + std::to_string(want_begin) + ", " +
                           std::to_string(want_end) + ")";
    if (r.begin == want_begin && r.end == want_end) {
      prev_c = c;
      prev_end = r.end;
      continue;
    }
    if (r.end < r.begin) return at + ": a negative length";
    if (r.begin < 0 || r.end > n) return at + ": reaches outside [0, n)";
    if (starts_past) return at + ": c·L >= n, so the chunk is empty, with begin = end = n";
    if (r.end == r.begin) return at + ": an empty range, but c·L < n: the chunk holds elements";
    if (prev_c == c - 1 && r.begin > prev_end)
      return at + ": elements [" + std::to_string(prev_end) + ", " + std::to_string(r.begin) +
             ") belong to no chunk (the previous one ends at " + std::to_string(prev_end) + ")";
    if (prev_c == c - 1 && r.begin < prev_end)
      return at + ": overlaps the previous chunk, which ends at " + std::to_string(prev_end);
    if (r.begin != want_begin) return at + ": chunk c starts at c·L";
    if (want_end == n && r.end < n)
      return at + ": the last non-empty chunk holds the remainder, up to n; elements [" + std::to_string(r.end) + ", " +
             std::to_string(n) + ") belong to no chunk";
    return at + ": a chunk holds L elements, cut at n";
  }
  if (chunks <= 5000 && prev_end != n) return problem + "the chunks end at " + std::to_string(prev_end) + ", not at n";
  return "";
}

// Runs chunk_ranges_error over (n, chunks) pairs; reports the first few failures.
template <class ForEach>
void check_chunk_ranges(ForEach for_each_problem) {
  long long problems = 0, failures = 0;
  for_each_problem([&](int64_t n, int chunks) {
    ++problems;
    const std::string err = chunk_ranges_error(n, chunks);
    if (err.empty()) return;
    if (++failures <= 5) FAIL_CHECK(err);
  });
  INFO(failures << " of " << problems << " (n, chunks) problems have wrong chunk ranges");
  CHECK(failures == 0);
}

// ----------------------------------------------------------------------------- host buffers
// n floats of host memory between two guard regions, pinned (cudaMallocHost) or pageable:
//   [ front guard | n floats | back guard ]      (common/poison.h: kGuardBytes of kHostGuardByte,
//                                                  not the device guards' byte: see there)
class HostBuffer {
 public:
  HostBuffer(size_t n, bool pinned) : n_(n), pinned_(pinned) {
    const size_t total = 2 * course::kGuardBytes + n * sizeof(float);
    if (pinned)
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&base_), total));
    else
      base_ = new unsigned char[total];
    std::memset(base_, course::kHostGuardByte, course::kGuardBytes);
    std::memset(base_ + course::kGuardBytes + n * sizeof(float), course::kHostGuardByte, course::kGuardBytes);
  }
  ~HostBuffer() {
    if (pinned_)
      cudaFreeHost(base_);
    else
      delete[] base_;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  float* data() { return reinterpret_cast<float*>(base_ + course::kGuardBytes); }
  size_t size() const { return n_; }
  void assign(const std::vector<float>& v) { std::memcpy(data(), v.data(), n_ * sizeof(float)); }
  void poison() {
    float* p = data();
    for (size_t i = 0; i < n_; ++i) std::memcpy(p + i, &course::kPoisonF32Bits, sizeof(float));
  }
  // "" when both guards are intact, else a sentence for the report.
  std::string guard_damage() const {
    std::string front =
        course::describe_guard_damage(base_, course::kGuardBytes, sizeof(float), false, course::kHostGuardByte);
    std::string back = course::describe_guard_damage(base_ + course::kGuardBytes + n_ * sizeof(float),
                                                     course::kGuardBytes, sizeof(float), true, course::kHostGuardByte);
    if (!front.empty() && !back.empty()) return front + "; " + back;
    return front + back;
  }

 private:
  unsigned char* base_ = nullptr;
  size_t n_;
  bool pinned_;
};

// f over a whole vector, spread over the host's cores.
std::vector<float> reference(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  const int64_t n = int64_t(x.size()), block = 1 << 14;
  course::parallel_for((n + block - 1) / block, [&](int64_t b) {
    const int64_t i0 = b * block;
    stream_map_reference(x.data() + i0, y.data() + i0, std::min(block, n - i0));
  });
  return y;
}

// One problem: its input and reference, the host and device buffers the launcher uses.
struct Problem {
  int64_t n;
  std::vector<float> x, ref;
  HostBuffer h_x, h_y;
  DeviceBuffer<float> d_x, d_y;
  Problem(int64_t n_, uint64_t seed, bool pinned = true)
      : n(n_),
        x(course::random_normal(size_t(n_), seed)),
        ref(reference(x)),
        h_x(size_t(n_), pinned),
        h_y(size_t(n_), pinned),
        d_x(size_t(n_)),
        d_y(size_t(n_)) {
    h_x.assign(x);
  }
};

void poison_outputs(Problem& p) {
  p.h_y.poison();
  p.d_x.poison();
  p.d_y.poison();
  CUDA_CHECK(cudaDeviceSynchronize());  // the device poison has landed before any launcher copy
}

// h_y against the reference, with both host guards; then the device guards.
void check_output(Problem& p, const std::string& what) {
  const course::CompareResult r = course::compare(p.h_y.data(), p.ref.data(), course::Dims{{"i", p.n}},
                                                  course::Tolerance::fp32(), p.h_y.guard_damage());
  if (!r.ok)
    FAIL_CHECK(what << ": h_y:\n" << r.report);
  else
    SUCCEED(what << ": h_y matches the reference");
  CUDA_CHECK(cudaDeviceSynchronize());  // a launcher that did not wait: let its copies land before reading guards
  const std::string dx = p.d_x.guard_damage(), dy = p.d_y.guard_damage();
  if (!dx.empty()) FAIL_CHECK(what << ": d_x (device scratch): " << dx);
  if (!dy.empty()) FAIL_CHECK(what << ": d_y (device scratch): " << dy);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) FAIL_CHECK(what << ": a CUDA error was left behind: " << cudaGetErrorName(err));
}

// Poison, run, check: one (chunks, streams) configuration on the legacy default stream.
void run_and_check(Problem& p, int chunks, int streams, bool in_place = false) {
  poison_outputs(p);
  const std::string what = "n = " + std::to_string(p.n) + ", chunks = " + std::to_string(chunks) +
                           ", streams = " + std::to_string(streams) + (in_place ? ", d_y = d_x" : "");
  streamed_map(p.h_x.data(), p.h_y.data(), p.d_x.data(), in_place ? p.d_x.data() : p.d_y.data(), p.n, chunks, streams);
  check_output(p, what);
}

// A host callback (cudaLaunchHostFunc) that writes h_x 50 ms after its stream reaches it.
struct LateFill {
  float* dst;
  const float* src;
  size_t n;
};
void late_fill(void* arg) {
  auto* f = static_cast<LateFill*>(arg);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::memcpy(f->dst, f->src, f->n * sizeof(float));
}

}  // namespace

// ============================================================================ [index]

TEST_CASE("stream_chunk_range: chunks tile [0, n) in order, every n up to 60, 1..n+3 chunks", "[index][quick]") {
  check_chunk_ranges([](auto&& check) {
    for (int64_t n = 0; n <= 60; ++n) {
      for (int chunks = 1; chunks <= n + 3; ++chunks) check(n, chunks);
      check(n, 1000);
    }
  });
}

TEST_CASE("stream_chunk_range: the test sizes, and n up to INT64_MAX without overflow", "[index][quick]") {
  check_chunk_ranges([](auto&& check) {
    for (int chunks : {1, 2, 3, 4, 7, 16, 64, 1000, 1000003, 1000004, 2000011}) check(1000003, chunks);
    for (int chunks : {1, 2, 7, 16, 1001, 1002}) check(1001, chunks);
    for (int64_t n : {(int64_t(1) << 26), (int64_t(1) << 24) + 3, (int64_t(1) << 40) + 7, int64_t(INT_MAX) + 5,
                      INT64_MAX, INT64_MAX - 1, INT64_MAX - 12345})
      for (int chunks : {1, 2, 3, 7, 16, 1000, INT_MAX - 1, INT_MAX}) check(n, chunks);
  });
}

// ============================================================================ output

TEST_CASE("streamed_map: small sizes, 1..7 chunks, 1, 2 and 4 streams", "[day01][streams][quick]") {
  const std::vector<int64_t> sizes{1, 2, 31, 257, 4099};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t seed = course::case_seed("streams_small", int64_t(i));
    INFO("seed = " << seed << " (set COURSE_SEED to vary)");
    Problem p(sizes[i], seed);
    for (int chunks : {1, 2, 3, 7})
      for (int streams : {1, 2, 4}) run_and_check(p, chunks, streams);
  }
}

TEST_CASE("streamed_map: n = 1000003 over 1, 2, 3, 7, 16 chunks and 1..4 streams", "[day01][streams]") {
  // 1000003 is prime: every chunk count above 1 leaves a shorter remainder chunk at the end.
  const uint64_t seed = course::case_seed("streams_grid", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p(1000003, seed);
  for (int chunks : {1, 2, 3, 7, 16})
    for (int streams = 1; streams <= 4; ++streams) run_and_check(p, chunks, streams);
}

TEST_CASE("streamed_map: one element per chunk (chunks = n) and more chunks than elements", "[day01][streams][quick]") {
  const uint64_t seed = course::case_seed("streams_many_chunks", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p(1001, seed);
  for (int streams : {1, 3}) {
    run_and_check(p, 1001, streams);          // n chunks of one element
    run_and_check(p, 1002, streams);          // n + 1: the last one is empty
    run_and_check(p, 2 * 1001 + 5, streams);  // L = 1, 1006 empty chunks at the end
  }
  Problem q(5, course::case_seed("streams_many_chunks", 1));
  run_and_check(q, 1000, 16);  // 995 empty chunks spread over every stream
}

TEST_CASE("streamed_map: pageable host memory gives the same output", "[day01][streams]") {
  const uint64_t seed = course::case_seed("streams_pageable", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p(1000003, seed, /*pinned=*/false);
  for (int chunks : {1, 7})
    for (int streams : {1, 3}) run_and_check(p, chunks, streams);
}

TEST_CASE("streamed_map: d_y may be the same buffer as d_x", "[day01][streams][quick]") {
  const uint64_t seed = course::case_seed("streams_in_place", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p(100003, seed);
  for (int streams : {1, 3}) run_and_check(p, 7, streams, /*in_place=*/true);
}

// ============================================================================ ordering

TEST_CASE("streamed_map: starts after the work already queued on the caller's stream (fork)", "[day01][streams]") {
  // The caller's stream holds a host callback that writes h_x 50 ms after the stream reaches
  // it; until then h_x holds poison. A pipeline that does not wait for the caller's stream
  // copies the poison and outputs NaN.
  const uint64_t seed = course::case_seed("streams_fork", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p(262147, seed);
  cudaStream_t caller = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking));
  for (int streams : {1, 3}) {
    poison_outputs(p);
    p.h_x.poison();
    LateFill fill{p.h_x.data(), p.x.data(), size_t(p.n)};
    CUDA_CHECK(cudaLaunchHostFunc(caller, late_fill, &fill));
    streamed_map(p.h_x.data(), p.h_y.data(), p.d_x.data(), p.d_y.data(), p.n, 5, streams, caller);
    CUDA_CHECK(cudaStreamSynchronize(caller));  // `fill` lives on this stack frame
    check_output(p, "h_x written by a host callback on the caller's stream, streams = " + std::to_string(streams));
  }
  CUDA_CHECK(cudaStreamDestroy(caller));
}

TEST_CASE("streamed_map: returns only when h_y is complete (final synchronisation)", "[day01][streams]") {
  // 64 MB each way: the last chunk's results land milliseconds after the last copy is enqueued.
  // h_y is read back to front the moment the call returns, the last elements first, so a
  // launcher that returns before its copies finish is caught reading poison. The input repeats
  // a 1024-value pattern so that the reference costs 1024 evaluations of f, not 16 million.
  const int64_t n = (int64_t(1) << 24) + 3;
  const std::vector<float> period = course::random_normal(1024, course::case_seed("streams_sync", 0));
  const std::vector<float> period_ref = reference(period);
  std::vector<float> x(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] = period[size_t(i % 1024)];
    ref[size_t(i)] = period_ref[size_t(i % 1024)];
  }
  HostBuffer h_x(size_t(n), true), h_y(size_t(n), true);
  h_x.assign(x);
  DeviceBuffer<float> d_x(static_cast<size_t>(n)), d_y(static_cast<size_t>(n));
  for (const auto& cfg : {std::pair<int, int>{1, 1}, std::pair<int, int>{4, 2}, std::pair<int, int>{16, 4}}) {
    INFO("chunks = " << cfg.first << ", streams = " << cfg.second);
    std::vector<float> seen(static_cast<size_t>(n));  // allocated (64 MB of zeros) before the call, not after
    const float* out = h_y.data();
    h_y.poison();
    d_y.poison();
    CUDA_CHECK(cudaDeviceSynchronize());
    streamed_map(h_x.data(), h_y.data(), d_x.data(), d_y.data(), n, cfg.first, cfg.second);
    const cudaError_t idle = cudaStreamQuery(0);                    // microseconds after the return
    for (int64_t i = n - 1; i >= 0; --i) seen[size_t(i)] = out[i];  // last elements first
    cudaGetLastError();                   // cudaErrorNotReady is an answer, not an error to keep
    CUDA_CHECK(cudaDeviceSynchronize());  // whatever the launcher left running, before the buffers go
    const course::CompareResult r = course::compare(seen, ref, course::Dims{{"i", n}}, course::Tolerance::fp32());
    if (!r.ok) FAIL_CHECK("h_y read right after streamed_map returned:\n" << r.report);
    if (idle != cudaSuccess)
      FAIL_CHECK("the caller's stream still had work from the call when it returned (cudaStreamQuery: "
                 << cudaGetErrorName(idle) << ")");
  }
}

TEST_CASE("streamed_map: the per-chunk timeline follows stream order", "[day01][streams]") {
  // Chunks of 1M elements: each copy takes tens of microseconds and the kernel about as long,
  // far above the events' resolution (~0.5 µs), so each step of a one-stream run must show a
  // duration of its own.
  constexpr float kSlack = 1e-3f;  // ms: event timestamps of work ordered by a stream never go back
  constexpr float kStep = 5e-3f;   // ms: the least a step on a 1M-element chunk can take
  const uint64_t seed = course::case_seed("streams_timeline", 0);
  INFO("seed = " << seed << " (set COURSE_SEED to vary)");
  Problem p((int64_t(1) << 22) + 3, seed);
  for (const auto& cfg : {std::pair<int, int>{4, 1}, std::pair<int, int>{7, 3}, std::pair<int, int>{5, 4}}) {
    const int chunks = cfg.first, streams = cfg.second;
    poison_outputs(p);
    StreamTimeline t;
    streamed_map(p.h_x.data(), p.h_y.data(), p.d_x.data(), p.d_y.data(), p.n, chunks, streams, 0, &t);
    const std::string what = "chunks = " + std::to_string(chunks) + ", streams = " + std::to_string(streams);
    check_output(p, what);
    INFO(what);
    REQUIRE(t.chunks.size() == size_t(chunks));
    for (int c = 0; c < chunks; ++c) {
      const ChunkTimes& k = t.chunks[size_t(c)];
      INFO("chunk " << c << ": stream " << k.stream << ", ready " << k.ready_ms << " ms, H2D done " << k.h2d_done_ms
                    << ", kernel done " << k.kernel_done_ms << ", D2H done " << k.d2h_done_ms << ", total "
                    << t.total_ms);
      CHECK(k.stream == c % streams);
      CHECK(k.ready_ms >= -kSlack);
      CHECK(k.h2d_done_ms >= k.ready_ms - kSlack);
      CHECK(k.kernel_done_ms >= k.h2d_done_ms - kSlack);
      CHECK(k.d2h_done_ms >= k.kernel_done_ms - kSlack);
      CHECK(t.total_ms >= k.d2h_done_ms - kSlack);
      if (c >= streams) {  // the same stream's previous chunk is done before this one is ready
        CHECK(k.ready_ms >= t.chunks[size_t(c - streams)].d2h_done_ms - kSlack);
      }
      if (streams == 1) {  // one stream: nothing overlaps, so each mark brackets its own step
        CHECK(k.h2d_done_ms - k.ready_ms >= kStep);
        CHECK(k.kernel_done_ms - k.h2d_done_ms >= kStep);
        CHECK(k.d2h_done_ms - k.kernel_done_ms >= kStep);
      }
    }
  }
}

// ============================================================================ arguments

TEST_CASE("streamed_map rejects bad arguments before enqueueing anything", "[day01][streams][args][quick]") {
  const int64_t n = 1000;
  Problem p(n, course::case_seed("streams_args", 0));
  std::vector<float> pageable(static_cast<size_t>(n));
  poison_outputs(p);
  float *hx = p.h_x.data(), *hy = p.h_y.data(), *dx = p.d_x.data(), *dy = p.d_y.data();
  COURSE_CHECK_INVALID_ARGUMENT("h_x", streamed_map(nullptr, hy, dx, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("h_y", streamed_map(hx, nullptr, dx, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("d_x", streamed_map(hx, hy, nullptr, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("d_y", streamed_map(hx, hy, dx, nullptr, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("n", streamed_map(hx, hy, dx, dy, 0, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("n", streamed_map(hx, hy, dx, dy, -5, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("chunks", streamed_map(hx, hy, dx, dy, n, 0, 2));
  COURSE_CHECK_INVALID_ARGUMENT("chunks", streamed_map(hx, hy, dx, dy, n, -1, 2));
  COURSE_CHECK_INVALID_ARGUMENT("streams", streamed_map(hx, hy, dx, dy, n, 4, 0));
  COURSE_CHECK_INVALID_ARGUMENT("streams", streamed_map(hx, hy, dx, dy, n, 4, kStreamMapMaxStreams + 1));
  // Swapped host and device pointers.
  COURSE_CHECK_INVALID_ARGUMENT("h_x", streamed_map(dx, hy, dx, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("h_y", streamed_map(hx, dy, dx, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("d_x", streamed_map(hx, hy, hx, dy, n, 4, 2));
  COURSE_CHECK_INVALID_ARGUMENT("d_y", streamed_map(hx, hy, dx, pageable.data(), n, 4, 2));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (int64_t i = 0; i < n; ++i)
    if (!course::is_poison_f32(hy[i])) {
      FAIL_CHECK("h_y[" << i << "] was written by a call that should have been rejected");
      break;
    }
  for (float v : p.d_y.download())
    if (!course::is_poison_f32(v)) {
      FAIL_CHECK("d_y was written by a call that should have been rejected");
      break;
    }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("stream_map_reference: f(x) = x·(2 − 2^−K) = 2x, the closed form", "[day01][streams][quick]") {
  // z_k = x·(2 − 2^−k): after K = 2048 steps 2^−K is far below any rounding, and 2x is exact in
  // fp32, so the reference must return 2x exactly (also for 0, tiny and large values).
  std::vector<float> x = course::random_normal(4096, course::case_seed("streams_reference", 0));
  for (float v : {0.f, -0.f, 1.f, -1.f, 0.5f, 3.25f, -1e-30f, 1e-38f, 1e30f, -3e37f}) x.push_back(v);
  std::vector<float> y(x.size());
  stream_map_reference(x.data(), y.data(), int64_t(x.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (y[i] != 2.f * x[i] && ++bad <= 5) FAIL_CHECK("f(" << x[i] << ") = " << y[i] << ", expected " << 2.f * x[i]);
  CHECK(bad == 0);
}
