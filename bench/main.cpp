// bench: times the course's launchers over standard shape grids, each one checked against the
// CPU reference first, next to roofs measured in the same run. See bench/README.md.
//
// The same source builds several binaries (bench/CMakeLists.txt): `bench` links every
// solution library plus the cuBLAS baseline; `bench_ex_<id>` links exercise <id>'s skeleton
// (the learner's code). BENCH_IMPL names which one this is.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.h"
#include "gpu_probe.h"
#include "report.h"
#include "timing.h"
#include "workloads.h"

#ifndef BENCH_IMPL
#define BENCH_IMPL "solution"
#endif

namespace {

using namespace bench;

const char* kUsage =
    "usage: bench [options]\n"
    "  --list                 list the kernels in this binary and the default shapes, then exit\n"
    "  --kernel K             only kernels whose name, exercise id or family is K\n"
    "                         (repeatable; e.g. flash_attention, 02_flash_attention, prefill)\n"
    "  --shape S              only grid shapes whose name contains S (e.g. n4096, causal, ctx16384),\n"
    "                         or a shape of your own: prefill:b=2,h=32,kv=8,n=1000,d=64,causal |\n"
    "                         decode:b=16,h=32,kv=8,ctx=4096,d=128,bs=16 | vector:n=1000000 |\n"
    "                         matmul:m=512,n=512,k=64 | reduce:rows=4096,cols=1000 |\n"
    "                         softmax:rows=4096,cols=1000              (repeatable)\n"
    "  --csv FILE             also write every row (and the roofs) as CSV (for make plot)\n"
    "  --markdown FILE        also write the tables as markdown (for docs/performance.md)\n"
    "  --compare FILE         print this binary's results next to another's CSV (make compare)\n"
    "  --reps N               timed runs per measurement (default 20; median reported)\n"
    "  --warmup N             untimed runs first (default 3)\n"
    "  --budget S             seconds per measurement before reps are trimmed (default 8, min 5 reps)\n"
    "  --quadratic-max-n N    skip kernels with an N×N workspace above N in the grid (default 4096)\n"
    "  --full                 no such skip (needs ~17 GB free for N = 8192)\n"
    "  --no-flush             do not flush L2 between runs (to see what caching hides)\n"
    "  --no-roofs             skip measuring the copy and GEMM roofs\n"
    "  --quiet                no progress lines on stderr\n";

struct Options {
  bool list = false, quiet = false, roofs = true, full = false;
  std::vector<std::string> kernels, shape_filters;
  std::vector<Shape> custom_shapes;
  std::string csv, markdown, compare;
  int quadratic_max_n = 4096;
  TimingConfig timing;
};

int int_arg(const std::string& flag, const char* v) {
  try {
    const int x = std::stoi(v);
    if (x < 1) throw std::out_of_range("");
    return x;
  } catch (const std::exception&) {
    throw std::invalid_argument(flag + " needs a positive integer, got '" + v + "'");
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--list") o.list = true;
    else if (a == "--kernel") o.kernels.push_back(value());
    else if (a == "--shape") {
      const std::string s = value();
      if (s.find(':') != std::string::npos) o.custom_shapes.push_back(parse_shape(s));
      else o.shape_filters.push_back(s);
    } else if (a == "--csv") o.csv = value();
    else if (a == "--markdown") o.markdown = value();
    else if (a == "--compare") o.compare = value();
    else if (a == "--reps") o.timing.reps = int_arg(a, value());
    else if (a == "--warmup") o.timing.warmup = int_arg(a, value());
    else if (a == "--budget") o.timing.budget_s = int_arg(a, value());
    else if (a == "--quadratic-max-n") o.quadratic_max_n = int_arg(a, value());
    else if (a == "--full") o.full = true;
    else if (a == "--no-flush") o.timing.flush_l2 = false;
    else if (a == "--no-roofs") o.roofs = false;
    else if (a == "--quiet") o.quiet = true;
    else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else throw std::invalid_argument("unknown option '" + a + "'");
  }
  return o;
}

std::vector<Kernel> registry() {
  std::vector<Kernel> ks = day01_kernels();
  const auto d6 = day06_kernels();
  ks.insert(ks.end(), d6.begin(), d6.end());
#ifdef BENCH_WITH_BASELINE
  // After naive, before flash: the table then reads naive -> cuBLAS -> flash per shape.
  auto at = std::find_if(ks.begin(), ks.end(), [](const Kernel& k) {
    return k.family == Family::kPrefill && k.name != "naive_attention";
  });
  ks.insert(at, cublas_attention_kernel());
#endif
  return ks;
}

bool selected(const Kernel& k, const Options& o) {
  if (o.kernels.empty()) return true;
  for (const auto& want : o.kernels)
    if (want == k.name || want == k.exercise || want == family_name(k.family)) return true;
  return false;
}

// Which shapes of a family to run: the ones typed on the command line if any, else the grid
// filtered by the --shape substrings.
std::vector<Shape> shapes_for(Family f, const Options& o) {
  std::vector<Shape> out;
  if (!o.custom_shapes.empty()) {
    for (const auto& s : o.custom_shapes)
      if (s.family == f) out.push_back(s);
    return out;
  }
  for (const auto& s : default_shapes(f)) {
    bool keep = o.shape_filters.empty();
    for (const auto& sub : o.shape_filters) keep = keep || s.name.find(sub) != std::string::npos;
    if (keep) out.push_back(s);
  }
  return out;
}

// Grid shapes a kernel is not meant for are left out silently (the MHA-only flash kernel on
// GQA shapes, the GQA kernel on MHA shapes, where flash already covers them).
bool runs_on(const Kernel& k, const Shape& s) {
  if (s.family != k.family) return false;
  if (k.family != Family::kPrefill || !s.from_grid) return true;
  return k.prefill_gqa_grid == s.gqa_grid;
}

std::string now_utc() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

std::string describe_device() {
  int dev = 0, sms = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  char buf[128];
  std::snprintf(buf, sizeof buf, " (sm_%d%d, %d SMs, %.0f MB L2, %.0f GiB)", prop.major,
                prop.minor, sms, l2 / 1e6, prop.totalGlobalMem / double(1 << 30));
  return std::string(prop.name) + buf;
}

std::string describe_cuda() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  char buf[128];
  std::snprintf(buf, sizeof buf, "runtime %d.%d, driver supports %d.%d", rt / 1000, (rt % 1000) / 10,
                drv / 1000, (drv % 1000) / 10);
  return buf;
}

int run(const Options& o, const std::string& command) {
  const std::vector<Kernel> all = registry();
  std::vector<Kernel> kernels;
  for (const auto& k : all)
    if (selected(k, o)) kernels.push_back(k);

  if (o.list) {
    std::cout << "kernels in this binary (" << BENCH_IMPL << "):\n";
    for (const auto& k : all)
      std::cout << "  " << k.name << "  [" << k.exercise << ", " << family_name(k.family) << "]\n";
    if (all.empty()) std::cout << "  (none: no exercise library was found at configure time)\n";
    std::cout << "default shapes:\n";
    for (Family f : {Family::kVector, Family::kMatmul, Family::kRowReduce, Family::kSoftmax,
                     Family::kPrefill, Family::kDecode})
      for (const auto& s : default_shapes(f))
        std::cout << "  " << family_name(f) << "  " << s.name << "\n";
    return 0;
  }
  if (kernels.empty()) {
    std::cerr << "bench: no kernel in this binary matches --kernel (see --list)\n";
    return 2;
  }

  std::string why;
  if (course::probe_gpu(0, &why) != course::GpuStatus::kUsable) {
    std::cerr << "bench: no usable CUDA GPU, nothing to time: " << why << "\n";
    return 2;
  }

  RunInfo info;
  info.device = describe_device();
  info.cuda = describe_cuda();
  info.date = now_utc();
  info.command = command;
  std::cout << "bench (" << BENCH_IMPL << ") on " << info.device << ", CUDA " << info.cuda << ", "
            << info.date << "\n";
  std::cout << "timing: median of " << o.timing.reps << " runs after " << o.timing.warmup
            << " warm-up, L2 " << (o.timing.flush_l2 ? "flushed" : "NOT flushed")
            << " before each run; every kernel checked against the CPU reference first\n"
            << std::flush;

  // A *blocking* stream on purpose: uploads and the NaN poison go through cudaMemcpy on the
  // legacy default stream, and a copy from pageable memory may return before its DMA has
  // landed. A blocking stream waits for that work; a cudaStreamNonBlocking one would let the
  // kernel run first (seen on an H100: the poison arrived after the kernel's output).
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  if (o.roofs && o.compare.empty()) {
    if (!o.quiet) std::cerr << "measuring roofs (copy, cuBLAS fp32 and fp16 GEMM)...\n";
    info.roofs = measure_roofs(stream, o.timing);
    info.have_roofs = true;
  }

  L2Flusher flusher;
  std::vector<Result> results;
  bool any_wrong = false;
  std::set<std::string> reported;
  for (Family f : {Family::kVector, Family::kMatmul, Family::kRowReduce, Family::kSoftmax,
                   Family::kPrefill, Family::kDecode}) {
    for (const Shape& s : shapes_for(f, o)) {
      for (const Kernel& k : kernels) {
        if (!runs_on(k, s)) continue;
        Result r;
        r.impl = k.exercise == "baseline" ? "baseline" : BENCH_IMPL;
        r.kernel = k;
        r.shape = s;
        if (k.quadratic_memory && s.from_grid && !o.full && s.attn.seq_k > o.quadratic_max_n) {
          // The N×N scratch grows as N²: at N = 8192 it is 8-17 GB and the run takes longer
          // than the rest of the grid together. Say so in the row instead of silently omitting it.
          char gb[32];
          std::snprintf(gb, sizeof gb, "%.0f", device_bytes_needed(k, s) / 1e9);
          r.check.status = Check::kSkipped;
          r.note = std::string("skipped: N×N workspace of ") + gb + " GB at N > " +
                   std::to_string(o.quadratic_max_n) + " (--full runs it)";
          results.push_back(r);
          continue;
        }
        r.check = validate(k, s, stream);
        if (r.check.status != Check::kOk) {
          if (r.check.status != Check::kUnsupported) any_wrong = true;
          r.note = r.check.status == Check::kUnsupported ? "unsupported: " + r.check.detail
                                                         : "not timed: failed the reference check";
          if (reported.insert(k.name + r.check.detail).second && r.check.status != Check::kUnsupported)
            std::cerr << "\n" << k.name << " (" << BENCH_IMPL << ") does not match the CPU reference on a "
                      << "small " << family_name(f) << " shape like " << s.name << ":\n"
                      << r.check.detail << "\n";
          results.push_back(r);
          continue;
        }
        const RunOutcome out = run_timed(k, s, stream, o.timing, flusher);
        r.timed = out.timed;
        r.m = out.m;
        r.note = out.note;
        if (!o.quiet)
          std::cerr << "  " << k.name << " " << s.name << ": "
                    << (out.timed ? std::to_string(out.m.median_ms) + " ms" : out.note) << "\n";
        results.push_back(r);
      }
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));

  if (!o.compare.empty()) {
    std::cout << "\nyour kernels (" << o.compare << ") next to the solution, same shapes and inputs:\n"
              << compare_text(results, o.compare)
              << "yours / solution: above 1 means yours is slower.\n";
  } else {
    std::cout << "\n" << results_text(results, info);
  }
  if (!o.csv.empty()) write_csv(o.csv, results, info);
  if (!o.markdown.empty()) {
    std::ofstream md(o.markdown);
    if (!md) throw std::runtime_error("cannot write " + o.markdown);
    md << results_markdown(results, info);
  }
  if (any_wrong)
    std::cout << "\nSome kernels FAILED the reference check (reports above on stderr): their rows "
                 "have no time.\n";
  return any_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command = "bench";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    return run(parse(argc, argv), command);
  } catch (const std::invalid_argument& e) {
    std::cerr << "bench: " << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 1;
  }
}
