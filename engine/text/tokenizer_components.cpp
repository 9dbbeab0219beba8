#include "engine/text/tokenizer_components.h"

#include "engine/text/bpe_model.h"
#include "engine/text/regex.h"
#include "engine/text/unicode.h"

#include <nlohmann/json.hpp>

#include <array>
#include <memory>
#include <unordered_map>

namespace shardscope::text {

using nlohmann::json;

namespace {

Error unsupported(const std::string& where, const std::string& what)
{
    return makeError(where + ": " + what
                         + " is not supported by Shardscope's tokenizer (it implements the BPE tokenizers of GPT-2, "
                           "Llama, Mistral and Qwen2); use a tokenizer of those families",
                     ErrorKind::BadValue);
}

Error badValue(const std::string& where, const std::string& what) { return makeError(where + ": " + what, ErrorKind::BadValue); }

std::string typeOf(const json& value)
{
    const auto it = value.find("type");
    return it != value.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const json& value, const char* key, bool fallback)
{
    const auto it = value.find(key);
    return it != value.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string text(const json& value, const char* key, const std::string& fallback = {})
{
    const auto it = value.find(key);
    return it != value.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A pattern of Split and Replace: {"String": "..."} or {"Regex": "..."}.
Result<std::shared_ptr<const Regex>> patternOf(const json& value, const std::string& where)
{
    const auto pattern = value.find("pattern");
    if (pattern == value.end() || !pattern->is_object())
        return badValue(where, "has no pattern");
    const bool literal = pattern->contains("String");
    const auto source = pattern->find(literal ? "String" : "Regex");
    if (source == pattern->end() || !source->is_string())
        return badValue(where + ".pattern", "must be {\"String\": ...} or {\"Regex\": ...}");
    auto regex = Regex::compile(source->get<std::string>(), literal);
    if (!regex)
        return badValue(where + ".pattern", regex.error().message);
    return std::make_shared<const Regex>(std::move(*regex));
}

// Pattern::find_matches (tokenizer/pattern.rs): the text cut into matches and the gaps between
// them, in order, covering all of it.
struct Span {
    std::size_t start, end;
    bool isMatch;
};
std::vector<Span> matchSpans(const Regex& regex, std::string_view s)
{
    std::vector<Span> spans;
    if (s.empty())
        return {{0, 0, false}};
    std::size_t previous = 0;
    regex.forEachMatch(s, [&](Match m) {
        if (previous != m.start)
            spans.push_back({previous, m.start, false});
        spans.push_back({m.start, m.end, true});
        previous = m.end;
    });
    if (previous != s.size())
        spans.push_back({previous, s.size(), false});
    return spans;
}

std::string replaceAll(const Regex& regex, std::string_view s, const std::string& content)
{
    std::string out;
    for (const Span& span : matchSpans(regex, s))
        out += span.isMatch ? std::string_view(content) : s.substr(span.start, span.end - span.start);
    return out;
}

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Result<SplitBehavior> behaviorOf(const std::string& name, const std::string& where)
{
    static const std::unordered_map<std::string, SplitBehavior> names = {
        {"Removed", SplitBehavior::Removed},
        {"Isolated", SplitBehavior::Isolated},
        {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
        {"MergedWithNext", SplitBehavior::MergedWithNext},
        {"Contiguous", SplitBehavior::Contiguous}};
    const auto it = names.find(name);
    if (it == names.end())
        return badValue(where + ".behavior", "'" + name
                                                 + "' is not a split behavior (Removed, Isolated, MergedWithPrevious, "
                                                   "MergedWithNext, Contiguous)");
    return it->second;
}

// NormalizedString::split (tokenizer/normalizer.rs): how matches join their neighbours.
void splitPiece(Piece&& piece, const Regex& regex, SplitBehavior behavior, bool invert, std::vector<Piece>& out)
{
    std::vector<Span> spans = matchSpans(regex, piece.text);
    if (invert)
        for (Span& span : spans)
            span.isMatch = !span.isMatch;
    struct Cut {
        std::size_t start, end;
        bool remove;
    };
    std::vector<Cut> cuts;
    bool previousMatch = false;
    switch (behavior) {
    case SplitBehavior::Isolated:
        for (const Span& s : spans)
            cuts.push_back({s.start, s.end, false});
        break;
    case SplitBehavior::Removed:
        for (const Span& s : spans)
            cuts.push_back({s.start, s.end, s.isMatch});
        break;
    case SplitBehavior::Contiguous:
        for (const Span& s : spans) {
            if (s.isMatch == previousMatch && !cuts.empty())
                cuts.back().end = s.end;
            else
                cuts.push_back({s.start, s.end, false});
            previousMatch = s.isMatch;
        }
        break;
    case SplitBehavior::MergedWithPrevious:
        for (const Span& s : spans) {
            if (s.isMatch && !previousMatch && !cuts.empty())
                cuts.back().end = s.end;
            else
                cuts.push_back({s.start, s.end, false});
            previousMatch = s.isMatch;
        }
        break;
    case SplitBehavior::MergedWithNext:
        for (auto s = spans.rbegin(); s != spans.rend(); ++s) {
            if (s->isMatch && !previousMatch && !cuts.empty())
                cuts.back().start = s->start;
            else
                cuts.push_back({s->start, s->end, false});
            previousMatch = s->isMatch;
        }
        std::reverse(cuts.begin(), cuts.end());
        break;
    }
    for (const Cut& cut : cuts) {
        if (cut.remove || cut.end == cut.start)
            continue;
        out.push_back({piece.text.substr(cut.start, cut.end - cut.start), piece.atInputStart && cut.start == 0, -1});
    }
}

const Regex& gpt2Pattern()
{
    static const Regex regex = *Regex::compile(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                                               false);
    return regex;
}

const Regex& whitespaceAtStart()
{
    static const Regex regex = *Regex::compile(R"(^\s+)", false);
    return regex;
}
const Regex& whitespaceAtEnd()
{
    static const Regex regex = *Regex::compile(R"(\s+$)", false);
    return regex;
}

std::string toByteLevel(std::string_view s)
{
    std::string out;
    out.reserve(s.size() * 2);
    for (const char c : s)
        out += byteLevelChar(static_cast<unsigned char>(c));
    return out;
}

// Metaspace's prepend_scheme, also from the older add_prefix_space flag.
enum class Prepend { Always, First, Never };
Result<Prepend> prependSchemeOf(const json& value, const std::string& where)
{
    if (!value.contains("prepend_scheme"))
        return flag(value, "add_prefix_space", true) ? Prepend::Always : Prepend::Never;
    const std::string scheme = text(value, "prepend_scheme");
    if (scheme == "always")
        return Prepend::Always;
    if (scheme == "first")
        return Prepend::First;
    if (scheme == "never")
        return Prepend::Never;
    return badValue(where + ".prepend_scheme", "'" + scheme + "' is not one of always, first, never");
}

Result<std::string> replacementOf(const json& value, const std::string& where)
{
    std::string replacement = text(value, "replacement", "\xE2\x96\x81");
    if (replacement.empty() || utf8Length(static_cast<unsigned char>(replacement[0])) != replacement.size())
        return badValue(where + ".replacement", "must be one character");
    return replacement;
}

} // namespace

const std::string& byteLevelChar(unsigned char byte)
{
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        const auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const char32_t c = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
            appendUtf8(t[static_cast<std::size_t>(b)], c);
        }
        return t;
    }();
    return table[byte];
}

int byteOfByteLevelChar(std::string_view character)
{
    // Heterogeneous lookup: no std::string made per decoded character.
    static const std::unordered_map<std::string, int, StringHash, std::equal_to<>> inverse = [] {
        std::unordered_map<std::string, int, StringHash, std::equal_to<>> m;
        for (int b = 0; b < 256; ++b)
            m.emplace(byteLevelChar(static_cast<unsigned char>(b)), b);
        return m;
    }();
    const auto it = inverse.find(character);
    return it == inverse.end() ? -1 : it->second;
}

// A Sequence's stages (`key`: "normalizers", "pretokenizers", "decoders"), each parsed with
// `parse`; stages that do nothing (an empty function) are left out.
template <typename Stage, typename Parse>
Result<std::vector<Stage>> parseStages(const json& value, const char* key, const std::string& where, Parse parse)
{
    std::vector<Stage> stages;
    const json& list = value.contains(key) ? value[key] : json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        auto stage = parse(list[i], where + "." + key + "[" + std::to_string(i) + "]");
        if (!stage)
            return stage.error();
        if (*stage)
            stages.push_back(std::move(*stage));
    }
    return stages;
}

Result<Normalizer> parseNormalizer(const json& value, const std::string& where)
{
    if (value.is_null())
        return Normalizer{};
    const std::string type = typeOf(value);
    if (type == "Sequence") {
        auto parsed = parseStages<Normalizer>(value, "normalizers", where, parseNormalizer);
        if (!parsed)
            return parsed.error();
        return Normalizer{[stages = std::move(*parsed)](std::string& s) {
            for (const auto& stage : stages)
                stage(s);
        }};
    }
    if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
        const NormalForm form = type == "NFC"    ? NormalForm::Nfc
                                : type == "NFD"  ? NormalForm::Nfd
                                : type == "NFKC" ? NormalForm::Nfkc
                                                 : NormalForm::Nfkd;
        return Normalizer{[form](std::string& s) { s = normalizeUnicode(s, form); }};
    }
    if (type == "Lowercase")
        return Normalizer{[](std::string& s) { s = lowercaseUnicode(s); }};
    if (type == "Prepend") {
        const std::string prepend = text(value, "prepend");
        return Normalizer{[prepend](std::string& s) {
            if (!s.empty())
                s.insert(0, prepend);
        }};
    }
    if (type == "Replace") {
        auto pattern = patternOf(value, where);
        if (!pattern)
            return pattern.error();
        return Normalizer{
            [regex = *pattern, content = text(value, "content")](std::string& s) { s = replaceAll(*regex, s, content); }};
    }
    if (type == "Strip") {
        const bool left = flag(value, "strip_left", true), right = flag(value, "strip_right", true);
        return Normalizer{[left, right](std::string& s) {
            Match m;
            if (right && whitespaceAtEnd().find(s, 0, m))
                s.erase(m.start);
            if (left && whitespaceAtStart().find(s, 0, m))
                s.erase(0, m.end);
        }};
    }
    return unsupported(where, "the normalizer '" + type + "'");
}

Result<PreTokenizer> parsePreTokenizer(const json& value, const std::string& where)
{
    if (value.is_null())
        return PreTokenizer{};
    const std::string type = typeOf(value);
    if (type == "Sequence") {
        auto parsed = parseStages<PreTokenizer>(value, "pretokenizers", where, parsePreTokenizer);
        if (!parsed)
            return parsed.error();
        return PreTokenizer{[stages = std::move(*parsed)](Piece&& piece, std::vector<Piece>& out) {
            std::vector<Piece> current{std::move(piece)}, next;
            for (const auto& stage : stages) {
                next.clear();
                for (Piece& p : current)
                    stage(std::move(p), next);
                current.swap(next);
            }
            for (Piece& p : current)
                out.push_back(std::move(p));
        }};
    }
    if (type == "ByteLevel") {
        const bool addPrefixSpace = flag(value, "add_prefix_space", true);
        const bool useRegex = flag(value, "use_regex", true);
        return PreTokenizer{[addPrefixSpace, useRegex](Piece&& piece, std::vector<Piece>& out) {
            if (addPrefixSpace && !startsWith(piece.text, " "))
                piece.text.insert(0, " ");
            const std::size_t first = out.size();
            if (useRegex)
                splitPiece(std::move(piece), gpt2Pattern(), SplitBehavior::Isolated, false, out);
            else if (!piece.text.empty())
                out.push_back(std::move(piece));
            for (std::size_t i = first; i < out.size(); ++i)
                out[i].text = toByteLevel(out[i].text);
        }};
    }
    if (type == "Split") {
        auto pattern = patternOf(value, where);
        if (!pattern)
            return pattern.error();
        auto behavior = behaviorOf(text(value, "behavior"), where);
        if (!behavior)
            return behavior.error();
        return PreTokenizer{[regex = *pattern, behavior = *behavior,
                             invert = flag(value, "invert", false)](Piece&& piece, std::vector<Piece>& out) {
            splitPiece(std::move(piece), *regex, behavior, invert, out);
        }};
    }
    if (type == "Metaspace") {
        auto replacement = replacementOf(value, where);
        if (!replacement)
            return replacement.error();
        auto scheme = prependSchemeOf(value, where);
        if (!scheme)
            return scheme.error();
        auto space = Regex::compile(" ", true);
        auto marker = Regex::compile(*replacement, true);
        return PreTokenizer{[rep = *replacement, scheme = *scheme, split = flag(value, "split", true),
                             space = std::make_shared<const Regex>(std::move(*space)),
                             marker = std::make_shared<const Regex>(std::move(*marker))](Piece&& piece, std::vector<Piece>& out) {
            piece.text = replaceAll(*space, piece.text, rep);
            const bool prepend = !startsWith(piece.text, rep)
                                 && (scheme == Prepend::Always || (scheme == Prepend::First && piece.atInputStart));
            if (prepend)
                piece.text.insert(0, rep);
            if (split)
                splitPiece(std::move(piece), *marker, SplitBehavior::MergedWithNext, false, out);
            else if (!piece.text.empty())
                out.push_back(std::move(piece));
        }};
    }
    if (type == "Digits") {
        const bool individual = flag(value, "individual_digits", false);
        auto digit = Regex::compile(R"(\p{N})", false);
        return PreTokenizer{[individual, digit = std::make_shared<const Regex>(std::move(*digit))](Piece&& piece,
                                                                                                   std::vector<Piece>& out) {
            splitPiece(std::move(piece), *digit, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false, out);
        }};
    }
    return unsupported(where, "the pre-tokenizer '" + type + "'");
}

namespace {

Result<Decoder> parseSimpleDecoder(const json& value, const std::string& type, const std::string& where)
{
    if (type == "ByteLevel")
        return Decoder{[](std::vector<std::string>& tokens) {
            std::string bytes;
            for (const std::string& token : tokens) {
                std::string mapped;
                bool all = true;
                for (std::size_t i = 0; i < token.size() && all;) {
                    const std::size_t n = std::min(utf8Length(static_cast<unsigned char>(token[i])), token.size() - i);
                    const int b = byteOfByteLevelChar(std::string_view(token).substr(i, n));
                    all = b >= 0;
                    mapped += static_cast<char>(b);
                    i += n;
                }
                bytes += all ? mapped : token;
            }
            tokens = {utf8Lossy(bytes)};
        }};
    if (type == "Fuse")
        return Decoder{[](std::vector<std::string>& tokens) {
            std::string joined;
            for (const std::string& t : tokens)
                joined += t;
            tokens = {joined};
        }};
    if (type == "ByteFallback")
        return Decoder{[](std::vector<std::string>& tokens) {
            std::vector<std::string> result;
            std::string bytes;
            const auto flush = [&] {
                if (bytes.empty())
                    return;
                if (!firstInvalidUtf8(bytes))
                    result.push_back(bytes);
                else
                    for (std::size_t i = 0; i < bytes.size(); ++i)
                        result.emplace_back("\xEF\xBF\xBD");
                bytes.clear();
            };
            for (std::string& token : tokens) {
                const bool isByte = token.size() == 6 && startsWith(token, "<0x") && token.back() == '>'
                                    && std::isxdigit(static_cast<unsigned char>(token[3]))
                                    && std::isxdigit(static_cast<unsigned char>(token[4]));
                if (isByte) {
                    bytes += static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16));
                } else {
                    flush();
                    result.push_back(std::move(token));
                }
            }
            flush();
            tokens = std::move(result);
        }};
    if (type == "Strip") {
        const std::string content = text(value, "content", " ");
        const auto start = value.value("start", std::size_t{0}), stop = value.value("stop", std::size_t{0});
        if (content.size() != 1)
            return unsupported(where + ".content", "a Strip decoder of a character that is not ASCII");
        return Decoder{[c = content[0], start, stop](std::vector<std::string>& tokens) {
            // On characters, as decoders/strip.rs; the content is ASCII, so bytes are characters.
            for (std::string& token : tokens) {
                std::size_t cutStart = 0;
                while (cutStart < start && cutStart < token.size() && token[cutStart] == c)
                    ++cutStart;
                std::size_t cutStop = token.size();
                for (std::size_t i = 0; i < stop && cutStop > cutStart && token[cutStop - 1] == c; ++i)
                    --cutStop;
                token = token.substr(cutStart, cutStop - cutStart);
            }
        }};
    }
    return unsupported(where, "the decoder '" + type + "'");
}

} // namespace

Result<Decoder> parseDecoder(const json& value, const std::string& where)
{
    if (value.is_null())
        return Decoder{};
    const std::string type = typeOf(value);
    if (type == "Sequence") {
        auto parsed = parseStages<Decoder>(value, "decoders", where, parseDecoder);
        if (!parsed)
            return parsed.error();
        return Decoder{[stages = std::move(*parsed)](std::vector<std::string>& tokens) {
            for (const auto& stage : stages)
                stage(tokens);
        }};
    }
    if (type == "Replace") {
        auto pattern = patternOf(value, where);
        if (!pattern)
            return pattern.error();
        return Decoder{[regex = *pattern, content = text(value, "content")](std::vector<std::string>& tokens) {
            for (std::string& token : tokens)
                token = replaceAll(*regex, token, content);
        }};
    }
    if (type == "Metaspace") {
        auto replacement = replacementOf(value, where);
        if (!replacement)
            return replacement.error();
        auto scheme = prependSchemeOf(value, where);
        if (!scheme)
            return scheme.error();
        return Decoder{[rep = *replacement, scheme = *scheme](std::vector<std::string>& tokens) {
            // As decoders in metaspace.rs: in the first token every replacement character goes
            // (not only a leading one) unless the scheme is "never"; elsewhere each is a space.
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                std::string out;
                const std::string& token = tokens[i];
                for (std::size_t k = 0; k < token.size();) {
                    if (token.compare(k, rep.size(), rep) == 0) {
                        if (!(i == 0 && scheme != Prepend::Never))
                            out += ' ';
                        k += rep.size();
                    } else {
                        out += token[k++];
                    }
                }
                tokens[i] = std::move(out);
            }
        }};
    }
    return parseSimpleDecoder(value, type, where);
}

Result<SingleTemplate> parsePostProcessor(const json& value, const std::string& where)
{
    if (value.is_null())
        return SingleTemplate{};
    const std::string type = typeOf(value);
    if (type == "ByteLevel")
        return SingleTemplate{}; // offsets only
    if (type == "Sequence") {
        SingleTemplate combined;
        const json& list = value.contains("processors") ? value["processors"] : json::array();
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto inner = parsePostProcessor(list[i], where + ".processors[" + std::to_string(i) + "]");
            if (!inner)
                return inner.error();
            combined.before.insert(combined.before.begin(), inner->before.begin(), inner->before.end());
            combined.after.insert(combined.after.end(), inner->after.begin(), inner->after.end());
        }
        return combined;
    }
    if (type != "TemplateProcessing")
        return unsupported(where, "the post-processor '" + type + "'");
    SingleTemplate result;
    bool seenSequence = false;
    const json& single = value.contains("single") ? value["single"] : json::array();
    for (std::size_t i = 0; i < single.size(); ++i) {
        const json& item = single[i];
        if (item.contains("Sequence")) {
            seenSequence = true;
            continue;
        }
        const std::string id = item.contains("SpecialToken") ? text(item["SpecialToken"], "id") : std::string();
        const json& specials = value.contains("special_tokens") ? value["special_tokens"] : json::object();
        if (id.empty() || !specials.contains(id))
            return badValue(where + ".single[" + std::to_string(i) + "]", "names no special token of special_tokens");
        auto& side = seenSequence ? result.after : result.before;
        for (const json& tokenId : specials[id].value("ids", json::array()))
            side.push_back(tokenId.get<std::int32_t>());
    }
    return result;
}

} // namespace shardscope::text
