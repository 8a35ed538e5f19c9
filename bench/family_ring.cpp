// Family "ring": day 10 · 12, ring attention: one long causal sequence split over R GPUs of one
// host, the K/V blocks travelling around a ring of ncclSend/ncclRecv while every rank runs the
// local kernel on the block it holds (day10-optimizations/12_ring_attention.h: exercise 10 on an
// sm_90 GPU where the build has it, else exercise 05; each row's note names the one that ran).
//
// Grid: fp16, B = 1, H = 16, D = 128 (H·D = 2048), causal, N ∈ {128k, 256k, 512k, 1M}, the
// zigzag split on R = 1, 2 and 4 GPUs; the naive split (rank r holds chunks 2r, 2r + 1) at
// N = 256k on R = 2 and 4, for the causal imbalance the zigzag split removes; and two "roof"
// rows, NCCL's own send/recv bandwidth between neighbours on the same R GPUs. A row whose R is
// more than cudaGetDeviceCount() says "needs R GPUs" (check "unsupported") and is not timed.
//
// Cost model: FLOPs = 4·B·H·N²·D / 2 (causal; 4·B·H·N²·D without the mask), summed over all R
// GPUs, so TFLOP/s is the ring's aggregate rate and "% fp16 GEMM" compares it with ONE GPU's
// cuBLAS roof (it may pass 100 % on several GPUs: the per-GPU rate is in `tflops_per_gpu`).
// Bytes: the fp16 Q, K, V read once and O written once (the K/V blocks that travel the ring are
// the ring's overhead, not work the attention must do). Roof rows: bytes = one rank's message,
// so GB/s is NCCL's bus bandwidth of a send/recv (nccl-tests' definition: busbw = algbw).
//
// Timing. The runs last up to seconds and span several GPUs, so the time is the host's steady
// clock from the launcher's call until ring.synchronize() returns (every stream of every rank
// idle): one untimed warm-up run, then the median of 3 or more runs (as many as fit half of
// --budget, at most --reps). No L2 flush: every run streams gigabytes through a 50 MB L2. A
// row whose run the ring's one-GPU rate predicts above 10 s is not timed (its note says so):
// on 4 H100s that is R = 1 at N = 1M (about 16 s), and the family takes about 3 minutes.
//
// Measured columns (Measurement::csv) and what the note says:
//   speedup       t(R = 1) / t(R) at the same N (and B, H, D, mask), where the R = 1 row ran in
//                 this run (it comes first in the grid); empty where it did not
//   pct_ideal     100 · speedup / R
//   tflops_per_gpu  TFLOP/s / R
//   imbalance     from the contract's split, not measured: the causal work (visible query-key
//                 pairs) of the busiest rank / the mean over ranks (zigzag ≈ 1, naive ≈ 2 − 1/R)
//   compute_ms    "the compute alone": the same R GPUs run, in parallel and with no transfer,
//                 every launch of the local kernel that rank r's compute stream makes in the
//                 contract's schedule (steps s = 0 .. R−1, the block of rank (r − s) mod R, each
//                 (query chunk, key chunk) pair that is not skipped, the diagonal with its
//                 mask), each followed by a device-to-device copy that moves the bytes of the
//                 log-sum-exp merge (running O read and written in fp32, partial O read: 10
//                 bytes per element), plus the start (running O cleared) and the output (fp32
//                 read, fp16 written). The exercise's own kernels are internal to it; copies of
//                 the same bytes stand in for them (the merges are memory-bound).
//   comm_ms       "the communication alone": the R − 1 exchange steps of the ring with nothing
//                 else running, each one NCCL group in which every rank sends one K/V block
//                 (K and V of two chunks of ⌈N / 2R⌉ tokens: 4·B·Hkv·⌈N / 2R⌉·D fp16 values)
//                 to rank r + 1 and receives one from rank r − 1
//   exposed_ms    max(0, t(R) − compute_ms): what the ring costs beyond its compute
//   hidden_pct    100 · (1 − exposed_ms / comm_ms), clamped to [0, 100]: the share of the
//                 communication's own time that did not show up in the ring's time. Where the
//                 ring's run-to-run spread exceeds half of comm_ms, the note says the share is
//                 within noise (at these N the transfers are ~1 % of the run).
// R = 1 has no transfers: speedup 1 by definition, no compute/comm columns.
//
// The check, once per (R, split, head group, D, mask): B = 1, Hkv = 2, N = 515 (not a multiple
// of 2R: chunks of unequal length), inputs drawn in fp32 and rounded to fp16, scattered over the
// ranks by the contract's split (written out below, independently of the exercise's helpers),
// outputs NaN-poisoned and guarded, every workspace filled with NaN bytes; the gathered output
// against the CPU reference on the rounded inputs (Tolerance::fp16()). The roof rows check that
// every rank received its left neighbour's bytes.
//
// NCCL_NVLS_ENABLE=0 is set (unless the environment sets it) before any NCCL call: NVLink
// multicast stays off on shared hosts, and a ring of sends and receives never needs it.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fp16_host.h"
#include "reference.h"

#ifdef BENCH_HAVE_12_ring_attention
#include <nccl.h>

#include "12_ring_attention.h"
#endif

namespace bench {
namespace {

using course::AttentionParams;

constexpr const char* kFamily = "ring";
constexpr double kMaxRunSeconds = 10.0;  // rows predicted slower per run are not timed
constexpr int kCheckN = 515;             // the check's sequence: chunks of unequal length for R = 2, 4

// NVLink multicast off before any NCCL communicator exists (RingComm sets it too).
void nvls_off() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

// ---- shapes ---------------------------------------------------------------------------------
int ranks_of(const Shape& s) { return int(s.extra.at("ranks")); }
bool is_roof(const Shape& s) { return s.extra.at("roof") != 0; }
bool zigzag_of(const Shape& s) { return s.extra.at("zigzag") != 0; }

Shape ring_shape(int ranks, int b, int h, int kv, int n, int d, bool causal, bool zigzag) {
  Shape s;
  s.family = kFamily;
  s.tag = "ring";
  s.attn = AttentionParams::make(b, h, kv, n, n, d, causal);
  s.extra = {{"ranks", ranks}, {"zigzag", zigzag ? 1 : 0}, {"roof", 0}};
  std::ostringstream o;
  o << "r" << ranks << "_b" << b << "_h" << h;
  if (kv != h) o << "_kv" << kv;
  o << "_n" << n << "_d" << d << (causal ? "_causal" : "") << (zigzag ? "_zigzag" : "_naive");
  s.name = o.str();
  s.csv = {{"batch", std::to_string(b)},   {"heads_q", std::to_string(h)},   {"heads_kv", std::to_string(kv)},
           {"seq_q", std::to_string(n)},   {"seq_k", std::to_string(n)},     {"head_dim", std::to_string(d)},
           {"causal", causal ? "1" : "0"}, {"ranks", std::to_string(ranks)}, {"split", zigzag ? "zigzag" : "naive"}};
  return s;
}

// NCCL's send/recv ring on R GPUs: every rank sends `mib` MiB to rank r + 1 and receives as
// much from rank r − 1, in one group (what one step of the ring does, without the compute).
Shape roof_shape(int ranks, int mib) {
  Shape s;
  s.family = kFamily;
  s.tag = "roof";
  s.n = int64_t(mib) << 20;
  s.extra = {{"ranks", ranks}, {"zigzag", 0}, {"roof", 1}};
  s.name = "roof_r" + std::to_string(ranks) + "_sendrecv_" + std::to_string(mib) + "MiB";
  s.csv = {{"ranks", std::to_string(ranks)}, {"n", std::to_string(s.n)}};
  return s;
}

double ring_flops(const Shape& s) {
  if (is_roof(s)) return 0.0;
  const auto& p = s.attn;
  const double f = 4.0 * p.batch * p.heads_q * double(p.seq_q) * p.seq_k * p.head_dim;
  return p.causal ? 0.5 * f : f;
}

double ring_bytes(const Shape& s) {
  if (is_roof(s)) return double(s.n);
  const auto& p = s.attn;
  return 2.0 * double(2 * p.q_elems() + 2 * p.kv_elems());
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title =
      "ring attention over R GPUs (NCCL), fp16, causal (FLOPs = 4·B·H·N²·D/2 over all R GPUs; % fp16 GEMM is of ONE "
      "GPU's roof; roof_nccl rows: GB/s = NCCL send/recv bus bandwidth)";
  f.order = 790;
  f.compute_bound = true;
  f.shape_syntax = "ring:r=2,b=1,h=16,kv=16,n=262144,d=128,causal[,naive] | ring:roof,r=4,mib=1024";
  f.grid = [] {
    std::vector<Shape> v;
    for (int r : {2, 4}) v.push_back(roof_shape(r, 1024));
    for (int n : {131072, 262144, 524288, 1048576}) {
      for (int r : {1, 2, 4}) v.push_back(ring_shape(r, 1, 16, 16, n, 128, true, true));
      if (n == 262144)
        for (int r : {2, 4}) v.push_back(ring_shape(r, 1, 16, 16, n, 128, true, false));
    }
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int r = int(spec.take("r", 2));
    if (spec.flag("roof")) return roof_shape(r, int(spec.take("mib", 1024)));
    const int h = int(spec.take("h", 16));
    return ring_shape(r, int(spec.take("b", 1)), h, int(spec.take("kv", h)), int(spec.take("n", 262144)),
                      int(spec.take("d", 128)), spec.flag("causal"), !spec.flag("naive"));
  };
  f.validation_key = [](const Shape& s) {
    std::ostringstream o;
    o << "r" << ranks_of(s);
    if (is_roof(s)) return "roof_" + o.str();
    o << (zigzag_of(s) ? "_zigzag" : "_naive") << "_g" << s.attn.heads_q / std::max(1, s.attn.heads_kv) << "_d"
      << s.attn.head_dim << "_c" << s.attn.causal;
    return o.str();
  };
  f.flops = ring_flops;
  f.bytes = ring_bytes;
  return f;
}

#ifdef BENCH_HAVE_12_ring_attention

// ---- the contract's split and schedule, written out (12_ring_attention.h) ---------------------
int64_t chunk_start(int c, int n, int ranks) { return int64_t(c) * n / (2 * ranks); }
int chunk_len(int c, int n, int ranks) { return int(chunk_start(c + 1, n, ranks) - chunk_start(c, n, ranks)); }
int owner_chunk(int rank, int half, int ranks, bool zigzag) {
  return zigzag ? (half == 0 ? rank : 2 * ranks - 1 - rank) : 2 * rank + half;
}
int source_rank(int rank, int step, int ranks) { return ((rank - step) % ranks + ranks) % ranks; }
enum class Pair { kSkip, kFull, kDiagonal };
Pair pair_kind(int q_chunk, int k_chunk, bool causal) {
  if (!causal || k_chunk < q_chunk) return Pair::kFull;
  return k_chunk == q_chunk ? Pair::kDiagonal : Pair::kSkip;
}
int64_t longest_chunk(int n, int ranks) { return (int64_t(n) + 2 * ranks - 1) / (2 * ranks); }

// The causal work of the busiest rank over the mean (visible query-key pairs of its two query
// chunks against all 2R key chunks): what the ring waits for.
double work_imbalance(const AttentionParams& p, int ranks, bool zigzag) {
  const int n = p.seq_q;
  double most = 0, total = 0;
  for (int r = 0; r < ranks; ++r) {
    double w = 0;
    for (int h = 0; h < 2; ++h) {
      const int qc = owner_chunk(r, h, ranks, zigzag);
      const double lq = chunk_len(qc, n, ranks);
      for (int kc = 0; kc < 2 * ranks; ++kc) {
        const Pair kind = pair_kind(qc, kc, p.causal);
        if (kind == Pair::kFull) w += lq * chunk_len(kc, n, ranks);
        if (kind == Pair::kDiagonal) w += lq * (lq + 1) / 2;
      }
    }
    most = std::max(most, w);
    total += w;
  }
  return total > 0 ? most * ranks / total : 1.0;
}

// ---- GPUs and rings ---------------------------------------------------------------------------
int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}

// "needs R GPUs" rows: outside what this machine can run (reported as unsupported, not failed).
void need_gpus(int ranks) {
  const int n = gpu_count();
  if (n < ranks) throw std::invalid_argument("needs " + std::to_string(ranks) + " GPUs, found " + std::to_string(n));
}

// The family switches GPUs; the runner's stream and L2 flusher live on the device it started on.
struct DeviceGuard {
  int device = 0;
  DeviceGuard() { CUDA_CHECK(cudaGetDevice(&device)); }
  ~DeviceGuard() { cudaSetDevice(device); }
};

// One RingComm per R for the whole run (creating the communicators takes a second or two). The
// timeout is long: a timed run of the grid lasts up to 10 s, and a run that outlives the timeout
// is aborted as a deadlock. Released at exit, before the CUDA runtime is torn down (the atexit
// hook is registered after the runtime's own).
constexpr double kRingTimeoutS = 120.0;
std::map<int, std::unique_ptr<RingComm>>& rings() {
  static auto* m = new std::map<int, std::unique_ptr<RingComm>>();
  return *m;
}
void release_rings() {
  for (auto& kv : rings()) kv.second.reset();
  rings().clear();
}
RingComm& ring_of(int ranks) {
  need_gpus(ranks);
  nvls_off();
  std::unique_ptr<RingComm>& slot = rings()[ranks];
  if (slot && slot->aborted()) slot.reset();  // an earlier timeout or NCCL error: start afresh
  if (!slot) {
    static bool hooked = false;
    slot = std::make_unique<RingComm>(ranks, kRingTimeoutS);
    if (!hooked) hooked = std::atexit(release_rings) == 0;
  }
  return *slot;
}

// Waits for the legacy-stream work (uploads, fills, poison) on every GPU of the ring: the ring's
// streams do not wait for it.
void sync_all(const RingComm& ring) {
  for (int r = 0; r < ring.size(); ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fixed(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// One rank's tensors on its GPU, freed with that GPU current.
struct RankMem {
  explicit RankMem(int dev) : device(dev) {}
  ~RankMem() { cudaSetDevice(device); }  // the members below are freed after this body
  int device;
  course::DeviceBuffer<uint16_t> q[2], k[2], v[2], o[2];
  course::DeviceBuffer<unsigned char> ws;
  // The compute alone and the communication alone (R > 1): one K/V block to send (also the
  // keys and values the compute alone reads), one to receive, the local kernel's partial output and
  // log-sum-exp, and the bytes the merge stand-ins copy.
  course::DeviceBuffer<uint16_t> kv_send, kv_recv, part_o;
  course::DeviceBuffer<float> part_l;
  course::DeviceBuffer<unsigned char> state;
};

using Ranks = std::vector<std::unique_ptr<RankMem>>;

RingBuffers<__half> buffers_of(const Ranks& mem) {
  RingBuffers<__half> b;
  for (const auto& m : mem) {
    RingRank<__half> rank;
    for (int h = 0; h < 2; ++h) {
      rank.q[h] = reinterpret_cast<const __half*>(m->q[h].data());
      rank.k[h] = reinterpret_cast<const __half*>(m->k[h].data());
      rank.v[h] = reinterpret_cast<const __half*>(m->v[h].data());
      rank.o[h] = reinterpret_cast<__half*>(m->o[h].data());
    }
    rank.workspace = m->ws.data();
    b.rank.push_back(rank);
  }
  return b;
}

// ---- the check ---------------------------------------------------------------------------------
// Rows [start, start + len) of every (b, h) of x [B, H, N, D].
std::vector<uint16_t> chunk_of(const std::vector<uint16_t>& x, int bh, int n, int d, int64_t start, int64_t len) {
  std::vector<uint16_t> out(size_t(bh * len * d));
  for (int i = 0; i < bh; ++i)
    std::copy_n(x.begin() + (int64_t(i) * n + start) * d, len * d, out.begin() + int64_t(i) * len * d);
  return out;
}

void check_ring(const Shape& s, Check& c) {
  const int R = ranks_of(s);
  const bool zigzag = zigzag_of(s);
  DeviceGuard guard;
  RingComm& ring = ring_of(R);
  AttentionParams p = s.attn;  // the shape's D, mask and head group; small B, H and N
  const int group = std::max(1, s.attn.heads_q / std::max(1, s.attn.heads_kv));
  p.batch = 1;
  p.heads_kv = 2;
  p.heads_q = 2 * group;
  p.seq_q = p.seq_k = kCheckN;
  const int N = p.seq_q, D = p.head_dim, bhq = p.batch * p.heads_q, bhk = p.batch * p.heads_kv;
  const std::string tag = "ring_attention_r" + std::to_string(R);
  const auto q = course::round_to_half(course::random_normal(size_t(p.q_elems()), seed_for(tag + "_q", zigzag)));
  const auto k = course::round_to_half(course::random_normal(size_t(p.kv_elems()), seed_for(tag + "_k", zigzag)));
  const auto v = course::round_to_half(course::random_normal(size_t(p.kv_elems()), seed_for(tag + "_v", zigzag)));
  const auto qb = course::to_half_bits(q), kb = course::to_half_bits(k), vb = course::to_half_bits(v);

  Ranks mem;
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    auto m = std::make_unique<RankMem>(ring.device(r));
    for (int h = 0; h < 2; ++h) {
      const int ch = owner_chunk(r, h, R, zigzag);
      const int64_t start = chunk_start(ch, N, R), len = chunk_len(ch, N, R);
      m->q[h] = course::DeviceBuffer<uint16_t>(chunk_of(qb, bhq, N, D, start, len));
      m->k[h] = course::DeviceBuffer<uint16_t>(chunk_of(kb, bhk, N, D, start, len));
      m->v[h] = course::DeviceBuffer<uint16_t>(chunk_of(vb, bhk, N, D, start, len));
      m->o[h] = course::DeviceBuffer<uint16_t>(size_t(bhq * len * D));
      m->o[h].poison();
    }
    m->ws = course::DeviceBuffer<unsigned char>(ring_attention_workspace_bytes(p, R));
    m->ws.poison();  // 0xFF bytes: NaN as fp16 and fp32, so a slot read before it was filled shows
    mem.push_back(std::move(m));
  }
  sync_all(ring);
  ring_attention(buffers_of(mem), p, ring, zigzag);
  ring.synchronize("ring_attention (check)");

  std::vector<float> got(size_t(p.o_elems()), 0.f);
  std::string damage;
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    for (int h = 0; h < 2; ++h) {
      const int ch = owner_chunk(r, h, R, zigzag);
      const int64_t start = chunk_start(ch, N, R), len = chunk_len(ch, N, R);
      const auto part = course::half_bits_to_float(mem[size_t(r)]->o[h].download());  // poison kept
      for (int i = 0; i < bhq; ++i)
        std::copy_n(part.begin() + int64_t(i) * len * D, len * D, got.begin() + (int64_t(i) * N + start) * D);
      const std::string g = mem[size_t(r)]->o[h].guard_damage();
      if (!g.empty())
        damage += (damage.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ", o[" + std::to_string(h) +
                  "]: " + g;
    }
  }
  mem.clear();
  std::ostringstream what;
  what << "fp16 R=" << R << (zigzag ? " zigzag" : " naive") << " b=1 hq=" << p.heads_q << " hkv=" << p.heads_kv
       << " n=" << N << " d=" << D << (p.causal ? " causal" : "");
  merge(c,
        course::compare(got, course::ref::attention(q, k, v, p),
                        course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", N}, {"d", D}}, course::Tolerance::fp16(),
                        damage),
        what.str());
}

// ---- NCCL's send/recv ring: the roof, and the communication alone --------------------------------
// `steps` groups back to back on the ranks' comm streams, each: every rank sends `bytes` from
// send[r] to rank r + 1 and receives `bytes` from rank r − 1 into recv[r].
void sendrecv_steps(RingComm& ring, const std::vector<void*>& send, const std::vector<void*>& recv, size_t bytes,
                    int steps) {
  const int R = ring.size();
  for (int s = 0; s < steps; ++s) {
    ring.check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < R; ++r) {
      ring.check(ncclSend(send[size_t(r)], bytes, ncclInt8, (r + 1) % R, ring.comm(r), ring.comm_stream(r)),
                 "ncclSend");
      ring.check(ncclRecv(recv[size_t(r)], bytes, ncclInt8, (r + R - 1) % R, ring.comm(r), ring.comm_stream(r)),
                 "ncclRecv");
    }
    ring.check(ncclGroupEnd(), "ncclGroupEnd");
    ring.wait_enqueued("send/recv step");
  }
}

void check_roof(const Shape& s, Check& c) {
  const int R = ranks_of(s);
  if (R < 2) throw std::invalid_argument("a ring of one GPU sends nothing: the NCCL roof needs R >= 2");
  DeviceGuard guard;
  RingComm& ring = ring_of(R);
  const size_t bytes = size_t(1) << 20;
  auto pattern = [](int r, size_t i) { return uint8_t((r * 37 + i * 13 + i / 251) & 0xFF); };
  std::vector<course::DeviceBuffer<uint8_t>> send, recv;
  std::vector<void*> sp, rp;
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    std::vector<uint8_t> host(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = pattern(r, i);
    send.emplace_back(host);
    recv.emplace_back(bytes);
    sp.push_back(send.back().data());
    rp.push_back(recv.back().data());
  }
  sync_all(ring);
  sendrecv_steps(ring, sp, rp, bytes, 1);
  ring.synchronize("send/recv (check)");
  for (int r = 0; r < R && c.status == Check::kOk; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    const auto got = recv[size_t(r)].download();
    const int from = (r + R - 1) % R;
    for (size_t i = 0; i < bytes; ++i) {
      if (got[i] != pattern(from, i)) {
        c.status = Check::kFail;
        c.detail = "rank " + std::to_string(r) + " did not receive rank " + std::to_string(from) +
                   "'s bytes (first at " + std::to_string(i) + ")";
        break;
      }
    }
  }
  for (int r = 0; r < R; ++r) {  // free each buffer with its GPU current
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    send[size_t(r)] = course::DeviceBuffer<uint8_t>();
    recv[size_t(r)] = course::DeviceBuffer<uint8_t>();
  }
}

Measurement time_roof(const Shape& s, const TimingConfig& cfg) {
  const int R = ranks_of(s);
  need_gpus(R);
  DeviceGuard guard;
  RingComm& ring = ring_of(R);
  const size_t bytes = size_t(s.n);
  constexpr int kSteps = 5;  // groups per timed run: the host's polling is small next to 5 transfers
  std::vector<course::DeviceBuffer<uint8_t>> send, recv;
  std::vector<void*> sp, rp;
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    send.emplace_back(bytes);
    recv.emplace_back(bytes);
    CUDA_CHECK(cudaMemset(send.back().data(), 0x3c, bytes));
    sp.push_back(send.back().data());
    rp.push_back(recv.back().data());
  }
  sync_all(ring);
  std::vector<double> ms;
  for (int i = 0; i < cfg.warmup + cfg.reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    sendrecv_steps(ring, sp, rp, bytes, kSteps);
    ring.synchronize("send/recv (roof)");
    if (i >= cfg.warmup) ms.push_back(1e3 * seconds_since(t0) / kSteps);
  }
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    send[size_t(r)] = course::DeviceBuffer<uint8_t>();
    recv[size_t(r)] = course::DeviceBuffer<uint8_t>();
  }
  Measurement m;
  m.reps = int(ms.size());
  m.median_ms = median_of(ms);
  m.min_ms = *std::min_element(ms.begin(), ms.end());
  m.note = "NCCL send/recv ring over " + std::to_string(R) + " GPUs: each rank sends " + std::to_string(bytes >> 20) +
           " MiB to rank r + 1 while receiving as much from rank r − 1; GB/s = bus " +
           "bandwidth per rank and direction (median of " + std::to_string(m.reps) + " × " + std::to_string(kSteps) +
           " groups)";
  return m;
}

// ---- timing the ring ---------------------------------------------------------------------------
// The R = 1 times of this run, by everything but R and the split (the speed-ups' denominators),
// and the last one-GPU rate, for predicting how long a row would take.
std::map<std::string, double>& one_gpu_ms() {
  static std::map<std::string, double> m;
  return m;
}
double& one_gpu_rate() {  // FLOP/s of the ring of one GPU, 0 until measured
  static double rate = 0;
  return rate;
}
std::string problem_key(const AttentionParams& p) {
  std::ostringstream o;
  o << p.batch << "/" << p.heads_q << "/" << p.heads_kv << "/" << p.seq_q << "/" << p.head_dim << "/" << p.causal;
  return o.str();
}

// Inputs of the timed runs on R GPUs: hashed uniform fp16 values, filled on each GPU.
Ranks timing_buffers(RingComm& ring, const AttentionParams& p, bool zigzag, bool alone) {
  const int R = ring.size(), N = p.seq_q, D = p.head_dim;
  const int64_t bhq = int64_t(p.batch) * p.heads_q, bhk = int64_t(p.batch) * p.heads_kv;
  const int64_t lmax = longest_chunk(N, R);
  auto filled16 = [](int64_t n, uint64_t seed) {
    course::DeviceBuffer<uint16_t> b(size_t(std::max<int64_t>(n, 1)));
    fill_uniform_half(b.data(), n, seed, -1.f, 1.f, 0);
    return b;
  };
  Ranks mem;
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    auto m = std::make_unique<RankMem>(ring.device(r));
    for (int h = 0; h < 2; ++h) {
      const int64_t len = chunk_len(owner_chunk(r, h, R, zigzag), N, R);
      m->q[h] = filled16(bhq * len * D, 10 * r + h + 1);
      m->k[h] = filled16(bhk * len * D, 10 * r + h + 3);
      m->v[h] = filled16(bhk * len * D, 10 * r + h + 5);
      m->o[h] = course::DeviceBuffer<uint16_t>(size_t(bhq * len * D));
    }
    m->ws = course::DeviceBuffer<unsigned char>(ring_attention_workspace_bytes(p, R));
    if (alone) {
      m->kv_send = filled16(4 * bhk * lmax * D, 10 * r + 7);
      m->kv_recv = course::DeviceBuffer<uint16_t>(size_t(4 * bhk * lmax * D));
      m->part_o = course::DeviceBuffer<uint16_t>(size_t(bhq * lmax * D));
      m->part_l = course::DeviceBuffer<float>(size_t(bhq * lmax));
      m->state = course::DeviceBuffer<unsigned char>(size_t(10 * bhq * lmax * D));
    }
    mem.push_back(std::move(m));
  }
  sync_all(ring);
  return mem;
}

// Device bytes of one GPU for a timed row (the runner compares them with GPU 0's free memory).
double ring_device_bytes(const Shape& s) {
  const int R = ranks_of(s);
  if (is_roof(s)) return 2.0 * double(s.n);
  const auto& p = s.attn;
  const double lmax = double(longest_chunk(p.seq_q, R));
  const double hq = double(p.batch) * p.heads_q * p.head_dim, hk = double(p.batch) * p.heads_kv * p.head_dim;
  double b = 2.0 * 2.0 * lmax * (2 * hq + 2 * hk) + double(ring_attention_workspace_bytes(p, R));
  if (R > 1) b += 2.0 * 2.0 * 4 * hk * lmax + 2.0 * hq * lmax + 4.0 * lmax * p.batch * p.heads_q + 10.0 * hq * lmax;
  return b;
}

// The compute alone (see the header comment): rank r's exercise-05 launches of the contract's
// schedule, with copies of the merges' bytes, on every GPU at once, no transfer.
void enqueue_compute_alone(RingComm& ring, const Ranks& mem, const AttentionParams& p, bool zigzag) {
  const int R = ring.size(), N = p.seq_q, D = p.head_dim;
  const int64_t bhq = int64_t(p.batch) * p.heads_q, bhk = int64_t(p.batch) * p.heads_kv;
  const int64_t lmax = longest_chunk(N, R);
  for (int r = 0; r < R; ++r) {
    CUDA_CHECK(cudaSetDevice(ring.device(r)));
    const cudaStream_t st = ring.compute_stream(r);
    RankMem& m = *mem[size_t(r)];
    unsigned char* state = m.state.data();
    const size_t half_state = size_t(5 * bhq * lmax * D);  // copies go from the first half to the second
    CUDA_CHECK(cudaMemsetAsync(state, 0, size_t(8 * bhq * lmax * D), st));  // running O of both chunks, fp32
    const __half* kv = reinterpret_cast<const __half*>(m.kv_send.data());
    for (int s = 0; s < R; ++s) {
      const int src = source_rank(r, s, R);
      for (int qh = 0; qh < 2; ++qh) {
        for (int kh = 0; kh < 2; ++kh) {
          const int qc = owner_chunk(r, qh, R, zigzag), kc = owner_chunk(src, kh, R, zigzag);
          const Pair kind = pair_kind(qc, kc, p.causal);
          if (kind == Pair::kSkip) continue;
          AttentionParams local = p;
          local.seq_q = chunk_len(qc, N, R);
          local.seq_k = chunk_len(kc, N, R);
          local.causal = kind == Pair::kDiagonal;
          ring_local_attention(reinterpret_cast<const __half*>(m.q[qh].data()), kv + kh * bhk * lmax * D,
                               kv + (2 + kh) * bhk * lmax * D, reinterpret_cast<__half*>(m.part_o.data()),
                               m.part_l.data(), local, st);
          // The merge: running O read and written in fp32 (8 bytes), partial O read (2 bytes).
          CUDA_CHECK(cudaMemcpyAsync(state + half_state, state, size_t(5 * bhq * local.seq_q * D),
                                     cudaMemcpyDeviceToDevice, st));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {  // the output: fp32 read (4 bytes), fp16 written (2 bytes)
      const int64_t len = chunk_len(owner_chunk(r, h, R, zigzag), N, R);
      CUDA_CHECK(cudaMemcpyAsync(state + half_state, state, size_t(3 * bhq * len * D), cudaMemcpyDeviceToDevice, st));
    }
  }
}

// One-GPU rate for the predictions when no R = 1 row has run yet: the ring of one GPU at
// N = 65536 (about 60 ms on an H100), same heads, D and mask.
double probe_rate(const AttentionParams& like) {
  AttentionParams p = like;
  p.seq_q = p.seq_k = std::min(like.seq_q, 65536);
  RingComm& ring = ring_of(1);
  Ranks mem = timing_buffers(ring, p, true, false);
  const RingBuffers<__half> b = buffers_of(mem);
  double sec = 0;
  for (int i = 0; i < 2; ++i) {  // the second run: the first one loads the kernels
    const auto t0 = std::chrono::steady_clock::now();
    ring_attention(b, p, ring, true);
    ring.synchronize("ring_attention (rate probe)");
    sec = seconds_since(t0);
  }
  mem.clear();
  Shape s;
  s.attn = p;
  s.extra = {{"ranks", 1}, {"zigzag", 1}, {"roof", 0}};
  return ring_flops(s) / sec;
}

Measurement time_ring(const Shape& s, const TimingConfig& cfg) {
  const int R = ranks_of(s);
  const bool zigzag = zigzag_of(s);
  const AttentionParams& p = s.attn;
  need_gpus(R);
  DeviceGuard guard;
  Measurement m;
  const double imbalance = work_imbalance(p, R, zigzag);
  m.csv["imbalance"] = fixed(imbalance, 3);

  // Predicted seconds per run: the one-GPU rate on the busiest rank's share of the work.
  if (one_gpu_rate() <= 0) one_gpu_rate() = probe_rate(p);
  const double predicted = ring_flops(s) * imbalance / R / one_gpu_rate();
  if (predicted > kMaxRunSeconds) {
    m.reps = 0;  // not timed
    m.note = "skipped: about " + fixed(predicted, 0) + " s per run predicted (> " + fixed(kMaxRunSeconds, 0) +
             " s; one GPU's rate in this run: " + fixed(one_gpu_rate() / 1e12, 0) + " TFLOP/s)" +
             (R == 1 ? "; the rows of R > 1 at this N have no speed-up" : "");
    return m;
  }

  RingComm& ring = ring_of(R);
  const bool alone = R > 1;
  Ranks mem = timing_buffers(ring, p, zigzag, alone);
  const RingBuffers<__half> b = buffers_of(mem);
  auto run_ring = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    ring_attention(b, p, ring, zigzag);
    ring.synchronize("ring_attention");
    return 1e3 * seconds_since(t0);
  };
  auto run_compute = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    enqueue_compute_alone(ring, mem, p, zigzag);
    ring.synchronize("compute alone");
    return 1e3 * seconds_since(t0);
  };
  std::vector<void*> sp, rp;
  for (const auto& x : mem) {
    sp.push_back(x->kv_send.data());
    rp.push_back(x->kv_recv.data());
  }
  const size_t block_bytes = size_t(2 * 4 * int64_t(p.batch) * p.heads_kv * longest_chunk(p.seq_q, R) * p.head_dim);
  auto run_comm = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    sendrecv_steps(ring, sp, rp, block_bytes, R - 1);
    ring.synchronize("communication alone");
    return 1e3 * seconds_since(t0);
  };

  // Warm-up (untimed), then as many runs as fit half the budget: at least 3 (or --reps), at most --reps.
  const double warm_ms = run_ring();
  const double per_rep_s = 1e-3 * warm_ms * (alone ? 2 : 1);
  const int fewest = std::min(3, cfg.reps);
  const int reps = std::clamp(int(0.5 * cfg.budget_s / std::max(per_rep_s, 1e-6)), fewest, cfg.reps);
  std::vector<double> ring_ms, compute_ms, comm_ms;
  for (int i = 0; i < reps; ++i) {
    ring_ms.push_back(run_ring());
    if (alone) compute_ms.push_back(run_compute());  // interleaved: the same clocks and temperature
  }
  if (alone) {
    run_comm();  // warm-up
    for (int i = 0; i < cfg.reps; ++i) comm_ms.push_back(run_comm());
  }
  mem.clear();

  m.reps = reps;
  m.median_ms = median_of(ring_ms);
  m.min_ms = *std::min_element(ring_ms.begin(), ring_ms.end());
  const double spread = *std::max_element(ring_ms.begin(), ring_ms.end()) - m.min_ms;
  const double tflops = ring_flops(s) / (1e-3 * m.median_ms) / 1e12;
  m.csv["tflops_per_gpu"] = fixed(tflops / R, 1);
  const std::string key = problem_key(p);
  std::ostringstream note;
  if (R == 1) {
    one_gpu_ms()[key] = m.median_ms;
    one_gpu_rate() = ring_flops(s) / (1e-3 * m.median_ms);
    m.csv["speedup"] = "1";
    m.csv["pct_ideal"] = "100";
    note << "R = 1: the speed-ups' reference (no transfers)";
  } else {
    const auto it = one_gpu_ms().find(key);
    if (it != one_gpu_ms().end()) {
      const double speedup = it->second / m.median_ms;
      m.csv["speedup"] = fixed(speedup, 3);
      m.csv["pct_ideal"] = fixed(100.0 * speedup / R, 1);
      note << "speed-up " << fixed(speedup, 2) << "× over R = 1 (" << fixed(100.0 * speedup / R, 1) << " % of ideal)";
    } else {
      note << "no R = 1 row at this N in this run: " << fixed(tflops / R, 0) << " TFLOP/s per GPU";
    }
    const double comp = median_of(compute_ms), comm = median_of(comm_ms);
    const double exposed = std::max(0.0, m.median_ms - comp);
    const double hidden = comm > 0 ? std::clamp(1.0 - exposed / comm, 0.0, 1.0) : 0.0;
    m.csv["compute_ms"] = fixed(comp, 3);
    m.csv["comm_ms"] = fixed(comm, 3);
    m.csv["exposed_ms"] = fixed(exposed, 3);
    m.csv["hidden_pct"] = fixed(100.0 * hidden, 1);
    note << "; compute alone " << fixed(comp, 1) << " ms, comm alone " << fixed(comm, 1) << " ms ("
         << fixed(double(block_bytes) * (R - 1) / (1e-3 * comm) / 1e9, 0) << " GB/s per rank), exposed "
         << fixed(exposed, 1) << " ms: " << fixed(100.0 * hidden, 0)
         << " % of the comm hidden (1 − exposed / comm alone, exposed = ring − compute alone)";
    if (spread > 0.5 * comm) note << " — within noise: the ring's runs spread over " << fixed(spread, 1) << " ms";
  }
  note << "; work imbalance " << fixed(imbalance, 2) << " (busiest rank / mean)";
  note << "; local kernel " << ring_local_kernel(ring.device(0));  // and any rank whose GPU differs
  for (int r = 1; r < R; ++r)
    if (std::string(ring_local_kernel(ring.device(r))) != ring_local_kernel(ring.device(0)))
      note << " (rank " << r << ": " << ring_local_kernel(ring.device(r)) << ")";
  m.note = note.str();
  return m;
}

Kernel ring_kernel() {
  Kernel k;
  k.exercise = "12_ring_attention";
  k.launcher = "ring_attention";
  k.family = kFamily;
  k.order = 10;
  k.tags = {"ring"};
  k.validate = [](const Shape& s, Check& c, cudaStream_t) {
    if (is_roof(s)) throw std::invalid_argument("12_ring_attention runs on the attention shapes, not on a roof");
    need_gpus(ranks_of(s));
    check_ring(s, c);
  };
  k.device_bytes = ring_device_bytes;
  k.time = [](const Shape& s, cudaStream_t, const TimingConfig& cfg, L2Flusher&) { return time_ring(s, cfg); };
  return k;
}

[[maybe_unused]] Kernel roof_kernel() {  // registered in `bench` only (BENCH_WITH_BASELINE)
  Kernel k;
  k.exercise = "roof_nccl";
  k.launcher = "ncclSend/ncclRecv";
  k.family = kFamily;
  k.order = 0;
  k.tags = {"roof"};
  k.baseline = true;  // not an exercise
  k.validate = [](const Shape& s, Check& c, cudaStream_t) {
    if (!is_roof(s)) throw std::invalid_argument("roof_nccl runs on the roof shapes (ring:roof,r=R)");
    need_gpus(ranks_of(s));
    check_roof(s, c);
  };
  k.device_bytes = ring_device_bytes;
  k.time = [](const Shape& s, cudaStream_t, const TimingConfig& cfg, L2Flusher&) { return time_roof(s, cfg); };
  return k;
}

#endif  // BENCH_HAVE_12_ring_attention

bool register_all() {
  nvls_off();  // before any NCCL call in this process
  add_family(make_family());
#ifdef BENCH_HAVE_12_ring_attention
#ifdef BENCH_WITH_BASELINE  // the roof only in `bench`: a learner's binary times the exercise alone
  add_kernel(roof_kernel());
#endif
  add_kernel(ring_kernel());
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
