// The bench's vocabulary and its registry: what a shape, a kernel and a workload family are.
//
// Each family lives in one file, bench/family_<name>.cpp, which registers the family
// (add_family) and the kernels it drives (add_kernel) from a static initialiser; the runner
// (main.cpp) only loops over what was registered. A kernel entry carries closures that already
// know its launcher's signature, its inputs and its reference check, so nothing outside the
// family file needs to know them: adding a family or a kernel touches one file.
//
// The bench never calls a kernel directly: every launch goes through an exercise's LAUNCHER
// (the function declared in the day's header), exactly what the tests call. Which launchers
// exist depends on which exercises have landed: family files wrap each one in
// `#ifdef BENCH_HAVE_<id>`, defined by bench/CMakeLists.txt only for libraries it found.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "attention_params.h"

namespace bench {

// One benchmark shape. A family uses the fields it needs and leaves the others at zero.
struct Shape {
  std::string family;                    // the family's name, e.g. "prefill"
  std::string name;                      // unique within the family and filterable, e.g. "b2_h32_kv32_n8192_d64_causal"
  bool from_grid = true;                 // false for a shape typed on the command line
  std::string tag;                       // grid shapes: which kernels run them by default (see Kernel::tags)
  int64_t n = 0;                         // vector length
  int m = 0, nn = 0, k = 0;              // matmul: C[m, nn] = A[m, k]·B[nn, k]ᵀ
  int rows = 0, cols = 0;                // row-wise kernels
  course::AttentionParams attn;          // prefill-like attention
  course::PagedParams paged;             // paged decode
  int context = 0;                       // decode: cached tokens per sequence
  std::map<std::string, int64_t> extra;  // sizes no field above holds (a family's own)
  std::map<std::string, std::string> csv;  // the bench.csv columns this shape fills
};

// The key=value list after "<family>:" in --shape. A family's parser takes the keys it knows;
// whatever is left over is reported as a usage error by the caller.
class ShapeSpec {
 public:
  explicit ShapeSpec(const std::string& body);             // throws std::invalid_argument on bad syntax
  int64_t take(const std::string& key, int64_t fallback);  // positive integers only
  bool flag(const std::string& word);                      // a bare word such as "causal"
  std::vector<std::string> unused() const;

 private:
  std::map<std::string, int64_t> values_;
  std::set<std::string> flags_, used_;
};

// Did the kernel compute the right thing on a small shape resembling the benchmark one?
struct Check {
  enum Status { kOk, kFail, kUnsupported, kError, kSkipped } status = kError;
  double rel_l2 = 0.0;
  std::string detail;  // the compare() report, or the exception's message
  std::string label() const;
};

struct TimingConfig {
  int warmup = 3;
  int reps = 20;
  double budget_s = 8.0;  // per measurement: reps are trimmed (to >= 5) when a call is slower
  bool flush_l2 = true;
};

struct Measurement {
  double median_ms = 0.0;
  double min_ms = 0.0;
  int reps = 0;                            // 0: the family chose not to time this row; `note` says why
  std::string note;                        // what to know about the number (goes into the row's note)
  std::map<std::string, std::string> csv;  // measured columns of bench.csv a family adds ("speedup", ...)
};

struct Roofs {
  double copy_gbs = 0.0;      // device-to-device copy, bytes read + written
  double sgemm_tflops = 0.0;  // cuBLAS fp32 GEMM (no TF32)
  double hgemm_tflops = 0.0;  // cuBLAS fp16 GEMM with fp32 accumulation (tensor cores)
};
Roofs measure_roofs(cudaStream_t stream, const TimingConfig& cfg);

class L2Flusher;  // timing.h

// One launcher of one exercise, with everything the runner needs bound in.
struct Kernel {
  std::string exercise;           // the kernel's name everywhere (table, CSV, --kernel): "03_reduction"
  std::string launcher;           // the C++ function: "row_reduce" (tells two launchers of one exercise apart)
  std::string family;             // the FamilyDef::name it belongs to
  int order = 0;                  // position within the family's table: the staircase naive -> tuned
  std::vector<std::string> tags;  // grid shapes it runs on by default (Shape::tag); empty: all
  bool quadratic_memory = false;  // N×N workspace: skipped in the grid above --quadratic-max-n
  bool baseline = false;          // not an exercise (the cuBLAS attention): impl "baseline"
  // Runs on a small shape resembling `s` and merges compare() results into the Check (which
  // starts as kOk). Throws std::invalid_argument when the launcher's contract excludes `s`.
  std::function<void(const Shape& s, Check& c, cudaStream_t st)> validate;
  // Device bytes the timed run allocates (inputs, outputs, workspace).
  std::function<double(const Shape& s)> device_bytes;
  // Allocates and fills the inputs, then times the launcher (time_launch in timing.h).
  std::function<Measurement(const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl)> time;
};

// A workload family: shapes that share an input set-up, a validation routine and a cost model.
struct FamilyDef {
  std::string name;                          // "prefill": the --shape prefix, --kernel matches it, CSV `family`
  std::string title;                         // heading of its table
  int order = 0;                             // table position: day 01 100-400, day 06 500-600, day 10 700+
  bool compute_bound = false;                // show TFLOP/s and % of the GEMM roofs
  std::string shape_syntax;                  // for --help: "prefill:b=2,h=32,kv=8,n=1000,nk=1000,d=64,causal"
  std::function<std::vector<Shape>()> grid;  // the default shapes
  std::function<Shape(ShapeSpec& spec)> parse;
  // What the small-shape check depends on: each (kernel, key) is validated once per run.
  std::function<std::string(const Shape& s)> validation_key;
  std::function<double(const Shape& s)> flops;  // work that must be done (0: bandwidth kernel)
  std::function<double(const Shape& s)> bytes;  // inputs read once + outputs written once
};

// Registration, from a static initialiser in a family file. add_family ignores a second
// registration of the same name (shared families may be registered from several files).
bool add_family(FamilyDef f);
bool add_kernel(Kernel k);
std::vector<FamilyDef> families();                 // by FamilyDef::order
std::vector<Kernel> kernels();                     // by family order, then Kernel::order
const FamilyDef& family(const std::string& name);  // throws std::invalid_argument if unknown

// "<family>:k=v,..." -> the family's Shape (throws std::invalid_argument with the syntax).
Shape parse_shape(const std::string& spec);
double shape_flops(const Shape& s);
double shape_bytes(const Shape& s);

}  // namespace bench
