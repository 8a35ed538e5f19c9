#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace serving::json {

namespace {

[[noreturn]] void type_error(Value::Type want, Value::Type got) {
  throw std::invalid_argument(std::string("JSON: expected ") + Value::type_name(want) + ", got " +
                              Value::type_name(got));
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void dump_string(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void dump_to(std::string& out, const Value& v, size_t max_chars) {
  if (out.size() > max_chars) return;
  char buf[32];
  switch (v.type()) {
    case Value::Type::kNull:
      out += "null";
      break;
    case Value::Type::kBool:
      out += v.as_bool() ? "true" : "false";
      break;
    case Value::Type::kNumber:
      if (v.is_integer()) {
        out += std::to_string(v.as_int());
      } else {
        std::snprintf(buf, sizeof buf, "%.17g", v.as_double());
        out += buf;
      }
      break;
    case Value::Type::kString:
      dump_string(out, v.as_string());
      break;
    case Value::Type::kArray: {
      out += '[';
      bool first = true;
      for (const Value& e : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        dump_to(out, e, max_chars);
        if (out.size() > max_chars) return;
      }
      out += ']';
      break;
    }
    case Value::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_object()) {
        if (!first) out += ", ";
        first = false;
        dump_string(out, k);
        out += ": ";
        dump_to(out, e, max_chars);
        if (out.size() > max_chars) return;
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

// The recursive-descent parser. `pos_` is the byte offset every error reports.
class Parser {
 public:
  Parser(const char* data, size_t size) : p_(data), n_(size) {}

  Value document() {
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (pos_ != n_) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  const char* p_;
  size_t n_, pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("JSON: " + what + " at byte " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= n_; }
  char peek() const { return at_end() ? '\0' : p_[pos_]; }
  bool digit() const { return peek() >= '0' && peek() <= '9'; }
  void skip_ws() {
    while (!at_end() && (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r')) ++pos_;
  }
  static std::string describe(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      return buf;
    }
    return std::string(1, c);
  }
  void expect(char c, const char* what) {
    if (at_end()) fail(std::string("unexpected end of input, expected ") + what);
    if (p_[pos_] != c) fail(std::string("expected ") + what + ", found '" + describe(p_[pos_]) + "'");
    ++pos_;
  }

  Value value(int depth) {
    if (depth > 256) fail("nesting deeper than 256");
    if (at_end()) fail("unexpected end of input, expected a value");
    const char c = p_[pos_];
    Value v;
    switch (c) {
      case '{':
        object(v, depth);
        break;
      case '[':
        array(v, depth);
        break;
      case '"':
        v.type_ = Value::Type::kString;
        v.string_ = string();
        break;
      case 't':
        literal("true", v, Value::Type::kBool, true);
        break;
      case 'f':
        literal("false", v, Value::Type::kBool, false);
        break;
      case 'n':
        literal("null", v, Value::Type::kNull, false);
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          number(v);
        } else {
          fail(std::string("unexpected '") + describe(c) + "', expected a value");
        }
    }
    return v;
  }

  void literal(const std::string& word, Value& v, Value::Type t, bool b) {
    if (n_ - pos_ < word.size() || word.compare(0, word.size(), p_ + pos_, word.size()) != 0) {
      fail("invalid literal, expected '" + word + "'");
    }
    pos_ += word.size();
    v.type_ = t;
    v.bool_ = b;
  }

  void object(Value& v, int depth) {
    v.type_ = Value::Type::kObject;
    ++pos_;  // '{'
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') {
        if (at_end()) fail("unexpected end of input, expected a key string");
        fail(std::string("expected a key string, found '") + describe(peek()) + "'");
      }
      const size_t key_pos = pos_;
      std::string key = string();
      for (const auto& kv : v.object_) {
        if (kv.first == key) {
          pos_ = key_pos;
          fail("duplicate key \"" + key + "\"");
        }
      }
      skip_ws();
      expect(':', "':'");
      skip_ws();
      Value member = value(depth + 1);
      v.object_.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "',' or '}'");
      return;
    }
  }

  void array(Value& v, int depth) {
    v.type_ = Value::Type::kArray;
    ++pos_;  // '['
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      v.array_.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "',' or ']'");
      return;
    }
  }

  uint32_t hex4() {
    if (n_ - pos_ < 4) fail("unexpected end of input in a \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = p_[pos_];
      uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        fail("invalid hex digit in a \\u escape");
      }
      cp = cp * 16 + d;
      ++pos_;
    }
    return cp;
  }

  std::string string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const char c = p_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string (it must be escaped)");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      const size_t esc_pos = pos_;
      ++pos_;
      if (at_end()) fail("unterminated escape");
      const char e = p_[pos_];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          ++pos_;
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low one must follow
            if (n_ - pos_ < 6 || p_[pos_] != '\\' || p_[pos_ + 1] != 'u') {
              pos_ = esc_pos;
              fail("high surrogate \\u escape without its low surrogate");
            }
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) {
              pos_ = esc_pos;
              fail("high surrogate \\u escape without its low surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            pos_ = esc_pos;
            fail("lone low surrogate \\u escape");
          }
          append_utf8(out, cp);
          continue;  // pos_ is past the escape already
        }
        default:
          fail(std::string("invalid escape '\\") + describe(e) + "'");
      }
      ++pos_;
    }
  }

  void number(Value& v) {
    const size_t start = pos_;
    bool is_int = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (digit()) fail("leading zero in a number");
    } else if (digit()) {
      while (digit()) ++pos_;
    } else {
      fail("expected a digit");
    }
    if (peek() == '.') {
      is_int = false;
      ++pos_;
      if (!digit()) fail("expected a digit after '.'");
      while (digit()) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      is_int = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digit()) fail("expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    const std::string text(p_ + start, pos_ - start);
    v.type_ = Value::Type::kNumber;
    v.number_ = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v.number_)) {
      pos_ = start;
      fail("number out of range");
    }
    if (is_int) {
      errno = 0;
      const long long i = std::strtoll(text.c_str(), nullptr, 10);
      if (errno != ERANGE) {
        v.is_int_ = true;
        v.int_ = i;
      }
    }
  }
};

bool Value::as_bool() const {
  if (type_ != Type::kBool) type_error(Type::kBool, type_);
  return bool_;
}
double Value::as_double() const {
  if (type_ != Type::kNumber) type_error(Type::kNumber, type_);
  return number_;
}
int64_t Value::as_int() const {
  if (type_ != Type::kNumber) type_error(Type::kNumber, type_);
  if (!is_int_) throw std::invalid_argument("JSON: expected an integer, got " + dump());
  return int_;
}
const std::string& Value::as_string() const {
  if (type_ != Type::kString) type_error(Type::kString, type_);
  return string_;
}
const std::vector<Value>& Value::as_array() const {
  if (type_ != Type::kArray) type_error(Type::kArray, type_);
  return array_;
}
const std::vector<std::pair<std::string, Value>>& Value::as_object() const {
  if (type_ != Type::kObject) type_error(Type::kObject, type_);
  return object_;
}
const Value* Value::find(const std::string& key) const {
  for (const auto& kv : as_object()) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

const char* Value::type_name(Type t) {
  switch (t) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

std::string Value::dump(size_t max_chars) const {
  std::string out;
  dump_to(out, *this, max_chars);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

Value parse(const char* data, size_t size) { return Parser(data, size).document(); }
Value parse(const std::string& text) { return parse(text.data(), text.size()); }

}  // namespace serving::json
