// bench: times the course's launchers over standard shape grids, each one checked against the
// CPU reference first, next to roofs measured in the same run. See bench/README.md.
//
// The same source builds several binaries (bench/CMakeLists.txt): `bench` links every
// solution library plus the cuBLAS baseline; `bench_ex_<id>` links exercise <id>'s skeleton
// (the learner's code). BENCH_IMPL names which one this is. What is timed comes from the
// registry (bench.h) that the family files (family_*.cpp) fill: nothing here knows a family.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.h"
#include "gpu_probe.h"
#include "report.h"
#include "timing.h"

#ifndef BENCH_IMPL
#define BENCH_IMPL "solution"
#endif

namespace {

using namespace bench;

std::string shape_syntaxes() {
  std::string s;
  for (const auto& f : families()) s += (s.empty() ? "" : " |\n                         ") + f.shape_syntax;
  return s;
}

std::string usage() {
  return std::string(
             "usage: bench [options]\n"
             "  --list                 list the kernels in this binary and the default shapes, then exit\n"
             "  --kernel K             only kernels whose exercise id, launcher or family is K\n"
             "                         (repeatable; e.g. 02_flash_attention, flash_attention_tuned, prefill)\n"
             "  --shape S              only grid shapes whose name contains S (e.g. n4096, causal, ctx16384),\n"
             "                         or a shape of your own (repeatable):\n"
             "                         ") +
         shape_syntaxes() + "\n" +
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
}

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
  } catch (const std::exception&) { throw std::invalid_argument(flag + " needs a positive integer, got '" + v + "'"); }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--list")
      o.list = true;
    else if (a == "--kernel")
      o.kernels.push_back(value());
    else if (a == "--shape") {
      const std::string s = value();
      if (s.find(':') != std::string::npos)
        o.custom_shapes.push_back(parse_shape(s));
      else
        o.shape_filters.push_back(s);
    } else if (a == "--csv")
      o.csv = value();
    else if (a == "--markdown")
      o.markdown = value();
    else if (a == "--compare")
      o.compare = value();
    else if (a == "--reps")
      o.timing.reps = int_arg(a, value());
    else if (a == "--warmup")
      o.timing.warmup = int_arg(a, value());
    else if (a == "--budget")
      o.timing.budget_s = int_arg(a, value());
    else if (a == "--quadratic-max-n")
      o.quadratic_max_n = int_arg(a, value());
    else if (a == "--full")
      o.full = true;
    else if (a == "--no-flush")
      o.timing.flush_l2 = false;
    else if (a == "--no-roofs")
      o.roofs = false;
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "-h" || a == "--help") {
      std::cout << usage();
      std::exit(0);
    } else
      throw std::invalid_argument("unknown option '" + a + "'");
  }
  return o;
}

bool selected(const Kernel& k, const Options& o) {
  if (o.kernels.empty()) return true;
  for (const auto& want : o.kernels)
    if (want == k.exercise || want == k.launcher || want == k.family) return true;
  return false;
}

// Which shapes of a family to run: the ones typed on the command line if any, else the grid
// filtered by the --shape substrings.
std::vector<Shape> shapes_for(const FamilyDef& f, const Options& o) {
  std::vector<Shape> out;
  if (!o.custom_shapes.empty()) {
    for (const auto& s : o.custom_shapes)
      if (s.family == f.name) out.push_back(s);
    return out;
  }
  for (const auto& s : f.grid()) {
    bool keep = o.shape_filters.empty();
    for (const auto& sub : o.shape_filters) keep = keep || s.name.find(sub) != std::string::npos;
    if (keep) out.push_back(s);
  }
  return out;
}

// Grid shapes a kernel is not meant for are left out silently (the MHA-only flash kernel on
// GQA shapes, the GQA kernel on MHA shapes, where the tuned flash kernel already covers them).
// A shape typed on the command line runs every kernel of its family.
bool runs_on(const Kernel& k, const Shape& s) {
  if (s.family != k.family) return false;
  if (!s.from_grid || k.tags.empty()) return true;
  return std::find(k.tags.begin(), k.tags.end(), s.tag) != k.tags.end();
}

// The small-shape check, once per (kernel, what the check depends on) in a run.
Check validate(const Kernel& k, const Shape& s, cudaStream_t stream) {
  static std::map<std::string, Check> cache;
  // The family is part of the key: one launcher may sit in two families (the tuned fp32 kernel
  // is the reference point of the fp16 table) with checks of their own.
  const std::string key = s.family + "|" + k.exercise + "|" + k.launcher + "|" + family(s.family).validation_key(s);
  const auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second;
  Check c;
  c.status = Check::kOk;
  try {
    k.validate(s, c, stream);
  } catch (const std::invalid_argument& e) {
    c.status = Check::kUnsupported;  // the launcher's contract excludes this shape
    c.detail = e.what();
  } catch (const std::exception& e) {
    c.status = Check::kError;
    c.detail = e.what();
    cudaGetLastError();  // clear a non-sticky error so the next kernel starts clean
  }
  cache[key] = c;
  return c;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1 << 30));
  return buf;
}

struct RunOutcome {
  bool timed = false;
  Measurement m;
  std::string note;  // why it was not timed, or what to know about the number
};

RunOutcome run_timed(const Kernel& k, const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
  RunOutcome out;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const double need = k.device_bytes(s);
  if (need > 0.92 * double(free_b)) {  // leave room for the runtime and cuBLAS
    out.note = "skipped: needs " + gib(need) + ", " + gib(double(free_b)) + " free";
    return out;
  }
  try {
    out.m = k.time(s, st, cfg, fl);
    out.timed = out.m.reps > 0;  // 0 reps: the family decided not to time it (its note says why)
    if (out.timed && out.m.reps < cfg.reps) out.note = "reps trimmed to " + std::to_string(out.m.reps);
    if (!out.m.note.empty()) out.note = out.m.note + (out.note.empty() ? "" : "; " + out.note);
  } catch (const std::invalid_argument& e) {
    out.note = std::string("unsupported: ") + e.what();
  } catch (const std::exception& e) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it and go on
    out.note = std::string("error: ") + e.what();
  }
  return out;
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
  std::snprintf(buf, sizeof buf, " (sm_%d%d, %d SMs, %.0f MB L2, %.0f GiB)", prop.major, prop.minor, sms, l2 / 1e6,
                prop.totalGlobalMem / double(1 << 30));
  return std::string(prop.name) + buf;
}

std::string describe_cuda() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  char buf[128];
  std::snprintf(buf, sizeof buf, "runtime %d.%d, driver supports %d.%d", rt / 1000, (rt % 1000) / 10, drv / 1000,
                (drv % 1000) / 10);
  return buf;
}

int run(const Options& o, const std::string& command) {
  const std::vector<Kernel> all = bench::kernels();
  std::vector<Kernel> kernels;
  for (const auto& k : all)
    if (selected(k, o)) kernels.push_back(k);

  if (o.list) {
    std::cout << "kernels in this binary (" << BENCH_IMPL << "):\n";
    for (const auto& k : all) std::cout << "  " << k.exercise << "  [" << k.launcher << ", " << k.family << "]\n";
    if (all.empty()) std::cout << "  (none: no exercise library was found at configure time)\n";
    std::cout << "default shapes:\n";
    for (const FamilyDef& f : families())
      for (const auto& s : f.grid()) std::cout << "  " << f.name << "  " << s.name << "\n";
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
  std::cout << "bench (" << BENCH_IMPL << ") on " << info.device << ", CUDA " << info.cuda << ", " << info.date << "\n";
  std::cout << "timing: median of " << o.timing.reps << " runs after " << o.timing.warmup << " warm-up, L2 "
            << (o.timing.flush_l2 ? "flushed" : "NOT flushed")
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
  for (const FamilyDef& f : families()) {
    for (const Shape& s : shapes_for(f, o)) {
      for (const Kernel& k : kernels) {
        if (!runs_on(k, s)) continue;
        Result r;
        r.impl = k.baseline ? "baseline" : BENCH_IMPL;
        r.kernel = k;
        r.shape = s;
        if (k.quadratic_memory && s.from_grid && !o.full && s.attn.seq_k > o.quadratic_max_n) {
          // The N×N scratch grows as N²: at N = 8192 it is 8-17 GB and the run takes longer
          // than the rest of the grid together. Say so in the row instead of silently omitting it.
          char gb[32];
          std::snprintf(gb, sizeof gb, "%.0f", k.device_bytes(s) / 1e9);
          r.check.status = Check::kSkipped;
          r.note = std::string("skipped: N×N workspace of ") + gb + " GB at N > " + std::to_string(o.quadratic_max_n) +
                   " (--full runs it)";
          results.push_back(r);
          continue;
        }
        r.check = validate(k, s, stream);
        if (r.check.status != Check::kOk) {
          if (r.check.status != Check::kUnsupported) any_wrong = true;
          r.note = r.check.status == Check::kUnsupported ? "unsupported: " + r.check.detail
                                                         : "not timed: failed the reference check";
          if (reported.insert(k.exercise + k.launcher + r.check.detail).second && r.check.status != Check::kUnsupported)
            std::cerr << "\n"
                      << k.exercise << " (" << k.launcher << ", " << BENCH_IMPL
                      << ") does not match the CPU reference on a small " << f.name << " shape like " << s.name << ":\n"
                      << r.check.detail << "\n";
          results.push_back(r);
          continue;
        }
        const RunOutcome out = run_timed(k, s, stream, o.timing, flusher);
        r.timed = out.timed;
        r.m = out.m;
        r.note = out.note;
        if (!o.quiet)
          std::cerr << "  " << k.exercise << " (" << k.launcher << ") " << s.name << ": "
                    << (out.timed ? std::to_string(out.m.median_ms) + " ms" : out.note) << "\n";
        results.push_back(r);
      }
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));

  if (!o.compare.empty()) {
    std::cout << "\nyour kernels (" << o.compare << ") next to the solution, same shapes and inputs:\n"
              << compare_text(results, o.compare) << "yours / solution: above 1 means yours is slower.\n";
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
    std::cerr << "bench: " << e.what() << "\n" << usage();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench: " << e.what() << "\n";
    return 1;
  }
}
