// Family "streams": y = f(x) from host memory to host memory through the GPU, chunk by chunk over
// CUDA streams (day 01 · 05_streams). Four rows per shape, one launcher:
//   pageable, 1 stream    ordinary host memory: the copies go through the driver's staging buffer
//   pageable, S streams   the same with S streams: staging serialises them anyway
//   pinned, 1 stream      page-locked memory, but one stream: copy, compute, copy, chunk after chunk
//   pinned, S streams     the pipeline: one chunk's copies overlap another chunk's kernel
// The time is the whole trip, fork to join (events on the bench's stream around the call, which
// synchronises). GB/s counts what crosses PCIe, 4n bytes each way; the "% copy" column compares
// that with the HBM copy roof and means little here.
//
// The pinned S-stream row also prints an overlap report to stdout: the parts (H2D, kernel, D2H
// summed over the chunks of a 1-stream run, from its per-chunk events), the bound they put on
// the overlapped time, the overlap efficiency (bound / measured median), and the timelines of
// one 1-stream and one S-stream run drawn from their events (lesson: "Reading the overlap from
// event timestamps").
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "compare.h"

// The whole family exists only where the exercise's library does (one #ifdef, see
// bench/README.md, "Adding a family").
#ifdef BENCH_HAVE_05_streams
#include "05_streams.h"

namespace bench {
namespace {

Shape streams_shape(int64_t n, int chunks, int streams) {
  Shape s;
  s.family = "streams";
  s.n = n;
  s.extra = {{"chunks", chunks}, {"streams", streams}};
  s.name = "n" + std::to_string(n) + "_c" + std::to_string(chunks) + "_s" + std::to_string(streams);
  s.csv = {{"n", std::to_string(n)}, {"chunks", std::to_string(chunks)}, {"streams", std::to_string(streams)}};
  return s;
}

FamilyDef streams_family() {
  FamilyDef f;
  f.name = "streams";
  f.title = "host -> GPU -> host in chunks over streams (PCIe bytes; overlap report above the table)";
  f.order = 450;
  f.shape_syntax = "streams:n=67108864,chunks=16,streams=4";
  // 256 MiB each way: at PCIe Gen5 rates each direction takes milliseconds, far above the cost
  // of enqueueing a chunk; 16 and 64 chunks show the price of filling and draining the pipeline.
  f.grid = [] {
    return std::vector<Shape>{streams_shape(int64_t(1) << 26, 16, 4), streams_shape(int64_t(1) << 26, 64, 4)};
  };
  f.parse = [](ShapeSpec& spec) {
    const int64_t n = spec.take("n", int64_t(1) << 26);
    const int chunks = int(spec.take("chunks", 16));
    const int streams = int(spec.take("streams", 4));
    if (streams > kStreamMapMaxStreams)
      throw std::invalid_argument("streams: at most " + std::to_string(kStreamMapMaxStreams) + " streams");
    return streams_shape(n, chunks, streams);
  };
  f.validation_key = [](const Shape& s) { return "s" + std::to_string(s.extra.at("streams")); };
  f.flops = [](const Shape& s) { return 2.0 * kStreamMapIterations * double(s.n); };
  f.bytes = [](const Shape& s) { return 2.0 * sizeof(float) * double(s.n); };  // x over, y back
  return f;
}

// h_x and h_y, pinned (cudaMallocHost) or pageable, each followed by kTail floats of poison so
// that a copy past the end lands in memory we own and can be reported.
class HostPair {
 public:
  static constexpr size_t kTail = 1024;
  HostPair(int64_t n, bool pinned) : n_(size_t(n)), pinned_(pinned) {
    const size_t bytes = (n_ + kTail) * sizeof(float);
    if (pinned) {
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&x_), bytes));
      try {
        CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&y_), bytes));
      } catch (...) {
        cudaFreeHost(x_);
        throw;
      }
    } else {
      px_.resize(n_ + kTail);
      py_.resize(n_ + kTail);
      x_ = px_.data();
      y_ = py_.data();
    }
    for (size_t i = n_; i < n_ + kTail; ++i) x_[i] = y_[i] = course::poison_f32();
  }
  // "" when the floats behind h_x and h_y still hold their poison.
  std::string tail_damage() const {
    for (size_t i = n_; i < n_ + kTail; ++i)
      if (!course::is_poison_f32(y_[i]) || !course::is_poison_f32(x_[i]))
        return "out-of-bounds write: element " + std::to_string(i - n_) + " past the end of " +
               (course::is_poison_f32(y_[i]) ? "h_x" : "h_y") + " was written";
    return "";
  }
  ~HostPair() {
    if (pinned_) {
      cudaFreeHost(x_);
      cudaFreeHost(y_);
    }
  }
  HostPair(const HostPair&) = delete;
  HostPair& operator=(const HostPair&) = delete;
  float* x() { return x_; }
  float* y() { return y_; }

 private:
  size_t n_;
  bool pinned_;
  float *x_ = nullptr, *y_ = nullptr;
  std::vector<float> px_, py_;
};

// ---------------------------------------------------------------------------- overlap report
struct Parts {
  double h2d = 0, kernel = 0, d2h = 0;
};

// Each step's duration in a ONE-stream run: there every mark follows the previous step directly,
// so the gap between two marks is the step between them.
Parts parts_of(const StreamTimeline& serial) {
  Parts p;
  for (const ChunkTimes& t : serial.chunks) {
    p.h2d += std::max(0.f, t.h2d_done_ms - t.ready_ms);
    p.kernel += std::max(0.f, t.kernel_done_ms - t.h2d_done_ms);
    p.d2h += std::max(0.f, t.d2h_done_ms - t.kernel_done_ms);
  }
  return p;
}

// One lane per engine, one character per chunk (0-9, a-z, then again). A step's end is its event;
// its start is estimated as the later of "its input is there" (the previous step of the chunk,
// or the stream being ready) and "the same engine finished the step before it" (each direction's
// copies, and kernels that fill the GPU, run in the order they were issued).
std::string chart(const StreamTimeline& t, double scale_ms, int width) {
  static const char kIds[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string lane[3] = {std::string(size_t(width), ' '), std::string(size_t(width), ' '),
                         std::string(size_t(width), ' ')};
  double engine_free[3] = {0, 0, 0};
  auto col = [&](double ms) { return std::min(width - 1, std::max(0, int(ms / scale_ms * width))); };
  for (size_t c = 0; c < t.chunks.size(); ++c) {
    const ChunkTimes& k = t.chunks[c];
    const double end[3] = {k.h2d_done_ms, k.kernel_done_ms, k.d2h_done_ms};
    double input = k.ready_ms;
    for (int e = 0; e < 3; ++e) {
      const double start = std::max(input, engine_free[e]);
      if (end[e] > start) {
        const int a = col(start), b = std::max(a, col(end[e]) - 1);  // at least one column per step
        for (int x = a; x <= b; ++x) lane[e][size_t(x)] = kIds[c % 36];
        engine_free[e] = end[e];
      }
      input = std::max(input, end[e]);
    }
  }
  const char* names[3] = {"H2D    ", "kernel ", "D2H    "};
  std::ostringstream o;
  for (int e = 0; e < 3; ++e) o << "      " << names[e] << "|" << lane[e] << "|\n";
  return o.str();
}

void print_overlap_report(const Shape& s, const StreamTimeline& serial, const StreamTimeline& overlapped,
                          double measured_ms) {
  int dev = 0, engines = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&engines, cudaDevAttrAsyncEngineCount, dev));
  const int chunks = int(s.extra.at("chunks")), streams = int(s.extra.at("streams"));
  const Parts p = parts_of(serial);
  const double bound_two = std::max({p.h2d, p.kernel, p.d2h});  // both directions at once
  const double bound_one = std::max(p.h2d + p.d2h, p.kernel);   // one engine for both directions
  const double bound = engines >= 2 ? bound_two : bound_one;
  char buf[512];
  std::ostringstream o;
  o << "\n05_streams overlap report, " << s.name << " (n = " << s.n << ", " << chunks << " chunks, " << streams
    << " streams), asyncEngineCount = " << engines << "\n";
  std::snprintf(buf, sizeof buf,
                "  parts, from the per-chunk events of a 1-stream run: H2D %.3f ms, kernel %.3f ms, D2H %.3f ms "
                "(sum %.3f ms)\n",
                p.h2d, p.kernel, p.d2h, p.h2d + p.kernel + p.d2h);
  o << buf;
  std::snprintf(buf, sizeof buf, "  bound with 2+ copy engines, max(H2D, kernel, D2H) = %.3f ms%s\n", bound_two,
                engines >= 2 ? "   <- this GPU" : "");
  o << buf;
  std::snprintf(buf, sizeof buf, "  bound with 1 copy engine,   max(H2D + D2H, kernel) = %.3f ms%s\n", bound_one,
                engines >= 2 ? "" : "   <- this GPU");
  o << buf;
  std::snprintf(buf, sizeof buf,
                "  measured with %d streams (median): %.3f ms -> overlap efficiency = bound / measured = %.1f %%, "
                "%.2fx faster than the sum of the parts\n",
                streams, measured_ms, measured_ms > 0 ? 100.0 * bound / measured_ms : 0.0,
                measured_ms > 0 ? (p.h2d + p.kernel + p.d2h) / measured_ms : 0.0);
  o << buf;
  const double scale = std::max({double(serial.total_ms), double(overlapped.total_ms), 1e-3});
  const int width = 96;
  std::snprintf(buf, sizeof buf,
                "  one run each, drawn from its events (step start = max(input ready, engine free)); "
                "full width = %.3f ms\n",
                scale);
  o << buf;
  std::snprintf(buf, sizeof buf, "    1 stream, fork to join %.3f ms:\n", serial.total_ms);
  o << buf << chart(serial, scale, width);
  std::snprintf(buf, sizeof buf, "    %d streams, fork to join %.3f ms:\n", streams, overlapped.total_ms);
  o << buf << chart(overlapped, scale, width);
  if (overlapped.chunks.size() <= 16) {
    o << "    the same " << streams << "-stream run, per chunk (ms after the fork):\n"
      << "      chunk stream    ready  H2D done  kernel done  D2H done\n";
    for (size_t c = 0; c < overlapped.chunks.size(); ++c) {
      const ChunkTimes& k = overlapped.chunks[c];
      std::snprintf(buf, sizeof buf, "      %5zu %6d %8.3f %9.3f %12.3f %9.3f\n", c, k.stream, k.ready_ms,
                    k.h2d_done_ms, k.kernel_done_ms, k.d2h_done_ms);
      o << buf;
    }
  }
  std::cout << o.str() << std::flush;
}

// ---------------------------------------------------------------------------- the rows
Kernel streams_kernel(const std::string& launcher, int order, bool pinned, bool many) {
  Kernel k;
  k.exercise = "05_streams";
  k.launcher = launcher;
  k.family = "streams";
  k.order = order;
  auto streams_of = [many](const Shape& s) { return many ? int(s.extra.at("streams")) : 1; };
  k.validate = [pinned, streams_of](const Shape& s, Check& c, cudaStream_t st) {
    const int64_t n = 100003;  // prime: 7 chunks leave a remainder chunk
    const int streams = streams_of(s);
    const auto x = course::random_normal(size_t(n), seed_for("streams", 0));
    std::vector<float> ref(static_cast<size_t>(n));
    stream_map_reference(x.data(), ref.data(), n);
    HostPair h(n, pinned);
    std::copy(x.begin(), x.end(), h.x());
    for (int64_t i = 0; i < n; ++i) h.y()[i] = course::poison_f32();
    auto dx = output_buffer(size_t(n)), dy = output_buffer(size_t(n));  // poisoned scratch
    inputs_ready();
    streamed_map(h.x(), h.y(), dx.data(), dy.data(), n, 7, streams, st);
    // Read h_y at once: the launcher promises it is complete when it returns.
    course::CompareResult r = course::compare(h.y(), ref.data(), course::Dims{{"i", n}}, course::Tolerance::fp32());
    CUDA_CHECK(cudaDeviceSynchronize());  // whatever it left running lands before the tails are read
    const std::string tail = h.tail_damage();
    if (!tail.empty()) {
      r.ok = false;
      r.report = tail + (r.report.empty() ? "" : "\n" + r.report);
    }
    merge(c, r, "n=100003 chunks=7 streams=" + std::to_string(streams) + (pinned ? " pinned" : " pageable"));
  };
  k.device_bytes = [](const Shape& s) { return 2.0 * sizeof(float) * double(s.n); };
  k.time = [pinned, many, streams_of](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const int64_t n = s.n;
    const int chunks = int(s.extra.at("chunks")), streams = streams_of(s);
    HostPair h(n, pinned);
    for (int64_t i = 0; i < n; ++i) h.x()[i] = float(i % 2048) * (1.f / 1024.f) - 1.f;  // values do not matter
    auto dx = filled(n, 1, st), dy = filled(n, 2, st);
    inputs_ready();
    const Measurement m =
        timed([&] { streamed_map(h.x(), h.y(), dx.data(), dy.data(), n, chunks, streams, st); }, st, cfg, fl);
    if (pinned && many) {
      StreamTimeline serial, overlapped;
      streamed_map(h.x(), h.y(), dx.data(), dy.data(), n, chunks, 1, st, &serial);
      streamed_map(h.x(), h.y(), dx.data(), dy.data(), n, chunks, streams, st, &overlapped);
      print_overlap_report(s, serial, overlapped, m.median_ms);
    }
    return m;
  };
  return k;
}

bool register_all() {
  add_family(streams_family());
  add_kernel(streams_kernel("streamed_map (pageable, 1 stream)", 10, false, false));
  add_kernel(streams_kernel("streamed_map (pageable, S streams)", 20, false, true));
  add_kernel(streams_kernel("streamed_map (pinned, 1 stream)", 30, true, false));
  add_kernel(streams_kernel("streamed_map (pinned, S streams)", 40, true, true));
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench

#endif  // BENCH_HAVE_05_streams
