// Table rendering and the small CSV reader `--compare` uses.
#include "table.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace bench {

namespace {
bool numeric(const std::string& s) {
  // A whole number, not merely a leading digit: exercise ids such as "01_flash_tuned" are text.
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}
// Display width: UTF-8 continuation bytes take no column.
size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}
}  // namespace

std::string Table::text() const {
  std::vector<size_t> w(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) w[c] = width(headers_[c]);
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], width(r[c]));
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < w.size(); ++c) {
      const std::string cell = c < r.size() ? r[c] : "";
      const std::string pad(w[c] - width(cell), ' ');
      const bool last = c + 1 == w.size();
      if (numeric(cell))
        o << pad << cell;
      else
        o << cell << (last ? "" : pad);
      if (!last) o << "  ";
    }
    o << "\n";
  };
  line(headers_);
  size_t total = 0;
  for (size_t c = 0; c < w.size(); ++c) total += w[c] + (c + 1 < w.size() ? 2 : 0);
  o << std::string(total, '-') << "\n";
  for (const auto& r : rows_) line(r);
  return o.str();
}

std::string Table::markdown() const {
  std::ostringstream o;
  auto line = [&](const std::vector<std::string>& r) {
    o << "|";
    for (size_t c = 0; c < headers_.size(); ++c) {
      std::string cell = c < r.size() ? r[c] : "";
      std::replace(cell.begin(), cell.end(), '|', '/');
      o << " " << cell << " |";
    }
    o << "\n";
  };
  line(headers_);
  o << "|";
  for (size_t c = 0; c < headers_.size(); ++c) {
    // Right-align a column that holds numbers.
    bool num = false;
    for (const auto& r : rows_) num = num || (c < r.size() && numeric(r[c]));
    o << (num ? "--:|" : "---|");
  }
  o << "\n";
  for (const auto& r : rows_) line(r);
  return o.str();
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

std::string csv_field(std::string s) {
  for (char& c : s) {
    if (c == ',') c = ';';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace bench
