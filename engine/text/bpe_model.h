#pragma once

// The BPE model of Hugging Face `tokenizers` (models/bpe): a vocabulary, ranked merges, and the
// merge loop of its word.rs (the lowest-ranked pair first, the leftmost among equals), with
// byte fallback (<0xNN> tokens for characters not in the vocabulary, Llama 2 and Mistral), unknown
// token fusing, and ignore_merges (a whole piece found in the vocabulary is one token, Llama 3).

#include "engine/common/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardscope::text {

struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
    std::optional<std::string> unkToken;
    std::string continuingSubwordPrefix;
    std::string endOfWordSuffix;
    bool fuseUnk = false;
    bool byteFallback = false;
    bool ignoreMerges = false;
};

class BpeModel {
public:
    // Errors name the merge whose parts (or result) are not in the vocabulary.
    static Result<BpeModel> make(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                 BpeOptions options);

    // Appends the ids of one pre-tokenized piece (already in the model's alphabet: byte-level
    // characters, or "▁"-joined text) to `out`.
    void tokenize(std::string_view piece, std::vector<std::int32_t>& out) const;

    std::optional<std::int32_t> idOf(std::string_view token) const;
    // The token of `id`, or nullptr when the vocabulary has no such id.
    const std::string* tokenOf(std::int32_t id) const;
    std::int32_t idBound() const { return static_cast<std::int32_t>(m_tokens.size()); } // max id + 1

private:
    struct MergeRule {
        std::uint32_t rank;
        std::int32_t newId;
    };
    static std::uint64_t pairKey(std::int32_t a, std::int32_t b)
    {
        return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }
    void mergeWord(std::string_view piece, std::vector<std::int32_t>& out) const;
    void initialSymbols(std::string_view piece, std::vector<std::int32_t>& ids) const;

    TokenIds m_vocab;
    std::vector<std::string> m_tokens; // by id (holes stay empty)
    std::vector<bool> m_hasId;
    std::unordered_map<std::uint64_t, MergeRule> m_merges;
    BpeOptions m_options;
    std::optional<std::int32_t> m_unkId;
    std::uint64_t m_serial = 0; // tells this model's per-thread cache from other models'
};

} // namespace shardscope::text
