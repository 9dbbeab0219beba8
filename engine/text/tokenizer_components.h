#pragma once

// The pipeline stages of a tokenizer.json, each read from its JSON object (internal to
// tokenizer.cpp; the tests reach them through Tokenizer). Each follows the `tokenizers` source
// file named beside it; the behaviour, not the offsets bookkeeping, is what is kept.

#include "engine/common/result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardscope::text {

// A piece of the input on its way through the pipeline: text not yet tokenized, or an added token
// already found (token >= 0).
struct Piece {
    std::string text;
    bool atInputStart = false; // begins at offset 0 of the original input (Metaspace's "first")
    std::int32_t token = -1;
};

using Normalizer = std::function<void(std::string&)>;
// Splits one piece into the pieces that replace it (empty ones are dropped by the caller).
using PreTokenizer = std::function<void(Piece&&, std::vector<Piece>&)>;
// decode_chain: tokens in, tokens out; the tokenizer joins the last stage's output.
using Decoder = std::function<void(std::vector<std::string>&)>;

// `where` is the place in tokenizer.json ("normalizer", "pre_tokenizer.pretokenizers[1]") for
// messages; a null JSON value gives an empty function (no stage).
Result<Normalizer> parseNormalizer(const nlohmann::json& value, const std::string& where);
Result<PreTokenizer> parsePreTokenizer(const nlohmann::json& value, const std::string& where);
Result<Decoder> parseDecoder(const nlohmann::json& value, const std::string& where);

// The post-processor as a template of a single sequence: what goes before and after it.
struct SingleTemplate {
    std::vector<std::int32_t> before;
    std::vector<std::int32_t> after;
};
Result<SingleTemplate> parsePostProcessor(const nlohmann::json& value, const std::string& where);

// The byte-level alphabet of GPT-2 (pre_tokenizers/byte_level.rs bytes_char): byte -> its
// character, UTF-8 encoded.
const std::string& byteLevelChar(unsigned char byte);
// The inverse, for one UTF-8 character; -1 when it is not in the alphabet.
int byteOfByteLevelChar(std::string_view character);

} // namespace shardscope::text
