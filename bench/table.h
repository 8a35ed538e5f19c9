// A plain table rendered as aligned text (the terminal) or GitHub markdown (docs/performance.md).
#pragma once
#include <string>
#include <vector>

namespace bench {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  std::string text() const;  // columns padded; numbers (cells that parse whole as one) right-aligned
  std::string markdown() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// CSV with a header line; fields never contain commas or newlines (callers sanitise notes).
std::vector<std::vector<std::string>> read_csv(const std::string& path);
std::string csv_field(std::string s);  // commas -> ';', newlines -> ' '

}  // namespace bench
