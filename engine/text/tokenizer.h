#pragma once

// A Hugging Face tokenizer (tokenizer.json, the `tokenizers` library's format) in C++, giving the
// same ids and the same decoded text as `tokenizers` 0.23 and transformers 5.23's
// AutoTokenizer. What it implements is what the decoder families use:
//   normalizers     NFC NFD NFKC NFKD Lowercase Prepend Replace Strip Sequence
//   pre-tokenizers  ByteLevel Split Metaspace Digits Sequence
//   model           BPE (byte fallback, fuse_unk, ignore_merges, subword prefix/suffix)
//   post-processors TemplateProcessing ByteLevel Sequence
//   decoders        ByteLevel Metaspace Replace ByteFallback Fuse Strip Sequence
// plus added and special tokens (lstrip, rstrip, single_word, normalized). Anything else is refused
// by load(), naming the component and where it is in the file: a tokenizer that loads encodes as
// `tokenizers` does (tests/tools/tokenizer_reference.py is the reference of tst_tokenizer).
//
// Torch-free and Qt-free: the data preparation, the engine's datasets and the workbench's sample
// preview all use it. encode() and decode() are const and may run on many threads at once.

#include "engine/common/result.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::text {

class Tokenizer {
public:
    // A model folder's tokenizer.json with its tokenizer_config.json (optional), read as
    // AutoTokenizer 5.23 reads them: tokenizer.json's post-processor decides what encode adds (the
    // config's add_bos_token / add_eos_token are dropped beside a tokenizer.json, as transformers
    // 5.23 drops them), and the config's bos_token / eos_token name the tokens documents are
    // joined with.
    static Result<Tokenizer> load(const std::string& folder);
    // tokenizer.json's text alone (as tokenizers.Tokenizer.from_str), and optionally the config's.
    // `source` names the file in messages.
    static Result<Tokenizer> fromJson(const std::string& tokenizerJson, const std::string& source,
                                      const std::string& configJson = {}, const std::string& configSource = {});

    // `text` must be valid UTF-8 (callers check; see firstInvalidUtf8). With addSpecialTokens the
    // post-processor's template adds its tokens (Llama's <s> or <|begin_of_text|>).
    std::vector<std::int32_t> encode(std::string_view text, bool addSpecialTokens = true) const;
    // As tokenizers' decode: ids without a token are skipped, and so are special tokens when
    // skipSpecialTokens is set.
    std::string decode(std::span<const std::int32_t> ids, bool skipSpecialTokens = false) const;

    // One more than the largest id of the vocabulary and the added tokens: a model's vocab_size
    // must be at least this.
    std::int32_t idBound() const;
    std::optional<std::int32_t> tokenToId(std::string_view token) const;
    std::optional<std::string> idToToken(std::int32_t id) const;
    std::optional<std::int32_t> bosId() const;
    std::optional<std::int32_t> eosId() const;
    // Where the tokenizer came from (the folder or file), for messages.
    const std::string& source() const;

    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

private:
    struct Impl;
    explicit Tokenizer(std::shared_ptr<const Impl> impl);
    std::shared_ptr<const Impl> m_impl;
};

} // namespace shardscope::text
