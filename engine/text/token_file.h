#pragma once

// Token files: a corpus already tokenized, memory-mapped, read by the engine's datasets. Three
// layouts are read:
//   - Shardscope's (what `shardscope data prepare` writes): flat little-endian uint16 or uint32
//     ids in F, a sidecar F.json {"format": "shardscope.tokens", "version": 1, "dtype", "tokens",
//     "documents", "vocab_size", "eos_id", "tokenizer"} and the documents' end offsets (uint64,
//     in tokens) in F.idx;
//   - llm.c's: a 256 x int32 header (magic 20240520, version 1: uint16, 2: uint32, token count);
//   - nanoGPT's: bare ids with no header, when the caller says the dtype (`data.token_dtype`).
// Documents are already joined with EOS in every layout.

#include "engine/common/result.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::text {

enum class TokenDtype { UInt16, UInt32 };
const char* tokenDtypeName(TokenDtype dtype); // "uint16", "uint32"
std::optional<TokenDtype> parseTokenDtype(const std::string& name);
std::size_t tokenDtypeBytes(TokenDtype dtype);
TokenDtype tokenDtypeFor(std::int64_t idBound); // uint16 when every id fits

enum class TokenFileLayout { Shardscope, LlmC, Bare };

struct TokenFileInfo {
    TokenFileLayout layout = TokenFileLayout::Shardscope;
    TokenDtype dtype = TokenDtype::UInt16;
    std::int64_t tokens = 0;
    std::int64_t documents = 0; // 0 when unknown (llm.c, bare)
    std::int64_t vocabSize = 0; // 0 when unknown
    std::optional<std::int32_t> eosId;
    std::string tokenizer; // the tokenizer folder it was made with, as given then
};

class TokenFile {
public:
    // `dtype`: for a bare file (no sidecar, no llm.c header); ignored otherwise unless it differs,
    // which is an error. Errors name the file and how to fix it.
    static Result<TokenFile> open(const std::string& path, std::optional<TokenDtype> dtype = std::nullopt);
    // Ids held in memory (a corpus tokenized when the run starts), read like a mapped file; `name`
    // is what path() answers.
    static TokenFile fromIds(std::vector<std::uint32_t> ids, std::string name, TokenFileInfo info);

    const TokenFileInfo& info() const { return m_info; }
    std::int64_t size() const { return m_info.tokens; }
    // Copies ids [start, start + count) widened to int64.
    void read(std::int64_t start, std::int64_t count, std::int64_t* out) const;
    std::uint32_t at(std::int64_t i) const;
    // The largest id in the file (a full scan, memory-mapped).
    std::uint32_t maxId() const;
    // The documents' end offsets (F.idx), empty when the layout has none.
    std::vector<std::int64_t> documentEnds() const;
    const std::string& path() const { return m_path; }

private:
    struct Mapping;
    std::shared_ptr<const Mapping> m_map;
    const unsigned char* m_data = nullptr; // the first id
    TokenFileInfo m_info;
    std::string m_path;
};

// Writes a Shardscope token file under a temporary name and moves it (and its sidecars) into
// place only on commit(): a failed or interrupted preparation leaves nothing under the final
// name. An existing file is not replaced unless `overwrite`.
class TokenFileWriter {
public:
    static Result<TokenFileWriter> create(const std::string& path, TokenDtype dtype, bool overwrite);
    ~TokenFileWriter(); // removes the temporary files unless committed
    TokenFileWriter(TokenFileWriter&&) noexcept;
    TokenFileWriter& operator=(TokenFileWriter&&) = delete;

    // One document's ids (already ending with EOS).
    Result<void> appendDocument(const std::vector<std::int32_t>& ids);
    Result<void> commit(TokenFileInfo info); // info.dtype/tokens/documents are filled in here
    std::int64_t tokens() const { return m_tokens; }
    std::int64_t documents() const { return static_cast<std::int64_t>(m_ends.size()); }

private:
    TokenFileWriter() = default;
    std::string m_path, m_partial;
    TokenDtype m_dtype = TokenDtype::UInt16;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> m_file{nullptr, &std::fclose};
    std::vector<std::int64_t> m_ends;
    std::int64_t m_tokens = 0;
    bool m_committed = false;
    std::vector<unsigned char> m_buffer;
};

} // namespace shardscope::text
