// Family "rmsnorm": the fused residual add + RMSNorm of every Llama layer (day 11 · 03).
//
// Grid: decode steps (tokens = batch 1, 8, 32, 128, 256) and prefill chunks (4096 and 16384
// tokens) at hidden 576 (SmolLM2-135M) and 4096 (Llama 3 8B), fp16, plus the 4096 x 4096
// prefill shape in bf16. A decode step moves 12 KB (1 token, hidden 576) to 8 MB (256 tokens,
// hidden 4096): its rows show launch and latency, not bandwidth; the prefill rows show the
// bandwidth, against the copy roof measured in the same run.
//
// Bytes: x and the residual read once, the residual and out written once, 2 bytes each, and the
// weight read once per call (it stays in L2 across the rows): 2 · hidden · (4 · tokens + 1).
// ~5 FLOPs per element: "% of copy" is the measure.
//
// Kernels: 03_fused_add_rmsnorm (fused_add_rmsnorm: one launch, the residual read once), and the
// unfused baseline of the same arithmetic, two launches as a framework without fusion runs it:
// residual += x (cublasAxpyEx, fp32 arithmetic, rounded to the 16-bit type) and then the
// exercise's own rmsnorm on the new residual. The baseline moves 2 · hidden · (6 · tokens + 1)
// bytes (the residual is written, then read again); its GB/s column counts the fused bytes, so
// it reads as the rate the fused kernel would need to be as slow: the ratio of the two times is
// what fusion saves.
//
// The check: the shape's hidden and type at 3 tokens (and 67 for the prefill shapes), inputs
// normal(0, 1) rounded to the type, the residual compared exactly with rd(residual + x) and out
// with the reference (common/reference_rmsnorm.h), every output one of the values Hugging Face's
// rounding allows for an inverse RMS within 1e-4 (what the exercise's test demands). Timing
// inputs: hashed uniform fp16 bits in [-1, 1) (bf16 rows read the same bits as bf16).
#include <cublas_v2.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda_check.h"
#include "fp16_host.h"
#include "reference_rmsnorm.h"

#ifdef BENCH_HAVE_03_fused_add_rmsnorm
#include "03_fused_add_rmsnorm.h"
#endif

namespace bench {
namespace {

constexpr const char* kFamily = "rmsnorm";
constexpr float kEps = 1e-5f;

// Shape fields: rows = tokens, cols = hidden; extra: bf16 (0/1).
Shape rmsnorm_shape(int tokens, int hidden, bool bf16) {
  Shape s;
  s.family = kFamily;
  s.rows = tokens;
  s.cols = hidden;
  s.extra = {{"bf16", bf16}};
  s.name = "t" + std::to_string(tokens) + "_h" + std::to_string(hidden) + (bf16 ? "_bf16" : "_fp16");
  s.csv = {{"rows", std::to_string(tokens)}, {"cols", std::to_string(hidden)}, {"dtype", bf16 ? "bf16" : "fp16"}};
  return s;
}

double rmsnorm_bytes(const Shape& s) { return 2.0 * s.cols * (4.0 * s.rows + 1.0); }

FamilyDef make_family() {
  FamilyDef f;
  f.name = kFamily;
  f.title =
      "fused residual add + RMSNorm (bandwidth; bytes = x and residual read, residual and out written, 16-bit, + "
      "the weight once)";
  f.order = 810;
  f.shape_syntax = "rmsnorm:t=4096,h=4096[,bf16]";
  f.grid = [] {
    std::vector<Shape> v;
    for (int hidden : {576, 4096})
      for (int tokens : {1, 8, 32, 128, 256, 4096}) v.push_back(rmsnorm_shape(tokens, hidden, false));
    v.push_back(rmsnorm_shape(16384, 4096, false));
    v.push_back(rmsnorm_shape(4096, 4096, true));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    const int tokens = int(spec.take("t", 4096)), hidden = int(spec.take("h", 4096));
    return rmsnorm_shape(tokens, hidden, spec.flag("bf16"));
  };
  f.validation_key = [](const Shape& s) {
    return "h" + std::to_string(s.cols) + "b" + std::to_string(s.extra.at("bf16")) + (s.rows >= 1024 ? "p" : "d");
  };
  f.flops = [](const Shape&) { return 0.0; };  // bandwidth kernel: GB/s and % of copy
  f.bytes = rmsnorm_bytes;
  return f;
}

#if defined(BENCH_HAVE_03_fused_add_rmsnorm)
// The two calls on raw 16-bit bits; bf16 picks the overload.
void launch_fused(const uint16_t* x, uint16_t* res, const uint16_t* w, uint16_t* out, int tokens, int hidden, bool bf16,
                  cudaStream_t st) {
  if (bf16)
    fused_add_rmsnorm(reinterpret_cast<const __nv_bfloat16*>(x), reinterpret_cast<__nv_bfloat16*>(res),
                      reinterpret_cast<const __nv_bfloat16*>(w), reinterpret_cast<__nv_bfloat16*>(out), tokens, hidden,
                      kEps, st);
  else
    fused_add_rmsnorm(reinterpret_cast<const __half*>(x), reinterpret_cast<__half*>(res),
                      reinterpret_cast<const __half*>(w), reinterpret_cast<__half*>(out), tokens, hidden, kEps, st);
}

// How one implementation runs the operation: fused (one launch) or the unfused baseline.
using Impl = void (*)(const uint16_t* x, uint16_t* res, const uint16_t* w, uint16_t* out, int tokens, int hidden,
                      bool bf16, cudaStream_t st);

void fused_impl(const uint16_t* x, uint16_t* res, const uint16_t* w, uint16_t* out, int tokens, int hidden, bool bf16,
                cudaStream_t st) {
  launch_fused(x, res, w, out, tokens, hidden, bf16, st);
}

// Checks `impl` on a small version of s against the reference.
void check_rmsnorm(Impl impl, const Shape& s, Check& c, cudaStream_t st) {
  const bool bf16 = s.extra.at("bf16") != 0;
  const int hidden = s.cols;
  using Round1 = float (*)(float);
  using Round = std::vector<float> (*)(const std::vector<float>&);
  using Bits = std::vector<uint16_t> (*)(const std::vector<float>&);
  using Decode = std::vector<float> (*)(const std::vector<uint16_t>&);
  const Round1 round1 = bf16 ? static_cast<Round1>(course::round_to_bf16) : static_cast<Round1>(course::round_to_half);
  const Round round = bf16 ? static_cast<Round>(course::round_to_bf16) : static_cast<Round>(course::round_to_half);
  const Bits bits = bf16 ? static_cast<Bits>(course::to_bf16_bits) : static_cast<Bits>(course::to_half_bits);
  const Decode decode =
      bf16 ? static_cast<Decode>(course::bf16_bits_to_float) : static_cast<Decode>(course::half_bits_to_float);
  const course::Tolerance exact = {0.0, 0.0, 0.0, "exact (each output one of the values the rounding allows)"};
  for (int tokens : {3, s.rows >= 1024 ? 67 : 1}) {
    const size_t n = size_t(tokens) * hidden;
    const auto x = round(course::random_normal(n, seed_for("rmsnorm_x", hidden)));
    const auto res = round(course::random_normal(n, seed_for("rmsnorm_res", hidden)));
    const auto w = round(course::random_normal(size_t(hidden), seed_for("rmsnorm_w", hidden), 1.f, 0.5f));
    course::DeviceBuffer<uint16_t> dx(bits(x)), dres(bits(res)), dw(bits(w)), dout(n);
    dout.poison();
    inputs_ready();
    impl(dx.data(), dres.data(), dw.data(), dout.data(), tokens, hidden, bf16, st);
    CUDA_CHECK(cudaDeviceSynchronize());
    const course::Dims dims{{"t", tokens}, {"j", hidden}};
    const std::string what =
        std::string(bf16 ? "bf16" : "fp16") + " tokens=" + std::to_string(tokens) + " hidden=" + std::to_string(hidden);
    const auto r = course::ref::residual_add(res, x, round1);
    merge(c, course::compare(decode(dres.download()), r, dims, exact, dres.guard_damage()), what + " residual");
    const auto got = decode(dout.download());
    merge(c,
          course::compare(got, course::ref::rmsnorm_allowed(got, r, w, tokens, hidden, kEps, round1, 1e-4), dims, exact,
                          dout.guard_damage()),
          what + " out");
  }
}

course::DeviceBuffer<uint16_t> filled16(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<uint16_t> b(static_cast<size_t>(n));
  fill_uniform_half(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

Kernel rmsnorm_kernel_entry(std::string exercise, std::string launcher, int order, bool baseline, Impl impl) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = kFamily;
  k.order = order;
  k.baseline = baseline;
  k.validate = [impl](const Shape& s, Check& c, cudaStream_t st) { check_rmsnorm(impl, s, c, st); };
  k.device_bytes = [](const Shape& s) { return 2.0 * s.cols * (3.0 * s.rows + 1.0); };
  k.time = [impl](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    const int64_t n = int64_t(s.rows) * s.cols;
    // The residual is updated in place by every run: uniform [-1, 1) inputs grow it by about
    // one per run in magnitude, far from fp16's range over the runs the timing makes.
    auto x = filled16(n, 1, st), res = filled16(n, 2, st), w = filled16(s.cols, 3, st), out = filled16(n, 4, st);
    inputs_ready();
    const bool bf16 = s.extra.at("bf16") != 0;
    return timed([&] { impl(x.data(), res.data(), w.data(), out.data(), s.rows, s.cols, bf16, st); }, st, cfg, fl);
  };
  return k;
}
#endif

#if defined(BENCH_WITH_BASELINE) && defined(BENCH_HAVE_03_fused_add_rmsnorm)
// The unfused baseline: residual += x as its own kernel (cuBLAS's axpy with alpha = 1, fp32
// arithmetic, the result rounded to the 16-bit type), then the exercise's rmsnorm on the new
// residual. One handle for the process, created outside any timed region.
cublasHandle_t cublas_handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    if (cublasCreate(&created) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    return created;
  }();
  return h;
}

void launch_rmsnorm(const uint16_t* in, const uint16_t* w, uint16_t* out, int tokens, int hidden, bool bf16,
                    cudaStream_t st) {
  if (bf16)
    rmsnorm(reinterpret_cast<const __nv_bfloat16*>(in), reinterpret_cast<const __nv_bfloat16*>(w),
            reinterpret_cast<__nv_bfloat16*>(out), tokens, hidden, kEps, st);
  else
    rmsnorm(reinterpret_cast<const __half*>(in), reinterpret_cast<const __half*>(w), reinterpret_cast<__half*>(out),
            tokens, hidden, kEps, st);
}

void unfused_impl(const uint16_t* x, uint16_t* res, const uint16_t* w, uint16_t* out, int tokens, int hidden, bool bf16,
                  cudaStream_t st) {
  cublasHandle_t h = cublas_handle();
  if (cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasSetStream failed");
  const float one = 1.f;
  const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasStatus_t status = cublasAxpyEx(h, tokens * hidden, &one, CUDA_R_32F, x, t, 1, res, t, 1, CUDA_R_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED)  // the row then says "unsupported" instead of failing the run
    throw std::invalid_argument(std::string("cublasAxpyEx does not support ") + (bf16 ? "bf16" : "fp16") + " here");
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasAxpyEx failed");
  launch_rmsnorm(res, w, out, tokens, hidden, bf16, st);
}
#endif

bool register_all() {
  add_family(make_family());
#if defined(BENCH_HAVE_03_fused_add_rmsnorm)
  add_kernel(rmsnorm_kernel_entry("03_fused_add_rmsnorm", "fused_add_rmsnorm", 10, false, fused_impl));
#endif
#if defined(BENCH_WITH_BASELINE) && defined(BENCH_HAVE_03_fused_add_rmsnorm)
  add_kernel(rmsnorm_kernel_entry("baseline", "cublasAxpyEx+rmsnorm", 20, true, unfused_impl));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
