// The safetensors reader and writer: a round trip for F32, F16 and BF16 through a file the test
// writes, and every kind of damaged file rejected with a message that says what is wrong.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "fp16_host.h"
#include "safetensors.h"
#include "test_util.h"

using serving::DType;
using serving::SafetensorsFile;
using serving_test::TempDir;

namespace {

// A file made by hand: the 8-byte little-endian length of `header`, `header`, then `data_bytes`
// bytes of data.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes, uint64_t header_len_override = 0) {
  std::vector<uint8_t> b(8 + header.size() + data_bytes, 0);
  const uint64_t n = header_len_override ? header_len_override : header.size();
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(b.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) b[8 + header.size() + i] = static_cast<uint8_t>(i);
  return b;
}

// Opens `bytes` written to a file and returns what the reader threw.
serving_test::Caught open_error(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file("bad.safetensors");
  serving_test::write_bytes(path, bytes);
  return serving_test::error_of([&] { SafetensorsFile f(path); });
}

#define CHECK_REJECTED(bytes, ...)                                                   \
  do {                                                                               \
    const serving_test::Caught c_ = open_error(dir, bytes);                          \
    INFO("message: " << c_.what);                                                    \
    CHECK(c_.kind == serving_test::Thrown::kInvalidArgument);                        \
    CHECK(serving_test::contains(c_.what, "bad.safetensors"));                       \
    for (const char* p_ : {__VA_ARGS__}) CHECK(serving_test::contains(c_.what, p_)); \
  } while (0)

}  // namespace

TEST_CASE("safetensors: round trip of F32, F16, BF16 tensors", "[day11][model][safetensors]") {
  TempDir dir;
  const std::vector<float> f32 = {1.0f, -2.5f, 3.14159274f, 1e-40f /* subnormal */, -0.0f, 65504.0f, 1e30f};
  std::vector<uint16_t> f16, bf16;
  for (float x : {0.5f, -1.0f, 0.333f, 6.1e-5f, 1000.0f, -65504.0f}) f16.push_back(course::float_to_half_bits(x));
  for (float x : {0.5f, -1.0f, 0.333f, 1e30f, -3e-30f, 7.0f}) bf16.push_back(course::float_to_bf16_bits(x));
  std::vector<serving::TensorData> ts = {
      serving::tensor_f32("a.weight", {7}, f32),
      serving::tensor_f16("b", {2, 3}, f16),
      serving::tensor_bf16("c/with \"quotes\"", {3, 1, 2}, bf16),
      serving::tensor_f32("scalar", {}, {42.0f}),
      serving::tensor_f16("empty", {0, 4}, {}),
  };
  const std::string path = dir.file("t.safetensors");
  serving::write_safetensors(path, ts, {{"format", "pt"}, {"note", "made by a test"}});

  // The layout: 8-byte length, header padded to a multiple of 8, data packed in order.
  const std::vector<uint8_t> bytes = serving_test::read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + 7 * 4 + 6 * 2 + 6 * 2 + 4 + 0);

  const SafetensorsFile f(path);
  CHECK(f.metadata().at("format") == "pt");
  CHECK(f.metadata().at("note") == "made by a test");
  REQUIRE(f.tensors().size() == 5);
  for (size_t i = 0; i < ts.size(); ++i) {
    const serving::TensorInfo* t = f.find(ts[i].name);
    REQUIRE(t != nullptr);
    CHECK(t->dtype == ts[i].dtype);
    CHECK(t->shape == ts[i].shape);
    CHECK(t->end - t->begin == static_cast<int64_t>(ts[i].bytes.size()));
    if (!ts[i].bytes.empty()) CHECK(std::memcmp(f.data(*t), ts[i].bytes.data(), ts[i].bytes.size()) == 0);
  }
  CHECK(f.find("missing") == nullptr);
  CHECK(f.find("c/with \"quotes\"")->shape_str() == "[3, 1, 2]");
  CHECK(f.find("scalar")->numel() == 1);
  CHECK(f.find("empty")->numel() == 0);

  const std::vector<float> a = f.read_f32("a.weight");
  REQUIRE(a.size() == f32.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(std::memcmp(&a[i], &f32[i], 4) == 0);  // bit-exact, -0 and the subnormal included
  }
  const std::vector<float> b = f.read_f32("b");
  for (size_t i = 0; i < b.size(); ++i) CHECK(b[i] == course::half_bits_to_float(f16[i]));
  const std::vector<float> c = f.read_f32("c/with \"quotes\"");
  for (size_t i = 0; i < c.size(); ++i) CHECK(c[i] == course::bf16_bits_to_float(bf16[i]));
  CHECK(f.read_f32("scalar") == std::vector<float>{42.0f});

  // Moving keeps the mapping valid.
  SafetensorsFile moved = SafetensorsFile(path);
  CHECK(moved.read_f32("scalar") == std::vector<float>{42.0f});
}

TEST_CASE("safetensors: dtype names and sizes", "[day11][model][safetensors]") {
  DType d;
  for (const char* name : {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
                           "F64", "I64", "U64"}) {
    REQUIRE(serving::parse_dtype(name, &d));
    CHECK(std::string(serving::dtype_name(d)) == name);
  }
  CHECK_FALSE(serving::parse_dtype("F17", &d));
  CHECK_FALSE(serving::parse_dtype("f16", &d));
  CHECK(serving::dtype_size(DType::kBF16) == 2);
  CHECK(serving::dtype_size(DType::kF32) == 4);
  CHECK(serving::dtype_size(DType::kI64) == 8);
}

TEST_CASE("safetensors: damaged files rejected with their reason", "[day11][model][safetensors]") {
  TempDir dir;
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  {
    // The well-formed version of the files below is accepted.
    serving_test::write_bytes(dir.file("good.safetensors"), raw_file(ok, 8));
    SafetensorsFile f(dir.file("good.safetensors"));
    CHECK(f.tensors().size() == 1);
  }
  SECTION("truncated: the data area shorter than the offsets") {
    CHECK_REJECTED(raw_file(ok, 5), "tensor 'a'", "past the end of the data area (5 bytes)", "truncated");
  }
  SECTION("a file cut inside the 8-byte length") { CHECK_REJECTED(std::vector<uint8_t>(5, 0), "truncated file"); }
  SECTION("header length past the end of the file") {
    CHECK_REJECTED(raw_file(ok, 8, 1000), "header length 1000 is past the end of the file");
    CHECK_REJECTED(raw_file(ok, 8, ~uint64_t{0}), "header length 18446744073709551615 is past the end");
  }
  SECTION("offsets past the end") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[100,108]}})", 8),
                   "data_offsets [100, 108] end past the end of the data area");
  }
  SECTION("overlapping tensors") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            12),
                   "tensors 'a' and 'b' overlap");
  }
  SECTION("a hole between tensors, trailing bytes") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                            20),
                   "belong to no tensor", "before 'b'");
    CHECK_REJECTED(raw_file(ok, 12), "trailing bytes");
  }
  SECTION("wrong dtype string") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", 8), "tensor 'a'",
                   "unknown dtype \"F17\"");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype 4");
  }
  SECTION("size not matching shape and dtype") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                   "span 8 bytes, but shape [3] of F32 needs 12");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})", 8),
                   "shape [2] of F16 needs 4");
  }
  SECTION("bad header") {
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8), "bad header",
                   "JSON:", "at byte 53");
    CHECK_REJECTED(raw_file("[1, 2]  ", 0), "bad header: expected a JSON object");
    CHECK_REJECTED(raw_file(R"({"a":[1]})", 0), "tensor 'a'", "expected an object");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "needs dtype, shape and data_offsets");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative integers");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "0 <= begin <= end");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
                   "data_offsets must be [begin, end]");
    CHECK_REJECTED(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8), "unknown key \"x\"");
    CHECK_REJECTED(raw_file(R"({"__metadata__":{"k":1}})", 0), "__metadata__");
  }
}

TEST_CASE("safetensors: I/O errors and unsupported dtypes", "[day11][model][safetensors]") {
  TempDir dir;
  const auto none = serving_test::error_of([&] { SafetensorsFile f(dir.file("nope.safetensors")); });
  CHECK(none.kind == serving_test::Thrown::kRuntimeError);
  CHECK(serving_test::contains(none.what, "nope.safetensors"));

  serving::TensorData i64{"ids", DType::kI64, {2}, std::vector<uint8_t>(16, 1)};
  serving::write_safetensors(dir.file("i.safetensors"), {i64});
  const SafetensorsFile f(dir.file("i.safetensors"));
  CHECK(f.find("ids")->dtype == DType::kI64);
  SERVING_CHECK_INVALID(f.read_f32("ids"), "i.safetensors", "tensor 'ids' has dtype I64, unsupported");
  SERVING_CHECK_INVALID(f.read_f32("other"), "tensor 'other' is missing");

  // The writer refuses inconsistent input.
  serving::TensorData bad{"x", DType::kF32, {3}, std::vector<uint8_t>(8)};
  SERVING_CHECK_INVALID(serving::safetensors_bytes({bad}), "tensor 'x' holds 8 bytes, its shape needs 12");
  const auto t = serving::tensor_f32("x", {1}, {1.0f});
  SERVING_CHECK_INVALID(serving::safetensors_bytes({t, t}), "duplicate tensor 'x'");
}
