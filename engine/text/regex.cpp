#include "engine/text/regex.h"

#include "engine/text/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace shardscope::text {

struct Regex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

namespace {

// One JIT stack and match data per thread: the defaults (32 KiB) are too small for long runs of
// whitespace under `\s+(?!\S)`.
struct ThreadMatcher {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
    ThreadMatcher() { pcre2_jit_stack_assign(context, nullptr, stack); }
    ~ThreadMatcher()
    {
        pcre2_match_data_free(data);
        pcre2_match_context_free(context);
        pcre2_jit_stack_free(stack);
    }
    ThreadMatcher(const ThreadMatcher&) = delete;
    ThreadMatcher& operator=(const ThreadMatcher&) = delete;
};

ThreadMatcher& threadMatcher()
{
    thread_local ThreadMatcher matcher;
    return matcher;
}

std::string pcreMessage(int code)
{
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(code, buffer, sizeof buffer);
    return reinterpret_cast<const char*>(buffer);
}

} // namespace

std::string withOnigurumaWhitespace(const std::string& pattern)
{
    std::string out;
    bool inClass = false;
    std::size_t classBody = 0; // where the class's members start in `out` (a `]` there is a member)
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[++i];
            if (e == 's')
                out += inClass ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (e == 'S' && !inClass)
                out += "[^\\s\\x{85}]";
            else
                out += {'\\', e};
            continue;
        }
        out += c;
        if (c == '[' && !inClass) {
            inClass = true;
            if (i + 1 < pattern.size() && pattern[i + 1] == '^')
                out += pattern[++i];
            classBody = out.size();
        } else if (c == ']' && inClass && out.size() - 1 > classBody) {
            inClass = false;
        }
    }
    return out;
}

Result<Regex> Regex::compile(const std::string& pattern, bool literal)
{
    const std::string source = literal ? pattern : withOnigurumaWhitespace(pattern);
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    // PCRE2_LITERAL admits no UCP (nothing in a literal depends on it).
    const std::uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &errorCode,
                                     &errorOffset, nullptr);
    if (!code)
        return makeError("the regular expression '" + pattern + "' does not compile: " + pcreMessage(errorCode) + " (at offset "
                             + std::to_string(errorOffset) + ")",
                         ErrorKind::BadValue);
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // without JIT it still works, only slower
    Regex regex;
    auto owned = std::make_shared<Code>();
    owned->code = code;
    regex.m_code = std::move(owned);
    regex.m_pattern = pattern;
    return regex;
}

bool Regex::find(std::string_view text, std::size_t from, Match& match) const
{
    ThreadMatcher& matcher = threadMatcher();
    const int rc = pcre2_match(m_code->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, PCRE2_NO_UTF_CHECK,
                               matcher.data, matcher.context);
    if (rc == PCRE2_ERROR_NOMATCH)
        return false;
    if (rc < 0)
        throw std::runtime_error("regular expression '" + m_pattern + "' failed on a text of " + std::to_string(text.size())
                                 + " bytes: " + pcreMessage(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(matcher.data);
    match = {ovector[0], ovector[1]};
    return true;
}

void Regex::forEachMatch(std::string_view text, const std::function<void(Match)>& onMatch) const
{
    std::size_t from = 0;
    Match match;
    while (from <= text.size() && find(text, from, match)) {
        onMatch(match);
        if (match.end > match.start)
            from = match.end;
        else if (match.end < text.size())
            from = match.end + utf8Length(static_cast<unsigned char>(text[match.end]));
        else
            break;
    }
}

} // namespace shardscope::text
