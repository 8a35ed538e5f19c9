// Day 01 · Exercise 05 · streams: overlapping host↔device copies with a kernel, chunk by chunk over CUDA streams.
// Lesson: day01-basics/05_streams/README.md. Test: make test EX=05_streams
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "05_streams.h"
#include "check_args.h"
#include "cuda_check.h"

// The chunk's elements [begin, end) (the header's contract; the [index] tests call it on the CPU).
ChunkRange stream_chunk_range(int64_t n, int chunks, int c) {
  // snippet-begin: chunk-range
  const int64_t len = n / chunks + (n % chunks != 0);  // ceil(n / chunks), without n + chunks - 1
  const int64_t begin = std::min(n, int64_t(c) * len);
  return {begin, begin + std::min(len, n - begin)};  // cut at n, without (c + 1) * len
  // snippet-end: chunk-range
}

namespace {

constexpr int kThreads = 256;

// f of the header on len elements: K dependent FMAs each. A grid-stride loop (exercise 01), so
// any grid covers any chunk.
__global__ void stream_map_kernel(const float* x, float* y, int64_t len) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < len; i += stride) {
    const float xi = x[i];
    float z = xi;
    for (int k = 0; k < kStreamMapIterations; ++k) z = fmaf(0.5f, z, xi);
    y[i] = z;
  }
}

// Blocks for a chunk of len > 0 elements: one thread per element, at most 32 blocks per SM
// (exercise 01, "How many blocks?").
int blocks_for(int64_t len, int sms) {
  return int(std::min<int64_t>((len + kThreads - 1) / kThreads, int64_t(sms) * 32));
}

// Streams and events that destroy themselves when the launcher returns, also when a CUDA_CHECK
// throws half-way. Destroying a stream or an event whose work is still pending is allowed: the
// runtime frees it once that work is done.
class StreamSet {
 public:
  explicit StreamSet(int count) {
    try {
      for (int i = 0; i < count; ++i) {
        cudaStream_t s = nullptr;
        // Non-blocking: no implicit wait for (or by) the legacy default stream, see the lesson.
        CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        streams_.push_back(s);
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~StreamSet() { release(); }
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;
  cudaStream_t operator[](int i) const { return streams_[size_t(i)]; }

 private:
  void release() {
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    streams_.clear();
  }
  std::vector<cudaStream_t> streams_;
};

class EventSet {
 public:
  // timing = false: the event only orders work (cudaEventDisableTiming, a little cheaper).
  EventSet(int64_t count, bool timing) {
    try {
      for (int64_t i = 0; i < count; ++i) {
        cudaEvent_t e = nullptr;
        CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
        events_.push_back(e);
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~EventSet() { release(); }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  cudaEvent_t operator[](int64_t i) const { return events_[size_t(i)]; }

 private:
  void release() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
  }
  std::vector<cudaEvent_t> events_;
};

cudaMemoryType memory_type(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // not a pointer the runtime knows: ordinary host memory
    return cudaMemoryTypeUnregistered;
  }
  return a.type;
}

void require_host(const void* p, const char* field) {
  course::require(memory_type(p) != cudaMemoryTypeDevice, "streamed_map", field,
                  "must be host memory (pinned or pageable), not device memory");
}

void require_device(const void* p, const char* field) {
  const cudaMemoryType t = memory_type(p);
  course::require(t == cudaMemoryTypeDevice || t == cudaMemoryTypeManaged, "streamed_map", field,
                  "must be device memory (cudaMalloc), not host memory");
}

// Milliseconds from event a to event b, both recorded and complete.
float ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0.f;
  const cudaError_t err = cudaEventElapsedTime(&ms, a, b);
  if (err != cudaSuccess) {
    cudaGetLastError();  // do not leave the error for the next, unrelated CUDA call to report
    throw std::runtime_error(std::string("streamed_map: cannot read the timeline: ") + cudaGetErrorName(err) +
                             " (every event must be recorded, and complete when the launcher reads it: "
                             "is every mark recorded, and does the host wait for `done`?)");
  }
  return ms;
}

}  // namespace

void streamed_map(const float* h_x, float* h_y, float* d_x, float* d_y, int64_t n, int chunks, int streams,
                  cudaStream_t stream, StreamTimeline* timeline) {
  course::require_not_null(h_x, "streamed_map", "h_x");
  course::require_not_null(h_y, "streamed_map", "h_y");
  course::require_not_null(d_x, "streamed_map", "d_x");
  course::require_not_null(d_y, "streamed_map", "d_y");
  course::require_positive(n, "streamed_map", "n");
  course::require_positive(chunks, "streamed_map", "chunks");
  course::require(streams >= 1 && streams <= kStreamMapMaxStreams, "streamed_map", "streams",
                  "must be in [1, " + std::to_string(kStreamMapMaxStreams) + "] (got " + std::to_string(streams) + ")");
  require_host(h_x, "h_x");
  require_host(h_y, "h_y");
  require_device(d_x, "d_x");
  require_device(d_y, "d_y");

  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  const StreamSet work(streams);          // work[s]: the chunks c with c % streams == s, in order
  const EventSet fork(1, true);           // fork[0] on `stream`: time 0 of the timeline
  const EventSet joined(streams, false);  // joined[s]: work stream s has finished its chunks
  const EventSet done(1, true);           // done[0] on `stream`, after it waited for every joined[s]
  const EventSet marks(timeline ? int64_t(chunks) * 4 : 0, true);
  // mark(c, k, s): event k of chunk c on stream s (0 ready, 1 H2D done, 2 kernel done, 3 D2H
  // done), recorded only when the caller asked for a timeline.
  auto mark = [&](int c, int k, cudaStream_t s) {
    if (timeline) CUDA_CHECK(cudaEventRecord(marks[int64_t(c) * 4 + k], s));
  };

  // snippet-begin: fork
  CUDA_CHECK(cudaEventRecord(fork[0], stream));
  for (int s = 0; s < streams; ++s) CUDA_CHECK(cudaStreamWaitEvent(work[s], fork[0], 0));
  // snippet-end: fork

  for (int c = 0; c < chunks; ++c) {
    // snippet-begin: chunk
    const ChunkRange r = stream_chunk_range(n, chunks, c);
    const int64_t len = r.end - r.begin;
    const cudaStream_t s = work[c % streams];
    // snippet-end: chunk
    // snippet-begin: enqueue
    const size_t bytes = size_t(len) * sizeof(float);
    mark(c, 0, s);
    if (len > 0) CUDA_CHECK(cudaMemcpyAsync(d_x + r.begin, h_x + r.begin, bytes, cudaMemcpyHostToDevice, s));
    mark(c, 1, s);
    if (len > 0) {  // an empty chunk launches nothing: a grid of 0 blocks is an error
      stream_map_kernel<<<blocks_for(len, sms), kThreads, 0, s>>>(d_x + r.begin, d_y + r.begin, len);
      CUDA_CHECK(cudaGetLastError());  // the launch itself (CUDA_CHECK_LAUNCH() says the same)
    }
    mark(c, 2, s);
    if (len > 0) CUDA_CHECK(cudaMemcpyAsync(h_y + r.begin, d_y + r.begin, bytes, cudaMemcpyDeviceToHost, s));
    mark(c, 3, s);
    // snippet-end: enqueue
  }

  // snippet-begin: join
  for (int s = 0; s < streams; ++s) {
    CUDA_CHECK(cudaEventRecord(joined[s], work[s]));
    CUDA_CHECK(cudaStreamWaitEvent(stream, joined[s], 0));
  }
  // snippet-end: join
  CUDA_CHECK(cudaEventRecord(done[0], stream));
  // snippet-begin: sync
  CUDA_CHECK(cudaEventSynchronize(done[0]));
  // snippet-end: sync

  if (timeline) {
    timeline->chunks.assign(size_t(chunks), ChunkTimes{});
    for (int c = 0; c < chunks; ++c) {
      ChunkTimes& t = timeline->chunks[size_t(c)];
      t.stream = c % streams;
      t.ready_ms = ms_between(fork[0], marks[int64_t(c) * 4 + 0]);
      t.h2d_done_ms = ms_between(fork[0], marks[int64_t(c) * 4 + 1]);
      t.kernel_done_ms = ms_between(fork[0], marks[int64_t(c) * 4 + 2]);
      t.d2h_done_ms = ms_between(fork[0], marks[int64_t(c) * 4 + 3]);
    }
    timeline->total_ms = ms_between(fork[0], done[0]);
  }
}
