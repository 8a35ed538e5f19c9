// The byte-level tokenizer of the built-in random-weight models: token i < 256 is byte i, so any
// UTF-8 (or binary) string round-trips, and the model needs a vocabulary of at least 258.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace serving {

class ByteTokenizer {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kVocabSize = 258;

  // The bytes of `text` as ids 0..255, after a BOS when add_bos.
  std::vector<int32_t> encode(const std::string& text, bool add_bos = false) const;
  // The inverse: ids 0..255 become their bytes; BOS and EOS become nothing (skip_special) or
  // "<s>" and "</s>"; any other id (>= 258 or negative: a model with a larger vocabulary samples
  // them) prints as "<id>", e.g. "<300>".
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const;
  std::string decode_one(int32_t id, bool skip_special = true) const;
};

}  // namespace serving
