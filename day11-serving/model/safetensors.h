// The safetensors file format (Hugging Face's weight files), read and written.
//
//   bytes [0, 8)        N, the header's length, a little-endian uint64
//   bytes [8, 8 + N)    the header: a JSON object, padded with spaces
//                         { "__metadata__": {"format": "pt", ...}            (optional, string values)
//                           "<tensor name>": {"dtype": "F16", "shape": [r, c],
//                                             "data_offsets": [begin, end]}, ... }
//   bytes [8 + N, end)  the data area; a tensor's bytes are [8 + N + begin, 8 + N + end), row-major,
//                       little-endian
//
// The reader checks what a damaged or hostile file could get wrong, each with an
// std::invalid_argument naming the file (and the tensor): a header length past the end of the
// file, a header that is not JSON or not an object of objects, a dtype it does not know,
// a shape that is not a list of non-negative integers, data_offsets not [begin, end] with
// begin <= end <= data size, end − begin != product(shape) · dtype size, two tensors whose bytes
// overlap, and bytes of the data area no tensor covers (the format leaves no holes). A file that
// cannot be opened or mapped: std::runtime_error.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace serving {

// Every dtype of the format is recognised (for the size checks); the loader converts F32, F16
// and BF16 and rejects the others as unsupported.
enum class DType { kBool, kU8, kI8, kF8E4M3, kF8E5M2, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64 };
const char* dtype_name(DType d);                        // "F16", ...
int dtype_size(DType d);                                // bytes per element
bool parse_dtype(const std::string& name, DType* out);  // false for an unknown name

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;     // data_offsets, relative to the data area
  int64_t numel() const;          // product(shape) (1 for a scalar, shape [])
  std::string shape_str() const;  // "[576, 49152]"
};

class SafetensorsFile {
 public:
  // Maps the file read-only (mmap) and validates the header; throws as described above.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent
  // The tensor's bytes inside the mapping (valid while this object lives).
  const uint8_t* data(const TensorInfo& t) const;
  // The tensor converted to fp32 (F32, F16, BF16 only; else invalid_argument "unsupported dtype").
  std::vector<float> read_f32(const std::string& name) const;

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  int64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: `bytes` holds numel · dtype_size bytes, little-endian, row-major.
struct TensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
TensorData tensor_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);
TensorData tensor_f16(const std::string& name, std::vector<int64_t> shape, const std::vector<uint16_t>& bits);
TensorData tensor_bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<uint16_t>& bits);

// Writes a valid safetensors file: tensors in the given order, packed without gaps, the header
// padded with spaces to a multiple of 8 bytes. Throws invalid_argument for a tensor whose byte
// count does not match its shape or a duplicate name; runtime_error when the file cannot be
// written.
void write_safetensors(const std::string& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
// The same file as bytes (tests corrupt them).
std::vector<uint8_t> safetensors_bytes(const std::vector<TensorData>& tensors,
                                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace serving
