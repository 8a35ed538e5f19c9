// Rendering results (see report.h). Every metric is derived here from the median time and the
// shape's cost model (shape_flops / shape_bytes), so the table, the CSV and the plots agree.
#include "report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "table.h"

namespace bench {

namespace {

std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}
std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

struct Metrics {
  double tflops = 0, gbs = 0, pct_sgemm = 0, pct_hgemm = 0, pct_copy = 0;
};

Metrics metrics(const Result& r, const RunInfo& info) {
  Metrics x;
  if (!r.timed || r.m.median_ms <= 0) return x;
  const double s = r.m.median_ms * 1e-3;
  x.tflops = shape_flops(r.shape) / s / 1e12;
  x.gbs = shape_bytes(r.shape) / s / 1e9;
  if (info.have_roofs) {
    if (info.roofs.sgemm_tflops > 0) x.pct_sgemm = 100.0 * x.tflops / info.roofs.sgemm_tflops;
    if (info.roofs.hgemm_tflops > 0) x.pct_hgemm = 100.0 * x.tflops / info.roofs.hgemm_tflops;
    if (info.roofs.copy_gbs > 0) x.pct_copy = 100.0 * x.gbs / info.roofs.copy_gbs;
  }
  return x;
}

std::string check_cell(const Check& c) {
  if (c.status == Check::kOk) return "ok " + sci(c.rel_l2);
  return c.label();
}

Table family_table(const std::vector<Result>& rs, const FamilyDef& f, const RunInfo& info) {
  const bool compute = f.compute_bound;
  std::vector<std::string> head = {"kernel", "launcher", "shape", "check (rel L2)", "ms"};
  if (compute) head.insert(head.end(), {"TFLOP/s", "% fp32 GEMM", "% fp16 GEMM"});
  head.insert(head.end(), {"GB/s", "% copy", "note"});
  Table t(head);
  for (const auto& r : rs) {
    if (r.shape.family != f.name) continue;
    const Metrics x = metrics(r, info);
    const bool roofs = info.have_roofs && r.timed;
    std::vector<std::string> row = {r.kernel.exercise, r.kernel.launcher, r.shape.name, check_cell(r.check),
                                    r.timed ? fmt(r.m.median_ms, 3) : "-"};
    if (compute) {
      row.push_back(r.timed ? fmt(x.tflops, 2) : "-");
      row.push_back(roofs ? fmt(x.pct_sgemm, 1) : "-");
      row.push_back(roofs ? fmt(x.pct_hgemm, 1) : "-");
    }
    row.push_back(r.timed ? fmt(x.gbs, 1) : "-");
    row.push_back(roofs ? fmt(x.pct_copy, 1) : "-");
    row.push_back(r.note);
    t.add(row);
  }
  return t;
}

std::string roofs_line(const RunInfo& info) {
  if (!info.have_roofs) return "roofs: not measured (--no-roofs)";
  return "roofs measured in this run: copy " + fmt(info.roofs.copy_gbs, 0) + " GB/s (read + write), cuBLAS fp32 GEMM " +
         fmt(info.roofs.sgemm_tflops, 1) + " TFLOP/s, cuBLAS fp16 GEMM (fp32 accumulate) " +
         fmt(info.roofs.hgemm_tflops, 1) + " TFLOP/s";
}

}  // namespace

std::string results_text(const std::vector<Result>& rs, const RunInfo& info) {
  std::ostringstream o;
  o << roofs_line(info) << "\n";
  for (const FamilyDef& f : families()) {
    const Table t = family_table(rs, f, info);
    if (t.empty()) continue;
    o << "\n== " << f.title << "\n" << t.text();
  }
  return o.str();
}

std::string results_markdown(const std::vector<Result>& rs, const RunInfo& info) {
  std::ostringstream o;
  o << "- device: " << info.device << "\n- CUDA: " << info.cuda << "\n- date: " << info.date << "\n- command: `"
    << info.command << "`\n- " << roofs_line(info) << "\n";
  for (const FamilyDef& f : families()) {
    const Table t = family_table(rs, f, info);
    if (t.empty()) continue;
    o << "\n#### " << f.title << "\n\n" << t.markdown();
  }
  return o.str();
}

void write_csv(const std::string& path, const std::vector<Result>& rs, const RunInfo& info) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  // `kernel` is the exercise id (the course's one name for a kernel); `launcher` tells apart
  // the launchers of one exercise. The shape columns are the ones the families fill
  // (Shape::csv): the known ones first, in a fixed order, then any a newer family adds.
  std::vector<std::string> cols = {"impl", "kernel", "launcher", "family", "shape"};
  const std::vector<std::string> known = {"batch",   "heads_q",    "heads_kv", "seq_q", "seq_k", "head_dim", "causal",
                                          "context", "block_size", "n",        "m",     "k",     "rows",     "cols"};
  cols.insert(cols.end(), known.begin(), known.end());
  for (const auto& r : rs)
    for (const auto& kv : r.shape.csv)
      if (std::find(cols.begin(), cols.end(), kv.first) == cols.end()) cols.push_back(kv.first);
  // Measured columns a family adds (Measurement::csv, e.g. the ring family's speed-up), after
  // the shape columns and before the common metrics.
  for (const auto& r : rs)
    for (const auto& kv : r.m.csv)
      if (std::find(cols.begin(), cols.end(), kv.first) == cols.end()) cols.push_back(kv.first);
  for (const char* c : {"check", "rel_l2", "median_ms", "min_ms", "reps", "flops", "bytes", "tflops", "gbs",
                        "pct_sgemm", "pct_hgemm", "pct_copy", "device", "note"})
    cols.push_back(c);
  auto emit = [&](std::map<std::string, std::string> row) {
    row["device"] = info.device;
    for (size_t i = 0; i < cols.size(); ++i) out << (i ? "," : "") << csv_field(row.count(cols[i]) ? row[cols[i]] : "");
    out << "\n";
  };
  auto num = [](double v) {
    std::ostringstream o;
    o.precision(6);
    o << v;
    return o.str();
  };
  for (size_t i = 0; i < cols.size(); ++i) out << (i ? "," : "") << cols[i];
  out << "\n";
  if (info.have_roofs) {
    // The roofs travel with the data, so the plots need nothing but this file.
    emit({{"impl", "roof"}, {"kernel", "roof_copy"}, {"family", "roof"}, {"gbs", num(info.roofs.copy_gbs)}});
    emit({{"impl", "roof"},
          {"kernel", "roof_sgemm_fp32"},
          {"family", "roof"},
          {"tflops", num(info.roofs.sgemm_tflops)}});
    emit({{"impl", "roof"},
          {"kernel", "roof_hgemm_fp16"},
          {"family", "roof"},
          {"tflops", num(info.roofs.hgemm_tflops)}});
  }
  for (const auto& r : rs) {
    const Shape& s = r.shape;
    std::map<std::string, std::string> row = {{"impl", r.impl},
                                              {"kernel", r.kernel.exercise},
                                              {"launcher", r.kernel.launcher},
                                              {"family", s.family},
                                              {"shape", s.name},
                                              {"check", r.check.label()},
                                              {"rel_l2", num(r.check.rel_l2)},
                                              {"flops", num(shape_flops(s))},
                                              {"bytes", num(shape_bytes(s))},
                                              {"note", r.note}};
    for (const auto& kv : s.csv) row[kv.first] = kv.second;
    for (const auto& kv : r.m.csv) row[kv.first] = kv.second;
    if (r.timed) {
      const Metrics x = metrics(r, info);
      row["median_ms"] = num(r.m.median_ms);
      row["min_ms"] = num(r.m.min_ms);
      row["reps"] = num(r.m.reps);
      row["tflops"] = num(x.tflops);
      row["gbs"] = num(x.gbs);
      if (info.have_roofs) {
        row["pct_sgemm"] = num(x.pct_sgemm);
        row["pct_hgemm"] = num(x.pct_hgemm);
        row["pct_copy"] = num(x.pct_copy);
      }
    }
    emit(row);
  }
}

std::string compare_text(const std::vector<Result>& mine, const std::string& other_csv) {
  const auto rows = read_csv(other_csv);
  if (rows.empty()) throw std::runtime_error(other_csv + " is empty");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < rows[0].size(); ++i) col[rows[0][i]] = i;
  for (const char* need : {"kernel", "launcher", "shape", "check", "rel_l2", "median_ms", "note"})
    if (!col.count(need)) throw std::runtime_error(other_csv + " has no column '" + need + "'");
  std::map<std::string, const std::vector<std::string>*> theirs;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].size() > col["note"])
      theirs[rows[i][col["kernel"]] + "|" + rows[i][col["launcher"]] + "|" + rows[i][col["shape"]]] = &rows[i];

  Table t({"kernel", "launcher", "shape", "yours: check", "yours: ms", "solution: check", "solution: ms",
           "yours / solution", "note"});
  for (const auto& r : mine) {
    const auto it = theirs.find(r.kernel.exercise + "|" + r.kernel.launcher + "|" + r.shape.name);
    std::string their_check = "not run", their_ms = "-", ratio = "-", note = r.note;
    if (it != theirs.end()) {
      const auto& row = *it->second;
      their_check = row[col["check"]];
      if (their_check == "ok") their_check += " " + sci(std::stod(row[col["rel_l2"]]));
      if (!row[col["median_ms"]].empty()) {
        const double ms = std::stod(row[col["median_ms"]]);
        their_ms = fmt(ms, 3);
        if (r.timed && r.m.median_ms > 0) ratio = fmt(ms / r.m.median_ms, 2) + "x";
      }
      if (!row[col["note"]].empty()) note = row[col["note"]] + (note.empty() ? "" : "; " + note);
    }
    t.add({r.kernel.exercise, r.kernel.launcher, r.shape.name, their_check, their_ms, check_cell(r.check),
           r.timed ? fmt(r.m.median_ms, 3) : "-", ratio, note});
  }
  return t.text();
}

}  // namespace bench
