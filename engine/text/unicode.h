#pragma once

// UTF-8 helpers for the tokenizer, with the exact behaviour of the Rust library that Hugging Face's
// `tokenizers` is written in (decoding that must round-trip as it does), and Unicode normalization
// through utf8proc (no hand-written Unicode tables).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace shardscope::text {

// Rust's String::from_utf8_lossy: valid UTF-8 is kept, each maximal invalid subpart (Unicode's
// "substitution of maximal subparts") becomes one U+FFFD.
std::string utf8Lossy(std::string_view bytes);

// The byte offset of the first byte that is not part of valid UTF-8, or nullopt when all is valid.
std::optional<std::size_t> firstInvalidUtf8(std::string_view bytes);

// The length in bytes of the UTF-8 character starting with `lead` (1 for a stray continuation
// byte, so that a scan always advances).
inline std::size_t utf8Length(unsigned char lead)
{
    if (lead < 0xC0)
        return 1;
    if (lead < 0xE0)
        return 2;
    if (lead < 0xF0)
        return 3;
    return 4;
}

void appendUtf8(std::string& out, char32_t codepoint);

enum class NormalForm { Nfc, Nfd, Nfkc, Nfkd };
// `text` must be valid UTF-8.
std::string normalizeUnicode(std::string_view text, NormalForm form);
// Per-character lowercase (the simple case mapping).
std::string lowercaseUnicode(std::string_view text);

} // namespace shardscope::text
