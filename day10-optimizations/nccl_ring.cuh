// Day 10 · the ring of GPUs that exercise 12 (ring attention) runs on: R ranks, one GPU each, all
// driven by ONE host thread. Given code: exercise 12 uses it and never edits it.
//
//   RingComm ring(R);                     // rank r on GPU r; throws when fewer than R GPUs exist
//   RingComm ring(R, 10.0, {2, 3});       // or on the GPUs listed, a different one per rank
//   ring.size()  ring.device(r)  ring.comm(r)  ring.compute_stream(r)  ring.comm_stream(r)
//   ring.kv_ready(r, slot), ring.kv_free(r)   // events per rank for the handshake of a step
//   ring.check(ncclGroupEnd(), "what");   // throws on a real NCCL error (ncclInProgress is none)
//   ring.wait_enqueued("what");           // the group's sends and receives are on their streams
//   ring.synchronize("what");             // every stream of every rank has finished
//
// Why non-blocking communicators (config.blocking = 0). One thread plays every rank, so a NCCL
// call that waited on the host for a peer would wait for a call this very thread has not made
// yet: a hang nothing could end. Non-blocking communicators return ncclInProgress instead, and
// wait_enqueued and synchronize poll with a deadline (timeout_s, 10 s by default). A send/recv
// order that deadlocks (on the host while NCCL connects the peers, or on the GPUs, where a
// receive waits for a send queued behind another receive) therefore ends as a
// std::runtime_error whose message says "deadlock", after every communicator was aborted
// (ncclCommAbort also ends NCCL kernels that wait forever), never as a hang. Each stage of that
// abort is noted on stderr ("ring [+t s]: ..."). Afterwards aborted() is true and the ring does
// nothing more; wedged() is true if the abort itself did not finish or left a stream busy within
// the deadline: then nothing on those GPUs can be freed safely (cudaFree waits for the device).
//
// A ring of one rank needs no communicator: comm(0) is null and nothing may be sent.
//
// NVLink multicast (NVLS) stays off: the constructor sets NCCL_NVLS_ENABLE=0 unless the
// environment already sets it. Ring attention only sends and receives, which never need it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// The NCCL element type of a 16-bit tensor.
template <class T>
inline ncclDataType_t nccl_type_of();
template <>
inline ncclDataType_t nccl_type_of<__half>() {
  return ncclFloat16;
}
template <>
inline ncclDataType_t nccl_type_of<__nv_bfloat16>() {
  return ncclBfloat16;
}

class RingComm {
 public:
  explicit RingComm(int ranks, double timeout_s = 10.0, std::vector<int> devices = {}) : timeout_s_(timeout_s) {
    if (ranks < 1)
      throw std::invalid_argument("RingComm: argument 'ranks' must be >= 1 (got " + std::to_string(ranks) + ")");
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    if (devices.empty()) {
      if (count < ranks)
        throw std::runtime_error("RingComm: needs " + std::to_string(ranks) + " GPUs, found " + std::to_string(count));
      for (int r = 0; r < ranks; ++r) devices.push_back(r);
    }
    if (int(devices.size()) != ranks)
      throw std::invalid_argument("RingComm: argument 'devices' must list one GPU per rank");
    for (int d : devices)
      if (d < 0 || d >= count)
        throw std::runtime_error("RingComm: GPU " + std::to_string(d) + " does not exist (found " +
                                 std::to_string(count) + ")");
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    try {
      for (int r = 0; r < ranks; ++r) {
        Rank k;
        k.device = devices[size_t(r)];
        cuda(cudaSetDevice(k.device), "cudaSetDevice");
        cuda(cudaStreamCreateWithFlags(&k.compute, cudaStreamNonBlocking), "cudaStreamCreate");
        cuda(cudaStreamCreateWithFlags(&k.comm_stream, cudaStreamNonBlocking), "cudaStreamCreate");
        for (cudaEvent_t& e : k.kv_ready) cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
        cuda(cudaEventCreateWithFlags(&k.kv_free, cudaEventDisableTiming), "cudaEventCreate");
        ranks_.push_back(k);
      }
      if (ranks > 1) {
        ncclUniqueId id;
        check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        check(ncclGroupStart(), "ncclGroupStart");
        for (int r = 0; r < ranks; ++r) {
          cuda(cudaSetDevice(ranks_[r].device), "cudaSetDevice");
          check(ncclCommInitRankConfig(&ranks_[r].comm, ranks, id, r, &config), "ncclCommInitRankConfig");
        }
        check(ncclGroupEnd(), "ncclGroupEnd (creating the communicators)");
        wait_enqueued("creating the communicators");
        connect();
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~RingComm() { release(); }
  RingComm(const RingComm&) = delete;
  RingComm& operator=(const RingComm&) = delete;

  int size() const { return int(ranks_.size()); }
  int device(int r) const { return ranks_.at(r).device; }
  ncclComm_t comm(int r) const { return ranks_.at(r).comm; }
  cudaStream_t compute_stream(int r) const { return ranks_.at(r).compute; }
  cudaStream_t comm_stream(int r) const { return ranks_.at(r).comm_stream; }
  // "A K/V block has landed in slot `slot` (0 or 1) of rank r" (recorded on comm_stream(r)). One
  // event per slot: the record for the block of step s + 1 may then be issued before the compute
  // of step s waits for the block of step s.
  cudaEvent_t kv_ready(int r, int slot) const { return ranks_.at(r).kv_ready[slot & 1]; }
  // "Rank r's compute has finished reading the block it held" (recorded on compute_stream(r)).
  cudaEvent_t kv_free(int r) const { return ranks_.at(r).kv_free; }
  double timeout_s() const { return timeout_s_; }
  bool aborted() const { return aborted_; }
  // After an abort that did not finish in time (ncclCommAbort still running, or streams still
  // busy): the GPUs may still be executing, so nothing of this ring is freed, and a caller should
  // free no device memory either (cudaFree waits for the whole device).
  bool wedged() const { return wedged_; }

  // A NCCL call's result: ncclSuccess and ncclInProgress (a non-blocking call still working)
  // pass; anything else aborts the ring and throws.
  void check(ncclResult_t res, const std::string& what) {
    if (res != ncclSuccess && res != ncclInProgress)
      fail(what + " failed: " + ncclGetErrorString(res) + " (" + ncclGetLastError(nullptr) + ")");
  }

  // After ncclGroupEnd: waits until every communicator has put the group's operations on its
  // stream (non-blocking communicators may still be connecting peers when ncclGroupEnd returns).
  // Only then may events be recorded after them. Aborts and throws past the deadline.
  void wait_enqueued(const std::string& what) {
    if (aborted_) fail(what + ": the ring was aborted earlier");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0;; ++spins) {
      bool pending = false;
      for (int r = 0; r < size(); ++r) pending |= comm_state(r, what) == ncclInProgress;
      if (!pending) return;
      if (std::chrono::steady_clock::now() > deadline)
        fail(what + ": ring step timed out after " + seconds() +
             " waiting for NCCL to connect the peers and enqueue the group: a send/recv order that "
             "deadlocks (a receive whose matching send is not in the same group) ends like this");
      pause(spins);
    }
  }

  // Waits until every stream of every rank is idle. Aborts and throws past the deadline.
  void synchronize(const std::string& what) {
    if (aborted_) fail(what + ": the ring was aborted earlier");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spins = 0;; ++spins) {
      bool busy = false;
      for (int r = 0; r < size(); ++r) {
        comm_state(r, what);
        cuda(cudaSetDevice(ranks_[r].device), "cudaSetDevice");
        for (cudaStream_t s : {ranks_[r].compute, ranks_[r].comm_stream}) {
          const cudaError_t e = cudaStreamQuery(s);
          if (e == cudaErrorNotReady)
            busy = true;
          else if (e != cudaSuccess)
            fail(what + ": rank " + std::to_string(r) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                 ")");
        }
      }
      if (!busy) return;
      if (std::chrono::steady_clock::now() > deadline)
        fail(what + ": ring step timed out after " + seconds() +
             ": the ranks' streams did not finish; a send/recv order that deadlocks (a receive "
             "waiting for a send queued behind another receive) ends like this");
      pause(spins);
    }
  }

 private:
  struct Rank {
    int device = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t compute = nullptr, comm_stream = nullptr;
    cudaEvent_t kv_ready[2] = {nullptr, nullptr}, kv_free = nullptr;
  };

  std::string seconds() const { return std::to_string(int(timeout_s_ + 0.5)) + " s"; }

  static void pause(int spins) {
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

  void cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string("RingComm: ") + what + " failed: " + cudaGetErrorString(e));
  }

  ncclResult_t comm_state(int r, const std::string& what) {
    if (ranks_[r].comm == nullptr) return ncclSuccess;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(ranks_[r].comm, &state);
    if (q != ncclSuccess) state = q;
    if (state != ncclSuccess && state != ncclInProgress)
      fail(what + ": rank " + std::to_string(r) + ": NCCL error " + ncclGetErrorString(state) + " (" +
           ncclGetLastError(ranks_[r].comm) + ")");
    return state;
  }

  // Ends every NCCL operation (also kernels waiting forever for a peer) and throws.
  [[noreturn]] void fail(const std::string& msg) {
    note(msg);
    abort_all();
    throw std::runtime_error("ring: " + msg +
                             (wedged_ ? " (the communicators were aborted, but the GPUs did not "
                                        "become idle: end the process)"
                                      : " (every communicator was aborted)"));
  }

  // What the failure path does, on stderr with the time since the ring's first deadline, so that
  // a run that ends in a timeout says which stage it reached.
  void note(const std::string& msg) {
    using namespace std::chrono;
    if (noted_ == steady_clock::time_point{}) noted_ = steady_clock::now();
    std::fprintf(stderr, "ring [+%.2f s]: %s\n", duration<double>(steady_clock::now() - noted_).count(), msg.c_str());
    std::fflush(stderr);
  }

  // ncclCommAbort sets the communicator's abort flag, which NCCL's kernels and host threads poll,
  // then frees it (the last communicator of the process frees them all). It runs on a helper
  // thread: if NCCL itself cannot finish, this thread still returns after the deadline.
  void abort_all() {
    aborted_ = true;
    std::vector<std::pair<ncclComm_t, int>> comms;
    for (Rank& k : ranks_) {
      if (k.comm != nullptr) comms.push_back({k.comm, k.device});
      k.comm = nullptr;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    if (!comms.empty()) {
      note("aborting " + std::to_string(comms.size()) + " communicators");
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread aborter([comms, done] {
        for (const auto& c : comms) {
          cudaSetDevice(c.second);
          ncclCommAbort(c.first);
        }
        done->store(true);
      });
      while (!done->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (done->load()) {
        aborter.join();
        note("communicators aborted");
      } else {
        aborter.detach();
        wedged_ = true;
        note("ncclCommAbort did not return within " + seconds());
      }
    }
    // The aborted kernels return; let the streams drain so the next test starts on idle GPUs.
    for (Rank& k : ranks_) {
      cudaSetDevice(k.device);
      while ((cudaStreamQuery(k.compute) == cudaErrorNotReady || cudaStreamQuery(k.comm_stream) == cudaErrorNotReady) &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (cudaStreamQuery(k.compute) == cudaErrorNotReady || cudaStreamQuery(k.comm_stream) == cudaErrorNotReady) {
        wedged_ = true;
        note("the streams of GPU " + std::to_string(k.device) + " are still busy after the abort");
      }
    }
    if (!wedged_) note("every stream is idle");
  }

  // One tiny exchange around the ring, so that NCCL connects every rank to its two neighbours
  // now and not during the first (timed) step of an attention call.
  void connect() {
    std::vector<char*> buf(ranks_.size(), nullptr);
    try {
      for (size_t r = 0; r < ranks_.size(); ++r) {
        cuda(cudaSetDevice(ranks_[r].device), "cudaSetDevice");
        cuda(cudaMalloc(&buf[r], 512), "cudaMalloc");
      }
      const int R = size();
      check(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < R; ++r) {
        check(ncclSend(buf[r], 256, ncclInt8, (r + 1) % R, ranks_[r].comm, ranks_[r].comm_stream), "ncclSend");
        check(ncclRecv(buf[r] + 256, 256, ncclInt8, (r + R - 1) % R, ranks_[r].comm, ranks_[r].comm_stream),
              "ncclRecv");
      }
      check(ncclGroupEnd(), "ncclGroupEnd (connecting the ring)");
      wait_enqueued("connecting the ring");
      synchronize("connecting the ring");
    } catch (...) {
      for (char* p : buf) cudaFree(p);
      throw;
    }
    for (char* p : buf) cudaFree(p);
  }

  void release() {
    if (wedged_) return;  // the GPUs may still run this ring's work: leak rather than wait forever
    for (Rank& k : ranks_) {
      cudaSetDevice(k.device);
      // Streams idle (or the ring aborted): abort only releases the communicator's resources.
      if (k.comm != nullptr) ncclCommAbort(k.comm);
      for (cudaEvent_t e : k.kv_ready)
        if (e) cudaEventDestroy(e);
      if (k.kv_free) cudaEventDestroy(k.kv_free);
      if (k.compute) cudaStreamDestroy(k.compute);
      if (k.comm_stream) cudaStreamDestroy(k.comm_stream);
      k = Rank{};
    }
    ranks_.clear();
  }

  std::vector<Rank> ranks_;
  double timeout_s_;
  bool aborted_ = false;
  bool wedged_ = false;
  std::chrono::steady_clock::time_point noted_{};
};
