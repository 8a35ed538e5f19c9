// ByteTokenizer: UTF-8 text round-trips through byte ids; the special ids and ids past the byte
// range print as documented.
#include <string>
#include <vector>

#include "catch_compat.h"
#include "tokenizer.h"

using serving::ByteTokenizer;

TEST_CASE("tokenizer: UTF-8 text round-trips byte for byte", "[day11][model][tokenizer]") {
  const ByteTokenizer tok;
  for (const std::string& text : {std::string("Hello, world!"), std::string("注意力机制 ⚡ café 😀"),
                                  std::string("tabs\tand\nnewlines"), std::string(), std::string("\0\xff\x80", 3)}) {
    const std::vector<int32_t> ids = tok.encode(text);
    REQUIRE(ids.size() == text.size());  // one id per byte: 注 is three ids
    for (size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == static_cast<unsigned char>(text[i]));
    CHECK(tok.decode(ids) == text);
    const std::vector<int32_t> with_bos = tok.encode(text, true);
    REQUIRE(with_bos.size() == text.size() + 1);
    CHECK(with_bos[0] == ByteTokenizer::kBos);
    CHECK(tok.decode(with_bos) == text);
  }
  CHECK(tok.encode("\xE4\xB8\xAD") == std::vector<int32_t>{0xE4, 0xB8, 0xAD});
}

TEST_CASE("tokenizer: special and out-of-range ids", "[day11][model][tokenizer]") {
  const ByteTokenizer tok;
  CHECK(ByteTokenizer::kBos == 256);
  CHECK(ByteTokenizer::kEos == 257);
  CHECK(ByteTokenizer::kVocabSize == 258);
  const std::vector<int32_t> ids = {256, 'h', 'i', 300, 257, -1};
  CHECK(tok.decode(ids) == "hi<300><-1>");
  CHECK(tok.decode(ids, false) == "<s>hi<300></s><-1>");
  CHECK(tok.decode_one(258) == "<258>");
  CHECK(tok.decode_one(255) == "\xff");
}
