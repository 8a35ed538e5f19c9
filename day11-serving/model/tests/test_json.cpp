// The JSON reader (model/json.h): what config.json and safetensors headers need, and errors that
// say what is wrong and where (the byte offset).
#include <string>

#include "catch_compat.h"
#include "json.h"
#include "test_util.h"

namespace json = serving::json;

TEST_CASE("json: values of every type", "[day11][model][json]") {
  const json::Value v = json::parse(
      " {\"a\": 1, \"b\": -2.5e3, \"c\": [true, false, null], \"d\": {\"e\": \"x\"}, \"f\": [], \"g\": {}} ");
  REQUIRE(v.is_object());
  REQUIRE(v.as_object().size() == 6);
  CHECK(v.as_object()[0].first == "a");  // file order kept
  CHECK(v.find("a")->is_integer());
  CHECK(v.find("a")->as_int() == 1);
  CHECK(v.find("b")->as_double() == -2500.0);
  CHECK_FALSE(v.find("b")->is_integer());
  const auto& c = v.find("c")->as_array();
  REQUIRE(c.size() == 3);
  CHECK(c[0].as_bool());
  CHECK_FALSE(c[1].as_bool());
  CHECK(c[2].is_null());
  CHECK(v.find("d")->find("e")->as_string() == "x");
  CHECK(v.find("f")->as_array().empty());
  CHECK(v.find("g")->as_object().empty());
  CHECK(v.find("zz") == nullptr);
}

TEST_CASE("json: integers keep 64 bits, others are doubles", "[day11][model][json]") {
  const json::Value v = json::parse("[9007199254740993, -9223372036854775808, 1e2, 0.5, 0, -0, 1E+2]");
  const auto& a = v.as_array();
  CHECK(a[0].as_int() == 9007199254740993LL);  // not representable in a double
  CHECK(a[1].as_int() == INT64_MIN);
  CHECK_FALSE(a[2].is_integer());
  CHECK(a[2].as_double() == 100.0);
  CHECK(a[3].as_double() == 0.5);
  CHECK(a[4].as_int() == 0);
  CHECK(a[5].as_int() == 0);
  CHECK(a[6].as_double() == 100.0);
  // Too large for int64: still a number, not an integer.
  const json::Value big = json::parse("18446744073709551616");
  CHECK(big.is_number());
  CHECK_FALSE(big.is_integer());
}

TEST_CASE("json: string escapes, \\u and surrogate pairs to UTF-8", "[day11][model][json]") {
  const json::Value v = json::parse(R"(["a\"b\\c\/d\b\f\n\r\t", "\u00e9\u4e2d", "\ud83d\ude00", "caf\u00E9"])");
  const auto& a = v.as_array();
  CHECK(a[0].as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(a[1].as_string() == "\xC3\xA9\xE4\xB8\xAD");  // é 中
  CHECK(a[2].as_string() == "\xF0\x9F\x98\x80");      // U+1F600
  CHECK(a[3].as_string() == "caf\xC3\xA9");
  // Raw UTF-8 passes through.
  CHECK(json::parse("\"\xE4\xB8\xAD\"").as_string() == "\xE4\xB8\xAD");
}

TEST_CASE("json: errors name the problem and the byte offset", "[day11][model][json]") {
  SERVING_CHECK_INVALID(json::parse("{\"a\": 1,}"), "expected a key string", "at byte 8");
  SERVING_CHECK_INVALID(json::parse("{\"a\" 1}"), "expected ':'", "at byte 5");
  SERVING_CHECK_INVALID(json::parse("[1, 2"), "unexpected end of input", "at byte 5");
  SERVING_CHECK_INVALID(json::parse("\"abc"), "unterminated string", "at byte 4");
  SERVING_CHECK_INVALID(json::parse("[tru]"), "invalid literal", "at byte 1");
  SERVING_CHECK_INVALID(json::parse("01"), "leading zero", "at byte 1");
  SERVING_CHECK_INVALID(json::parse("1.e5"), "expected a digit after '.'", "at byte 2");
  SERVING_CHECK_INVALID(json::parse("{} x"), "unexpected data after the JSON value", "at byte 3");
  SERVING_CHECK_INVALID(json::parse("\"\\x\""), "invalid escape", "at byte 2");
  SERVING_CHECK_INVALID(json::parse("\"\\ud83d\""), "without its low surrogate", "at byte 1");
  SERVING_CHECK_INVALID(json::parse("\"a\nb\""), "control character", "at byte 2");
  SERVING_CHECK_INVALID(json::parse("{\"k\": 1, \"k\": 2}"), "duplicate key \"k\"", "at byte 9");
  SERVING_CHECK_INVALID(json::parse("1e999"), "number out of range", "at byte 0");
  SERVING_CHECK_INVALID(json::parse(""), "unexpected end of input", "at byte 0");
  SERVING_CHECK_INVALID(json::parse(std::string(300, '[') + std::string(300, ']')), "nesting deeper than 256");
}

TEST_CASE("json: wrong-type access throws", "[day11][model][json]") {
  const json::Value v = json::parse("{\"a\": \"s\", \"b\": 1.5}");
  SERVING_CHECK_INVALID(v.find("a")->as_int(), "expected a number, got a string");
  SERVING_CHECK_INVALID(v.find("b")->as_int(), "expected an integer");
  SERVING_CHECK_INVALID(v.as_array(), "expected an array, got an object");
  CHECK(v.dump() == "{\"a\": \"s\", \"b\": 1.5}");
  CHECK(json::parse("[1, 2, 3, 4, 5, 6]").dump(5) == "[1, 2...");
}
