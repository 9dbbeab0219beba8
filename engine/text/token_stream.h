#pragma once

// The ids a run's language-modelling data is cut from (the recipe's data.type tokens): token files,
// memory-mapped, and text / JSON Lines corpora tokenized when the run starts, one after another in
// the order data.path names them. Each corpus document is encoded as `data prepare` encodes it
// (encodeDocument: the tokenizer's special tokens, then EOS), so a corpus and the token file
// prepared from it give the same stream.

#include "engine/common/result.h"
#include "engine/text/token_file.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::text {

class Tokenizer;

struct TokenSourceOptions {
    std::vector<std::string> paths;
    std::shared_ptr<const Tokenizer> tokenizer; // corpora need one
    std::string field = "text"; // JSON Lines: the field with the text
    std::optional<TokenDtype> tokenDtype; // bare token files
    int threads = 0; // for tokenizing corpora; 0: every core
};

// Corpora by extension: .jsonl, .ndjson, .json (JSON Lines) and .txt, .text, .md (one document a
// file); any other path is a token file.
bool isCorpusPath(const std::string& path);

class TokenStream {
public:
    static Result<TokenStream> open(const TokenSourceOptions& options);

    std::int64_t size() const { return m_size; }
    // Ids [start, start + count) of the whole stream, widened to int64.
    void read(std::int64_t start, std::int64_t count, std::int64_t* out) const;

    struct Highest {
        std::uint32_t id = 0;
        std::int64_t position = 0; // in its part
        std::string path;
    };
    // The largest id and where it first is (a full scan).
    Highest highestId() const;
    const std::vector<TokenFile>& parts() const { return m_parts; }

private:
    std::vector<TokenFile> m_parts;
    std::vector<std::int64_t> m_starts; // each part's first position in the stream
    std::int64_t m_size = 0;
};

} // namespace shardscope::text
