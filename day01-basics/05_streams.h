// Day 01 · Exercise 05 · streams — the contract shared by skeleton, solution and tests.
//
//   y[i] = f(x[i])   for 0 <= i < n,   x and y in HOST memory
//
// f is a deliberately expensive way to double a number: K = kStreamMapIterations dependent
// fused multiply-adds per element,
//   z_0 = x,   z_{k+1} = 0.5·z_k + x   (one fmaf each),   f(x) = z_K = x·(2 − 2^−K),
// which for K = 2048 is 2x up to the rounding of the last steps (the fp32 iteration may stop one
// unit in the last place below 2x). Its only job is to cost 2K = 4096 FLOP per element, about as
// long on an H100 as moving that element's 4 bytes across PCIe in one direction, so that copies
// and compute are worth overlapping. stream_map_reference below is f on the host, in double: the
// tests compare with it at the fp32 tolerance.
//
// streamed_map cuts [0, n) into `chunks` chunks (stream_chunk_range) and, for chunk c, on work
// stream c % streams: copies x's chunk from h_x into d_x (cudaMemcpyAsync), runs f on it from
// d_x into d_y, copies the result from d_y into h_y. Chunks on different streams overlap: one
// chunk's copies run while another chunk's kernel computes.
//
//   h_x, h_y   host memory, n floats each: pinned (cudaMallocHost, cudaHostAlloc,
//              cudaHostRegister) for copies that overlap, or ordinary pageable memory, which
//              gives the same output but serialises (lesson: "Copy engines and pinned memory").
//              They must not overlap each other.
//   d_x, d_y   device memory, n floats each, scratch for the chunks (the launcher allocates
//              nothing). d_y may be the same buffer as d_x; both are overwritten.
//   n > 0; chunks >= 1 (more chunks than elements is fine: the extra ones are empty and nothing
//   is enqueued for them); 1 <= streams <= kStreamMapMaxStreams.
//
// Streams and events. The launcher creates its `streams` work streams (cudaStreamNonBlocking)
// and the events it needs, and destroys them before it returns: streams are this exercise's
// subject, and creating a handful costs microseconds next to the milliseconds of copies (a real
// pipeline creates them once and reuses them). Ordering with the caller goes through `stream`:
// the work streams start only after everything already enqueued on `stream` (one event recorded
// there, waited on by every work stream), and `stream` waits for every work stream before
// anything enqueued on it later.
//
// Unlike every other launcher of the course, streamed_map SYNCHRONISES before it returns: its
// output is host memory, which the caller reads with plain loads that no stream orders. When it
// returns, h_y holds every y[i] and `stream` has no pending work from the call.
//
// Throws std::invalid_argument naming the field (h_x, h_y, d_x, d_y, n, chunks, streams), before
// anything is enqueued, for a null pointer, h_x or h_y in device memory, d_x or d_y not in device
// (or managed) memory, n <= 0, chunks <= 0, or streams outside [1, kStreamMapMaxStreams]. A
// failing CUDA call (stream, event, copy, launch) throws std::runtime_error (CUDA_CHECK).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

constexpr int kStreamMapIterations = 2048;  // K: dependent FMAs per element, 2K FLOP
constexpr int kStreamMapMaxStreams = 16;

// The elements [begin, end) of chunk c (index helper: the launcher calls it, the [index] tests
// check it on the CPU). With L = ceil(n / chunks), chunk c covers
//   [min(n, c·L), min(n, (c + 1)·L))
// so chunks 0, 1, 2, ... tile [0, n) in order, all of length L except the last non-empty one,
// which holds the remainder (n − (ceil(n / L) − 1)·L elements, L when L divides n). Chunks that
// start at or past n are empty with begin = end = n: exactly those with c·L >= n (with n = 10:
// 4 chunks give [0,3) [3,6) [6,9) [9,10); 12 chunks give ten of one element, then two [10,10)).
// Needs n >= 0, chunks >= 1, 0 <= c < chunks; exact for every n up to INT64_MAX, where
// n + chunks − 1 and (c + 1)·L can overflow (c·L cannot: it stays below max(n, chunks²)).
struct ChunkRange {
  int64_t begin, end;
};
ChunkRange stream_chunk_range(int64_t n, int chunks, int c);

// What the GPU's clock said about one chunk, in milliseconds after the fork (the event recorded
// on `stream` at the start, which every work stream waits for). Each value is an event recorded
// on the chunk's work stream, so it is the moment that stream had finished everything before it:
//   ready_ms        before the chunk's H2D copy: the stream's previous chunk is done
//   h2d_done_ms     its H2D copy has finished
//   kernel_done_ms  its kernel has finished
//   d2h_done_ms     its D2H copy has finished
// ready_ms <= h2d_done_ms <= kernel_done_ms <= d2h_done_ms <= total_ms. An empty chunk records
// its four events all the same, one after another. NOT when an operation started: a copy may
// wait behind another stream's copy on the same copy engine after its stream was ready
// (lesson: "Reading the overlap from event timestamps").
struct ChunkTimes {
  int stream = 0;  // the work stream that ran it: c % streams
  float ready_ms = 0.f, h2d_done_ms = 0.f, kernel_done_ms = 0.f, d2h_done_ms = 0.f;
};
struct StreamTimeline {
  std::vector<ChunkTimes> chunks;  // one entry per chunk, empty ones included
  float total_ms = 0.f;            // fork to join: when `stream` had waited for every work stream
};

// Fills *timeline (when not null) with four event times per chunk, at the cost of 4·chunks
// events: meant for tens to a few hundred chunks.
void streamed_map(const float* h_x, float* h_y, float* d_x, float* d_y, int64_t n, int chunks, int streams,
                  cudaStream_t stream = 0, StreamTimeline* timeline = nullptr);

// f on the host, in double: the reference the tests and the bench compare with. 0.5·z is exact,
// so 0.5·z + x rounds once, as the GPU's fmaf does. Sixteen elements go through the iterations
// side by side, which the compiler vectorises (one element at a time would wait on every step's
// latency: ~16 000 cycles per element).
inline void stream_map_reference(const float* x, float* y, int64_t n) {
  constexpr int kLanes = 16;
  for (int64_t i0 = 0; i0 < n; i0 += kLanes) {
    const int m = int(std::min<int64_t>(kLanes, n - i0));
    double xs[kLanes], z[kLanes];
    for (int j = 0; j < kLanes; ++j) z[j] = xs[j] = j < m ? double(x[i0 + j]) : 0.0;
    for (int k = 0; k < kStreamMapIterations; ++k)
      for (int j = 0; j < kLanes; ++j) z[j] = 0.5 * z[j] + xs[j];
    for (int j = 0; j < m; ++j) y[i0 + j] = float(z[j]);
  }
}
