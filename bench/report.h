// One result row per (kernel, shape), and the ways they are written out: the terminal table,
// CSV (for plots and --compare), markdown (for docs/performance.md).
#pragma once
#include <string>
#include <vector>

#include "bench.h"

namespace bench {

struct Result {
  std::string impl;  // "solution", "learner" or "baseline"
  Kernel kernel;
  Shape shape;
  Check check;
  bool timed = false;
  Measurement m;
  std::string note;
};

// What the run was: printed above the table and into the markdown file.
struct RunInfo {
  std::string device, cuda, date, command;
  bool have_roofs = false;
  Roofs roofs;
};

std::string results_text(const std::vector<Result>& rs, const RunInfo& info);
std::string results_markdown(const std::vector<Result>& rs, const RunInfo& info);
void write_csv(const std::string& path, const std::vector<Result>& rs, const RunInfo& info);
// Side by side with another binary's CSV (the learner's): both checks, both times, the ratio.
std::string compare_text(const std::vector<Result>& mine, const std::string& other_csv);

}  // namespace bench
