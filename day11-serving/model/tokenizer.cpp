#include "tokenizer.h"

namespace serving {

std::vector<int32_t> ByteTokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + (add_bos ? 1 : 0));
  if (add_bos) ids.push_back(kBos);
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c));
  return ids;
}

std::string ByteTokenizer::decode_one(int32_t id, bool skip_special) const {
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
  if (id == kBos) return skip_special ? "" : "<s>";
  if (id == kEos) return skip_special ? "" : "</s>";
  return "<" + std::to_string(id) + ">";
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) out += decode_one(id, skip_special);
  return out;
}

}  // namespace serving
