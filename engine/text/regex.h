#pragma once

// A compiled Unicode regular expression (PCRE2, JIT-compiled), written in the Oniguruma syntax
// that `tokenizers` uses for its split patterns. The difference that matters for those patterns is
// `\s`: Oniguruma's is Unicode's White_Space, which also has U+0085 (NEL) that PCRE2's lacks, so
// patterns are rewritten to include it.

#include "engine/common/result.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace shardscope::text {

struct Match {
    std::size_t start = 0;
    std::size_t end = 0;
};

class Regex {
public:
    // `literal`: the pattern is a plain string to find (tokenizers' String patterns).
    static Result<Regex> compile(const std::string& pattern, bool literal);

    // Calls `onMatch` for each non-overlapping match, left to right, as Rust's find_iter does (an
    // empty match advances by one character). `text` must be valid UTF-8.
    void forEachMatch(std::string_view text, const std::function<void(Match)>& onMatch) const;
    // The first match at or after `from`, if any.
    bool find(std::string_view text, std::size_t from, Match& match) const;

    const std::string& pattern() const { return m_pattern; }

private:
    struct Code;
    std::shared_ptr<const Code> m_code;
    std::string m_pattern;
};

// Oniguruma's `\s` / `\S` in PCRE2 terms (exposed for the tests).
std::string withOnigurumaWhitespace(const std::string& pattern);

} // namespace shardscope::text
