// Tests for day11-serving/03_fused_add_rmsnorm: the fused residual add + RMSNorm and RMSNorm
// alone, fp16 and bf16, against the CPU reference (common/reference_rmsnorm.h, double precision,
// on the 16-bit inputs).
//
// The verdict is exact up to one thing: the inverse RMS. The reference knows it in double; a
// kernel computes it in fp32 (a different summation order, rsqrtf), which moves r_j · inv by a
// few 1e-7 relative and can flip a rounding. So every output must equal rd(rd(n_j) · w_j) for
// some n_j within kInvSlack (1e-4) relative of the exact r_j · inv: at most two values per
// element, and compare() is run against the one the kernel produced (or the nearer-rounded one
// when it produced neither) with a zero tolerance. Anything that moves inv by more than 1e-4 (a
// 16-bit sum of squares, the mean over the wrong count, eps outside the square root) or rounds
// elsewhere than Hugging Face does (once instead of twice, r before its rounding) fails. The
// new residual rd(residual + x) has no such freedom and is compared exactly.
//
// The [index] case checks rmsnorm_partition on the CPU alone (no CUDA call):
// `build/bin/sol_03_fused_add_rmsnorm "[index]"` runs it without a GPU.
//
// The GPU cases: a grid of tokens (1, 3, 67, 1000, 4096) x hidden (8 ... 16384) x fp16/bf16,
// outputs NaN-poisoned, every buffer between guard regions; values near ±300 in fp16 (a 16-bit
// sum of squares overflows: 300² > 65504) and near 1e-3 (eps dominates the mean of squares); two
// layers in a row on one residual; x == residual; RMSNorm alone; a non-default stream;
// tokens = 0; bad arguments.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "03_fused_add_rmsnorm.h"
#include "gpu_test.h"
#include "half_types.h"
#include "reference_rmsnorm.h"

namespace {

using course::as_t;
using course::DeviceBuffer;
using Fp16 = course::Fp16Type;
using Bf16 = course::Bf16Type;

constexpr float kEps = 1e-5f;       // Llama's rms_norm_eps
constexpr double kInvSlack = 1e-4;  // relative freedom of the kernel's inverse RMS (see above)

// Exact agreement: compare() then reports NaN, "never written", guard damage and the first
// elements that differ, by (t, j).
const course::Tolerance kExact = {0.0, 0.0, 0.0, "exact (each output one of the values the rounding allows)"};

course::Dims dims_of(int tokens, int hidden) { return course::Dims{{"t", tokens}, {"j", hidden}}; }

// For each element of out: the value compare() should see (the reference's rmsnorm_allowed: got
// itself where it is one of the at most two values the rounding of r · inv allows).
template <class Ty>
std::vector<float> allowed_out(const std::vector<float>& got, const std::vector<float>& r, const std::vector<float>& w,
                               int tokens, int hidden, float eps) {
  return course::ref::rmsnorm_allowed(got, r, w, tokens, hidden, eps, &Ty::round1, kInvSlack);
}

struct Inputs {
  std::vector<float> x, residual, weight;  // already rounded to the type
};

// x and residual: normal(0, scale); weight: normal(1, 0.5) (some small, some negative).
template <class Ty>
Inputs make_inputs(int tokens, int hidden, uint64_t seed, float scale = 1.f) {
  const size_t n = size_t(tokens) * hidden;
  Inputs in;
  in.x = Ty::round(course::random_normal(n, seed, 0.f, scale));
  in.residual = Ty::round(course::random_normal(n, seed + 1, 0.f, scale));
  in.weight = Ty::round(course::random_normal(size_t(hidden), seed + 2, 1.f, 0.5f));
  return in;
}

std::string describe(const char* what, const char* type, int tokens, int hidden) {
  std::ostringstream o;
  o << what << " (" << type << ", tokens=" << tokens << ", hidden=" << hidden << ")";
  return o.str();
}

void report(const course::CompareResult& r, const std::string& what) {
  if (!r.ok)
    FAIL_CHECK(what << ": " << r.report);
  else
    SUCCEED(what << " matches the reference");
}

// One fused call on fresh buffers; checks out and the new residual.
template <class Ty>
void check_fused(int tokens, int hidden, const Inputs& in, float eps = kEps, cudaStream_t stream = 0) {
  DeviceBuffer<uint16_t> d_x(Ty::bits(in.x)), d_res(Ty::bits(in.residual)), d_w(Ty::bits(in.weight));
  DeviceBuffer<uint16_t> d_out(in.x.size());
  d_out.poison();
  fused_add_rmsnorm(as_t<Ty>(d_x), as_t<Ty>(d_res), as_t<Ty>(d_w), as_t<Ty>(d_out), tokens, hidden, eps, stream);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto r = course::ref::residual_add(in.residual, in.x, &Ty::round1);
  const auto got_res = Ty::decode(d_res.download());
  report(course::compare(got_res, r, dims_of(tokens, hidden), kExact, d_res.guard_damage()),
         describe("residual (must hold rd(residual + x) afterwards)", Ty::name, tokens, hidden));
  const auto got = Ty::decode(d_out.download());
  report(course::compare(got, allowed_out<Ty>(got, r, in.weight, tokens, hidden, eps), dims_of(tokens, hidden), kExact,
                         d_out.guard_damage()),
         describe("out", Ty::name, tokens, hidden));
  const std::string x_guards = d_x.guard_damage();
  if (!x_guards.empty()) FAIL_CHECK("x's guard regions were written: " << x_guards);
}

// One rmsnorm call; checks out and that the input is untouched.
template <class Ty>
void check_rmsnorm(int tokens, int hidden, const Inputs& in, float eps = kEps) {
  DeviceBuffer<uint16_t> d_in(Ty::bits(in.x)), d_w(Ty::bits(in.weight));
  DeviceBuffer<uint16_t> d_out(in.x.size());
  d_out.poison();
  rmsnorm(as_t<Ty>(d_in), as_t<Ty>(d_w), as_t<Ty>(d_out), tokens, hidden, eps);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = Ty::decode(d_out.download());
  report(course::compare(got, allowed_out<Ty>(got, in.x, in.weight, tokens, hidden, eps), dims_of(tokens, hidden),
                         kExact, d_out.guard_damage()),
         describe("rmsnorm out", Ty::name, tokens, hidden));
  report(course::compare(Ty::decode(d_in.download()), in.x, dims_of(tokens, hidden), kExact, d_in.guard_damage()),
         describe("rmsnorm's input (must be left as it was)", Ty::name, tokens, hidden));
}

struct GridShape {
  int tokens, hidden;
};

// tokens: 1 and 3 (decode of one or a few sequences), 67 (odd), 1000, 4096 (prefill); hidden:
// 8 (one vector, a row in one thread), 72 (9 vectors: most of a warp idle), 576 (SmolLM2: 72
// vectors over 3 warps, the last one a quarter busy), 2048, 4096 (Llama: one vector per thread), 8192 (the
// last one-vector partition, 1024 threads), 8200 (the first two-vector one: 544 threads, the
// last thread's second vector past the row's end), 16384 (two vectors per thread, 1024 threads).
// tokens · hidden stays below ~4.2 million so the CPU reference stays fast.
const std::vector<GridShape> kGrid = {{1, 8},       {1, 72},      {1, 576},   {1, 4096},   {1, 8192},   {1, 16384},
                                      {3, 8},       {3, 576},     {3, 2048},  {3, 8200},   {3, 16384},  {67, 72},
                                      {67, 576},    {67, 4096},   {67, 8192}, {67, 16384}, {1000, 8},   {1000, 576},
                                      {1000, 2048}, {1000, 4096}, {4096, 8},  {4096, 72},  {4096, 576}, {256, 16384}};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The partition of a row, on the CPU.

TEST_CASE("rmsnorm_partition: whole warps, at most 1024 threads and 2 vectors each, covering the row, minimal",
          "[index][quick]") {
  struct Example {
    int hidden, threads, vectors_per_thread;
  };
  // The lesson's table: SmolLM2 (576), Llama 3 8B (4096), the limits.
  for (const Example& ex :
       {Example{8, 32, 1}, Example{72, 32, 1}, Example{576, 96, 1}, Example{2048, 256, 1}, Example{4096, 512, 1},
        Example{8192, 1024, 1}, Example{8200, 544, 2}, Example{16384, 1024, 2}}) {
    const RmsnormPartition p = rmsnorm_partition(ex.hidden);
    INFO("hidden " << ex.hidden);
    CHECK(p.threads == ex.threads);
    CHECK(p.vectors_per_thread == ex.vectors_per_thread);
  }
  long long failures = 0;
  for (int hidden = 8; hidden <= 16384; hidden += 8) {
    const RmsnormPartition p = rmsnorm_partition(hidden);
    const int vectors = hidden / 8;
    std::ostringstream why;
    if (p.threads < 32 || p.threads > 1024 || p.threads % 32 != 0)
      why << "threads must be a multiple of 32 in [32, 1024]";
    else if (p.vectors_per_thread < 1 || p.vectors_per_thread > 2)
      why << "vectors_per_thread must be 1 or 2";
    else if (int64_t(p.threads) * p.vectors_per_thread < vectors)
      why << "threads · vectors_per_thread = " << p.threads * p.vectors_per_thread << " < " << vectors
          << " vectors: part of the row is never read";
    else if (p.vectors_per_thread == 2 && vectors <= 1024)
      why << "one vector per thread covers " << vectors << " vectors with 1024 threads";
    else if ((p.threads - 32) * p.vectors_per_thread >= vectors)
      why << "one warp fewer would still cover the row";
    if (!why.str().empty() && ++failures <= 5)
      FAIL_CHECK("hidden " << hidden << ": got {threads " << p.threads << ", vectors_per_thread "
                           << p.vectors_per_thread << "}: " << why.str());
  }
  CHECK(failures == 0);
}

// ---------------------------------------------------------------------------------------------
// The fused operation on the GPU.

TEST_CASE("fused_add_rmsnorm: small shapes, fp16 and bf16", "[day11][fused_add_rmsnorm][quick]") {
  int idx = 0;
  for (GridShape s : {GridShape{1, 8}, GridShape{1, 576}, GridShape{3, 72}, GridShape{5, 4096}, GridShape{2, 8200}}) {
    const uint64_t seed = course::case_seed("fused_add_rmsnorm quick", idx++);
    check_fused<Fp16>(s.tokens, s.hidden, make_inputs<Fp16>(s.tokens, s.hidden, seed));
    check_fused<Bf16>(s.tokens, s.hidden, make_inputs<Bf16>(s.tokens, s.hidden, seed));
  }
}

TEST_CASE("fused_add_rmsnorm: tokens 1 .. 4096 x hidden 8 .. 16384, fp16 and bf16", "[day11][fused_add_rmsnorm]") {
  int idx = 0;
  for (GridShape s : kGrid) {
    const uint64_t seed = course::case_seed("fused_add_rmsnorm grid", idx++);
    check_fused<Fp16>(s.tokens, s.hidden, make_inputs<Fp16>(s.tokens, s.hidden, seed));
    check_fused<Bf16>(s.tokens, s.hidden, make_inputs<Bf16>(s.tokens, s.hidden, seed));
  }
}

TEST_CASE("fused_add_rmsnorm: values near ±300 in fp16, whose sum of squares overflows 16 bits",
          "[day11][fused_add_rmsnorm][quick]") {
  // r ~ normal(0, 283): sum of r² over 8 elements is ~6e5, over 4096 ~3.3e8; fp16 ends at 65504.
  int idx = 0;
  for (GridShape s : {GridShape{1, 8}, GridShape{3, 576}, GridShape{2, 4096}, GridShape{1, 16384}}) {
    const uint64_t seed = course::case_seed("fused_add_rmsnorm magnitude", idx++);
    check_fused<Fp16>(s.tokens, s.hidden, make_inputs<Fp16>(s.tokens, s.hidden, seed, 200.f));
    check_fused<Bf16>(s.tokens, s.hidden, make_inputs<Bf16>(s.tokens, s.hidden, seed, 200.f));
  }
}

TEST_CASE("fused_add_rmsnorm: values near 1e-3, where eps dominates the mean of squares",
          "[day11][fused_add_rmsnorm][quick]") {
  // r² ~ 2e-6, below eps = 1e-5: the output depends on eps inside the square root (a kernel that
  // adds it to the RMS instead, or to the sum rather than the mean, is off by tens of percents).
  int idx = 0;
  for (GridShape s : {GridShape{2, 576}, GridShape{3, 4096}}) {
    const uint64_t seed = course::case_seed("fused_add_rmsnorm tiny", idx++);
    check_fused<Fp16>(s.tokens, s.hidden, make_inputs<Fp16>(s.tokens, s.hidden, seed, 1e-3f));
    check_fused<Bf16>(s.tokens, s.hidden, make_inputs<Bf16>(s.tokens, s.hidden, seed, 1e-3f));
  }
}

TEST_CASE("fused_add_rmsnorm: two layers on one residual stream (the residual is updated in place)",
          "[day11][fused_add_rmsnorm][quick]") {
  const int tokens = 67, hidden = 576;
  const uint64_t seed = course::case_seed("fused_add_rmsnorm two layers", 0);
  const Inputs a = make_inputs<Fp16>(tokens, hidden, seed), b = make_inputs<Fp16>(tokens, hidden, seed + 10);
  DeviceBuffer<uint16_t> d_res(Fp16::bits(a.residual)), d_xa(Fp16::bits(a.x)), d_xb(Fp16::bits(b.x));
  DeviceBuffer<uint16_t> d_wa(Fp16::bits(a.weight)), d_wb(Fp16::bits(b.weight));
  DeviceBuffer<uint16_t> d_outa(a.x.size()), d_outb(a.x.size());
  d_outa.poison();
  d_outb.poison();
  fused_add_rmsnorm(as_t<Fp16>(d_xa), as_t<Fp16>(d_res), as_t<Fp16>(d_wa), as_t<Fp16>(d_outa), tokens, hidden, kEps);
  fused_add_rmsnorm(as_t<Fp16>(d_xb), as_t<Fp16>(d_res), as_t<Fp16>(d_wb), as_t<Fp16>(d_outb), tokens, hidden, kEps);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto r1 = course::ref::residual_add(a.residual, a.x, &Fp16::round1);
  const auto r2 = course::ref::residual_add(r1, b.x, &Fp16::round1);
  report(course::compare(Fp16::decode(d_res.download()), r2, dims_of(tokens, hidden), kExact, d_res.guard_damage()),
         "residual after two layers (rd(rd(residual + x_a) + x_b))");
  const auto got_a = Fp16::decode(d_outa.download()), got_b = Fp16::decode(d_outb.download());
  report(course::compare(got_a, allowed_out<Fp16>(got_a, r1, a.weight, tokens, hidden, kEps), dims_of(tokens, hidden),
                         kExact, d_outa.guard_damage()),
         "out of layer a");
  report(course::compare(got_b, allowed_out<Fp16>(got_b, r2, b.weight, tokens, hidden, kEps), dims_of(tokens, hidden),
                         kExact, d_outb.guard_damage()),
         "out of layer b");
}

TEST_CASE("fused_add_rmsnorm: x == residual (r = rd(2 · residual)) and other eps",
          "[day11][fused_add_rmsnorm][quick]") {
  const int tokens = 3, hidden = 4096;
  const Inputs in = make_inputs<Bf16>(tokens, hidden, course::case_seed("fused_add_rmsnorm aliased", 0));
  DeviceBuffer<uint16_t> d_res(Bf16::bits(in.residual)), d_w(Bf16::bits(in.weight)), d_out(in.x.size());
  d_out.poison();
  fused_add_rmsnorm(as_t<Bf16>(d_res), as_t<Bf16>(d_res), as_t<Bf16>(d_w), as_t<Bf16>(d_out), tokens, hidden, 1e-6f);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto r = course::ref::residual_add(in.residual, in.residual, &Bf16::round1);
  report(course::compare(Bf16::decode(d_res.download()), r, dims_of(tokens, hidden), kExact, d_res.guard_damage()),
         "residual with x == residual");
  const auto got = Bf16::decode(d_out.download());
  report(course::compare(got, allowed_out<Bf16>(got, r, in.weight, tokens, hidden, 1e-6f), dims_of(tokens, hidden),
                         kExact, d_out.guard_damage()),
         "out with x == residual");
  // A large eps (0.5 against a mean of squares near 2): a kernel that adds eps elsewhere is off.
  check_fused<Fp16>(tokens, hidden, make_inputs<Fp16>(tokens, hidden, course::case_seed("fused eps", 1)), 0.5f);
}

TEST_CASE("fused_add_rmsnorm: on a non-default stream", "[day11][fused_add_rmsnorm][quick]") {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check_fused<Fp16>(67, 2048, make_inputs<Fp16>(67, 2048, course::case_seed("fused stream", 0)), kEps, stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("rmsnorm: RMSNorm alone, tokens 1 .. 4096, fp16 and bf16", "[day11][fused_add_rmsnorm][quick]") {
  int idx = 0;
  for (GridShape s : {GridShape{1, 8}, GridShape{1, 576}, GridShape{3, 16384}, GridShape{67, 4096}, GridShape{4096, 72},
                      GridShape{1000, 2048}}) {
    const uint64_t seed = course::case_seed("rmsnorm", idx++);
    check_rmsnorm<Fp16>(s.tokens, s.hidden, make_inputs<Fp16>(s.tokens, s.hidden, seed));
    check_rmsnorm<Bf16>(s.tokens, s.hidden, make_inputs<Bf16>(s.tokens, s.hidden, seed));
  }
  // The magnitude case on the final norm's path too.
  check_rmsnorm<Fp16>(2, 4096, make_inputs<Fp16>(2, 4096, course::case_seed("rmsnorm", 100), 300.f));
}

TEST_CASE("fused_add_rmsnorm and rmsnorm: tokens = 0 launches nothing", "[day11][fused_add_rmsnorm][quick]") {
  const int hidden = 576;
  const Inputs in = make_inputs<Fp16>(1, hidden, course::case_seed("tokens 0", 0));
  DeviceBuffer<uint16_t> d_x(Fp16::bits(in.x)), d_res(Fp16::bits(in.residual)), d_w(Fp16::bits(in.weight));
  DeviceBuffer<uint16_t> d_out(in.x.size());
  d_out.poison();
  fused_add_rmsnorm(as_t<Fp16>(d_x), as_t<Fp16>(d_res), as_t<Fp16>(d_w), as_t<Fp16>(d_out), 0, hidden, kEps);
  rmsnorm(as_t<Fp16>(d_x), as_t<Fp16>(d_w), as_t<Fp16>(d_out), 0, hidden, kEps);
  CUDA_CHECK(cudaDeviceSynchronize());
  report(course::compare(Fp16::decode(d_res.download()), in.residual, dims_of(1, hidden), kExact, d_res.guard_damage()),
         "residual after a call with tokens = 0 (must be unchanged)");
  const auto out = d_out.download();
  long long written = 0;
  for (uint16_t b : out) written += b != course::kPoisonF16Bits;
  CHECK(written == 0);
  if (written) FAIL_CHECK(written << " elements of out were written by a call with tokens = 0");
}

TEST_CASE("fused_add_rmsnorm and rmsnorm reject bad arguments before launching anything",
          "[day11][fused_add_rmsnorm][args][quick]") {
  const int tokens = 4, hidden = 64;
  DeviceBuffer<uint16_t> x(size_t(tokens) * hidden), res(size_t(tokens) * hidden), w(size_t(hidden) + 8),
      out(size_t(tokens) * hidden);
  x.fill_zero();
  res.fill_zero();
  w.fill_zero();
  out.poison();
  const __half *xd = as_t<Fp16>(x), *wd = as_t<Fp16>(w);
  __half *rd = as_t<Fp16>(res), *od = as_t<Fp16>(out);
  COURSE_CHECK_INVALID_ARGUMENT(
      "x", fused_add_rmsnorm(static_cast<const __half*>(nullptr), rd, wd, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("residual", fused_add_rmsnorm(xd, nullptr, wd, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("weight", fused_add_rmsnorm(xd, rd, nullptr, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", fused_add_rmsnorm(xd, rd, wd, nullptr, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("x", fused_add_rmsnorm(xd + 1, rd, wd, od, tokens, hidden, kEps));  // 2 bytes off
  COURSE_CHECK_INVALID_ARGUMENT("residual", fused_add_rmsnorm(xd, rd + 4, wd, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("weight", fused_add_rmsnorm(xd, rd, wd + 2, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", fused_add_rmsnorm(xd, rd, wd, od + 1, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("tokens", fused_add_rmsnorm(xd, rd, wd, od, -1, hidden, kEps));
  for (int bad_hidden : {0, -8, 4, 12, 1000 + 4, 16392, 1 << 20})
    COURSE_CHECK_INVALID_ARGUMENT("hidden", fused_add_rmsnorm(xd, rd, wd, od, 1, bad_hidden, kEps));
  for (float bad_eps : {0.f, -1e-5f, NAN, INFINITY})
    COURSE_CHECK_INVALID_ARGUMENT("eps", fused_add_rmsnorm(xd, rd, wd, od, tokens, hidden, bad_eps));
  // Overlaps: out on x, on residual, on weight; weight inside residual; x half over residual.
  COURSE_CHECK_INVALID_ARGUMENT("out", fused_add_rmsnorm(xd, rd, wd, const_cast<__half*>(xd), tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", fused_add_rmsnorm(xd, rd, wd, rd, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", fused_add_rmsnorm(xd, rd, wd, const_cast<__half*>(wd), 1, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("weight", fused_add_rmsnorm(xd, rd, rd + hidden, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("residual", fused_add_rmsnorm(rd + hidden, rd, wd, od, 2, hidden, kEps));
  // rmsnorm names its input 'in'.
  COURSE_CHECK_INVALID_ARGUMENT("in", rmsnorm(static_cast<const __half*>(nullptr), wd, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("in", rmsnorm(xd + 2, wd, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("weight", rmsnorm(xd, nullptr, od, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", rmsnorm(xd, wd, nullptr, tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("out", rmsnorm(xd, wd, const_cast<__half*>(xd), tokens, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("tokens", rmsnorm(xd, wd, od, -3, hidden, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("hidden", rmsnorm(xd, wd, od, tokens, 20000, kEps));
  COURSE_CHECK_INVALID_ARGUMENT("eps", rmsnorm(xd, wd, od, tokens, hidden, -1.f));
  // The bf16 overloads check the same way.
  COURSE_CHECK_INVALID_ARGUMENT(
      "hidden", fused_add_rmsnorm(as_t<Bf16>(x), as_t<Bf16>(res), as_t<Bf16>(w), as_t<Bf16>(out), tokens, 36, kEps));
  COURSE_CHECK_INVALID_ARGUMENT(
      "in", rmsnorm(static_cast<const __nv_bfloat16*>(nullptr), as_t<Bf16>(w), as_t<Bf16>(out), tokens, hidden, kEps));
  // Nothing was launched: out still holds its poison everywhere.
  CUDA_CHECK(cudaDeviceSynchronize());
  long long written = 0;
  for (uint16_t b : out.download()) written += b != course::kPoisonF16Bits;
  if (written) FAIL_CHECK(written << " elements of out were written by calls that should have been rejected");
}
