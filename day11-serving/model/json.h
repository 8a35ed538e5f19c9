// A small JSON reader, enough for config.json and a safetensors header: objects, arrays,
// strings (every escape, \uXXXX with surrogate pairs, to UTF-8), numbers, true, false, null.
// Errors throw std::invalid_argument "JSON: <what> at byte <offset>".
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace serving::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // An integer: a number written without fraction or exponent that fits int64.
  bool is_integer() const { return type_ == Type::kNumber && is_int_; }

  // Accessors throw std::invalid_argument "JSON: expected <type>, got <type>" on a wrong type.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;  // requires is_integer()
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  const std::vector<std::pair<std::string, Value>>& as_object() const;  // in file order
  const Value* find(const std::string& key) const;                      // object member or nullptr

  static const char* type_name(Type t);
  // Compact text of the value (for error messages), cut after max_chars with "...".
  std::string dump(size_t max_chars = 200) const;

 private:
  friend class Parser;
  Type type_ = Type::kNull;
  bool bool_ = false, is_int_ = false;
  double number_ = 0;
  int64_t int_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;
};

// Parses a whole document (surrounding white space allowed, anything else after it is an
// error). Duplicate object keys are an error. Nesting deeper than 256 is an error.
Value parse(const std::string& text);
Value parse(const char* data, size_t size);

}  // namespace serving::json
