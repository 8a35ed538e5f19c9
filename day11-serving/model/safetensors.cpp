#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "fp16_host.h"
#include "json.h"

namespace serving {

namespace {

struct DTypeRow {
  DType d;
  const char* name;
  int size;
};
constexpr DTypeRow kDTypes[] = {
    {DType::kBool, "BOOL", 1},      {DType::kU8, "U8", 1},   {DType::kI8, "I8", 1},   {DType::kF8E4M3, "F8_E4M3", 1},
    {DType::kF8E5M2, "F8_E5M2", 1}, {DType::kI16, "I16", 2}, {DType::kU16, "U16", 2}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},      {DType::kI32, "I32", 4}, {DType::kU32, "U32", 4}, {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8}, {DType::kU64, "U64", 8},
};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::invalid_argument(path + ": " + what);
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

const char* dtype_name(DType d) {
  for (const auto& r : kDTypes) {
    if (r.d == d) return r.name;
  }
  return "?";
}

int dtype_size(DType d) {
  for (const auto& r : kDTypes) {
    if (r.d == d) return r.size;
  }
  return 0;
}

bool parse_dtype(const std::string& name, DType* out) {
  for (const auto& r : kDTypes) {
    if (name == r.name) {
      *out = r.d;
      return true;
    }
  }
  return false;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string TensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open the file (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat the file (" + std::strerror(err) + ")");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    bad(path, "truncated file: " + std::to_string(file_size) + " bytes, less than the 8-byte header length");
  }
  void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw std::runtime_error(path + ": cannot map the file (" + std::strerror(err) + ")");
  map_ = static_cast<const uint8_t*>(m);
  map_size_ = file_size;

  try {
    const uint64_t header_len = read_le64(map_);
    if (header_len > file_size - 8) {
      bad(path, "header length " + std::to_string(header_len) + " is past the end of the file (" +
                    std::to_string(file_size) + " bytes): truncated, or not a safetensors file");
    }
    data_start_ = static_cast<int64_t>(8 + header_len);
    const int64_t data_size = static_cast<int64_t>(file_size) - data_start_;
    json::Value root;
    try {
      root = json::parse(reinterpret_cast<const char*>(map_ + 8), header_len);
    } catch (const std::invalid_argument& e) {
      bad(path, std::string("bad header: ") + e.what() + " of the header (which starts at byte 8 of the file)");
    }
    if (!root.is_object()) bad(path, "bad header: expected a JSON object, got " + root.dump(80));

    for (const auto& [name, entry] : root.as_object()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) bad(path, "bad header: __metadata__ must be an object of strings");
        for (const auto& [k, v] : entry.as_object()) {
          if (!v.is_string()) bad(path, "bad header: __metadata__ value of \"" + k + "\" is not a string");
          metadata_[k] = v.as_string();
        }
        continue;
      }
      const std::string where = "tensor '" + name + "'";
      if (!entry.is_object()) {
        bad(path, where + ": expected an object {dtype, shape, data_offsets}, got " + entry.dump(80));
      }
      for (const auto& kv : entry.as_object()) {
        if (kv.first != "dtype" && kv.first != "shape" && kv.first != "data_offsets") {
          bad(path, where + ": unknown key \"" + kv.first + "\"");
        }
      }
      const json::Value* dt = entry.find("dtype");
      const json::Value* sh = entry.find("shape");
      const json::Value* off = entry.find("data_offsets");
      if (!dt || !sh || !off) bad(path, where + ": needs dtype, shape and data_offsets");
      TensorInfo t;
      t.name = name;
      if (!dt->is_string() || !parse_dtype(dt->as_string(), &t.dtype)) {
        bad(path, where + ": unknown dtype " + dt->dump(40) +
                      " (the format's dtypes: BOOL, U8, I8, F8_E4M3, F8_E5M2, I16, U16, F16, BF16, I32, U32, F32, "
                      "F64, I64, U64)");
      }
      if (!sh->is_array()) bad(path, where + ": shape must be a list of integers, got " + sh->dump(80));
      int64_t numel = 1;
      for (const json::Value& d : sh->as_array()) {
        if (!d.is_integer() || d.as_int() < 0) {
          bad(path, where + ": shape must be a list of non-negative integers, got " + sh->dump(80));
        }
        if (d.as_int() != 0 && numel > (int64_t{1} << 50) / d.as_int()) bad(path, where + ": shape too large");
        t.shape.push_back(d.as_int());
        numel *= d.as_int();
      }
      if (!off->is_array() || off->as_array().size() != 2 || !off->as_array()[0].is_integer() ||
          !off->as_array()[1].is_integer()) {
        bad(path, where + ": data_offsets must be [begin, end], got " + off->dump(80));
      }
      t.begin = off->as_array()[0].as_int();
      t.end = off->as_array()[1].as_int();
      if (t.begin < 0 || t.end < t.begin) {
        bad(path, where + ": data_offsets " + off->dump() + " must satisfy 0 <= begin <= end");
      }
      if (t.end > data_size) {
        bad(path, where + ": data_offsets " + off->dump() + " end past the end of the data area (" +
                      std::to_string(data_size) + " bytes): truncated file");
      }
      const int64_t want = numel * dtype_size(t.dtype);
      if (t.end - t.begin != want) {
        bad(path, where + ": data_offsets " + off->dump() + " span " + std::to_string(t.end - t.begin) +
                      " bytes, but shape " + t.shape_str() + " of " + dtype_name(t.dtype) + " needs " +
                      std::to_string(want));
      }
      tensors_.push_back(std::move(t));
    }

    // The data area must be covered exactly once: sorted by begin, each tensor starts where the
    // previous one ended.
    std::vector<const TensorInfo*> order;
    for (const TensorInfo& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    int64_t cursor = 0;
    const TensorInfo* prev = nullptr;
    for (const TensorInfo* t : order) {
      if (t->begin < cursor) {
        bad(path, "tensors '" + prev->name + "' and '" + t->name + "' overlap (bytes [" + std::to_string(t->begin) +
                      ", " + std::to_string(std::min(cursor, t->end)) + ") of the data area)");
      }
      if (t->begin > cursor) {
        bad(path, "bytes [" + std::to_string(cursor) + ", " + std::to_string(t->begin) +
                      ") of the data area belong to no tensor (a hole before '" + t->name + "')");
      }
      cursor = t->end;
      prev = t;
    }
    if (cursor != data_size) {
      bad(path, "the data area holds " + std::to_string(data_size) + " bytes but the tensors cover " +
                    std::to_string(cursor) + " (trailing bytes)");
    }
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), map_size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_size_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_size_(o.map_size_),
      data_start_(o.data_start_),
      tensors_(std::move(o.tensors_)),
      metadata_(std::move(o.metadata_)) {
  o.map_ = nullptr;
  o.map_size_ = 0;
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(const_cast<uint8_t*>(map_), map_size_);
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_size_ = o.map_size_;
    data_start_ = o.data_start_;
    tensors_ = std::move(o.tensors_);
    metadata_ = std::move(o.metadata_);
    o.map_ = nullptr;
    o.map_size_ = 0;
  }
  return *this;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const uint8_t* SafetensorsFile::data(const TensorInfo& t) const { return map_ + data_start_ + t.begin; }

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) bad(path_, "tensor '" + name + "' is missing");
  const int64_t n = t->numel();
  std::vector<float> out(static_cast<size_t>(n));
  const uint8_t* p = data(*t);
  switch (t->dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t b = uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 |
                           uint32_t{p[4 * i + 3]} << 24;
        std::memcpy(&out[i], &b, 4);
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = course::half_bits_to_float(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = course::bf16_bits_to_float(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
      }
      break;
    default:
      bad(path_, "tensor '" + name + "' has dtype " + dtype_name(t->dtype) + ", unsupported (F32, F16 or BF16)");
  }
  return out;
}

namespace {

TensorData make_tensor(const std::string& name, DType d, std::vector<int64_t> shape, const void* src, size_t n) {
  TensorData t;
  t.name = name;
  t.dtype = d;
  t.shape = std::move(shape);
  const int sz = dtype_size(d);
  t.bytes.resize(n * sz);
  // Little-endian bytes, whatever the host's byte order.
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    if (sz == 4) {
      std::memcpy(&v, static_cast<const uint8_t*>(src) + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(src) + 2 * i, 2);
      v = h;
    }
    for (int b = 0; b < sz; ++b) t.bytes[i * sz + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return t;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

TensorData tensor_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
  return make_tensor(name, DType::kF32, std::move(shape), values.data(), values.size());
}
TensorData tensor_f16(const std::string& name, std::vector<int64_t> shape, const std::vector<uint16_t>& bits) {
  return make_tensor(name, DType::kF16, std::move(shape), bits.data(), bits.size());
}
TensorData tensor_bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<uint16_t>& bits) {
  return make_tensor(name, DType::kBF16, std::move(shape), bits.data(), bits.size());
}

std::vector<uint8_t> safetensors_bytes(const std::vector<TensorData>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      header += (it == metadata.begin() ? "" : ",") + json_string(it->first) + ":" + json_string(it->second);
    }
    header += "}";
    first = false;
  }
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorData& t = tensors[i];
    for (size_t j = 0; j < i; ++j) {
      if (tensors[j].name == t.name)
        throw std::invalid_argument("write_safetensors: duplicate tensor '" + t.name + "'");
    }
    if (t.name == "__metadata__") throw std::invalid_argument("write_safetensors: '__metadata__' is not a tensor name");
    int64_t numel = 1;
    std::string shape = "[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0) throw std::invalid_argument("write_safetensors: tensor '" + t.name + "' has a negative dim");
      numel *= t.shape[d];
      shape += (d ? "," : "") + std::to_string(t.shape[d]);
    }
    shape += "]";
    const int64_t nbytes = numel * dtype_size(t.dtype);
    if (nbytes != static_cast<int64_t>(t.bytes.size())) {
      throw std::invalid_argument("write_safetensors: tensor '" + t.name + "' holds " + std::to_string(t.bytes.size()) +
                                  " bytes, its shape needs " + std::to_string(nbytes));
    }
    header += std::string(first ? "" : ",") + json_string(t.name) + ":{\"dtype\":\"" + dtype_name(t.dtype) +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + nbytes) + "]}";
    first = false;
    offset += nbytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::vector<uint8_t> out(8 + header.size() + static_cast<size_t>(offset));
  const uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out[b] = static_cast<uint8_t>(n >> (8 * b));
  std::memcpy(out.data() + 8, header.data(), header.size());
  size_t pos = 8 + header.size();
  for (const TensorData& t : tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + pos, t.bytes.data(), t.bytes.size());
    pos += t.bytes.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<uint8_t> bytes = safetensors_bytes(tensors, metadata);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(path + ": cannot create the file");
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw std::runtime_error(path + ": write error");
}

}  // namespace serving
