#include "engine/config/yaml_io.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

// Note [PyYAML compatibility]
// Accelerate reads its files with PyYAML (YAML 1.1) and writes them with `yaml.safe_dump`.
// yaml-cpp is a YAML 1.2 parser, so it is used for structure only: every plain scalar is resolved
// here with PyYAML's own implicit resolvers (`NO` is false, `1e8` a string, `010` is 8,
// `1_000` is 1000), quoted scalars stay strings, duplicate keys keep the last value, `<<` merges.
// Before parsing, the text is checked like PyYAML's reader does (valid UTF-8, no control
// characters), so what PyYAML rejects is rejected here with a line and column.
// The writer is a port of the parts of PyYAML's emitter that safe_dump of a dict reaches:
// style choice (analyze_scalar/choose_scalar_style), plain, single- and double-quoted writers
// with their line folding at width 80, block mappings and indentless block sequences, `[]`/`{}`
// for empty collections, and the representers' spelling of null, bools, ints and floats.
// Known gaps, none of which occurs in configs: timestamps load as strings, !!binary/!!set/
// !!omap tags are rejected, integers beyond 64 bits are rejected, aliases are expanded.

namespace shardscope::config {

namespace {

constexpr int kMaxDepth = 64;

std::string where(const std::string& source, int line, int column)
{
    return source + ":" + std::to_string(line) + ":" + std::to_string(column);
}

// ---- UTF-8 -----------------------------------------------------------------------------------

// Decodes UTF-8; on failure returns false and the byte offset of the bad sequence.
bool decodeUtf8(std::string_view s, std::u32string& out, std::size_t& badOffset)
{
    out.clear();
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        char32_t cp = 0;
        int len = 0;
        if (c < 0x80) {
            cp = c;
            len = 1;
        } else if ((c >> 5) == 0x6) {
            cp = c & 0x1f;
            len = 2;
        } else if ((c >> 4) == 0xe) {
            cp = c & 0x0f;
            len = 3;
        } else if ((c >> 3) == 0x1e) {
            cp = c & 0x07;
            len = 4;
        } else {
            badOffset = i;
            return false;
        }
        if (i + len > s.size()) {
            badOffset = i;
            return false;
        }
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc >> 6) != 0x2) {
                badOffset = i;
                return false;
            }
            cp = (cp << 6) | (cc & 0x3f);
        }
        const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
        if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            badOffset = i;
            return false;
        }
        out.push_back(cp);
        i += len;
    }
    return true;
}

void appendUtf8(std::string& out, char32_t cp)
{
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xf0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

std::string toUtf8(const std::u32string& s)
{
    std::string out;
    for (char32_t c : s)
        appendUtf8(out, c);
    return out;
}

std::u32string fromUtf8Lenient(const std::string& s)
{
    std::u32string out;
    std::size_t bad = 0;
    if (!decodeUtf8(s, out, bad)) {
        out.clear();
        for (unsigned char c : s)
            out.push_back(c);
    }
    return out;
}

// PyYAML's Reader.NON_PRINTABLE complement.
bool pyyamlPrintable(char32_t c)
{
    return c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0x7e) || c == 0x85 || (c >= 0xa0 && c <= 0xd7ff)
        || (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);
}

void lineColumnOf(std::string_view text, std::size_t offset, int& line, int& column)
{
    line = 1;
    column = 1;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
            ++column;
        }
    }
}

Result<void> checkReadable(const std::string& text, const std::string& source)
{
    std::u32string decoded;
    std::size_t bad = 0;
    if (!decodeUtf8(text, decoded, bad)) {
        int line = 0, column = 0;
        lineColumnOf(text, bad, line, column);
        return makeError(where(source, line, column) + ": the file is not valid UTF-8 (byte 0x"
                         + [&] { char b[4]; std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(text[bad])); return std::string(b); }()
                         + "); save it as UTF-8 text");
    }
    int line = 1, column = 1;
    for (char32_t c : decoded) {
        if (!pyyamlPrintable(c)) {
            char b[16];
            std::snprintf(b, sizeof b, "#x%04x", static_cast<unsigned>(c));
            return makeError(where(source, line, column) + ": unacceptable character " + b
                             + ": special characters are not allowed in YAML; remove it");
        }
        if (c == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return {};
}

// yaml-cpp recurses once per nesting level; refuse absurd flow nesting before it can overflow
// the stack (mutated or hostile input), with the position of the offending bracket.
Result<void> checkNesting(const std::string& text, const std::string& source)
{
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '[' || c == '{') {
            if (++depth > kMaxDepth) {
                int line = 0, column = 0;
                lineColumnOf(text, i, line, column);
                return makeError(where(source, line, column) + ": nesting deeper than "
                                 + std::to_string(kMaxDepth) + " levels; a config file is never this deep");
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return {};
}

// ---- YAML 1.1 scalar resolution (PyYAML's Resolver) -------------------------------------------

const std::regex& floatRe()
{
    static const std::regex re(R"(^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$)");
    return re;
}

const std::regex& intRe()
{
    static const std::regex re(R"(^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$)");
    return re;
}

const std::regex& timestampRe()
{
    static const std::regex re(R"(^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$)");
    return re;
}

bool isOneOf(const std::string& s, std::initializer_list<const char*> words)
{
    return std::any_of(words.begin(), words.end(), [&](const char* w) { return s == w; });
}

bool contains(std::string_view set, char c) { return set.find(c) != std::string_view::npos; }

// Python's int() of a digit string in a base; false on overflow or bad digits.
bool parseIntBase(const std::string& digits, int base, std::int64_t& out)
{
    if (digits.empty())
        return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, base);
    if (errno == ERANGE || end != digits.c_str() + digits.size())
        return false;
    out = v;
    return true;
}

bool constructInt(std::string text, std::int64_t& out)
{
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (text.empty())
        return false;
    std::int64_t sign = 1;
    if (text[0] == '-')
        sign = -1;
    if (text[0] == '+' || text[0] == '-')
        text.erase(0, 1);
    if (text.empty())
        return false;
    std::int64_t v = 0;
    if (text == "0") {
        out = 0;
        return true;
    }
    if (text.rfind("0b", 0) == 0) {
        if (!parseIntBase(text.substr(2), 2, v))
            return false;
    } else if (text.rfind("0x", 0) == 0) {
        if (!parseIntBase(text.substr(2), 16, v))
            return false;
    } else if (text[0] == '0') {
        if (!parseIntBase(text, 8, v))
            return false;
    } else if (text.find(':') != std::string::npos) {
        std::int64_t base = 1;
        std::vector<std::string> parts;
        std::stringstream ss(text);
        for (std::string part; std::getline(ss, part, ':');)
            parts.push_back(part);
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            std::int64_t d = 0;
            if (!parseIntBase(*it, 10, d))
                return false;
            v += d * base;
            base *= 60;
        }
    } else if (!parseIntBase(text, 10, v)) {
        return false;
    }
    out = sign * v;
    return true;
}

bool constructFloat(std::string text, double& out)
{
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    if (text.empty())
        return false;
    double sign = 1;
    if (text[0] == '-')
        sign = -1;
    if (text[0] == '+' || text[0] == '-')
        text.erase(0, 1);
    if (text == ".inf") {
        out = sign * std::numeric_limits<double>::infinity();
        return true;
    }
    if (text == ".nan") {
        out = std::numeric_limits<double>::quiet_NaN();
        return true;
    }
    if (text.find(':') != std::string::npos) {
        std::vector<std::string> parts;
        std::stringstream ss(text);
        for (std::string part; std::getline(ss, part, ':');)
            parts.push_back(part);
        double base = 1, v = 0;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            char* end = nullptr;
            const double d = std::strtod(it->c_str(), &end);
            if (it->empty() || end != it->c_str() + it->size())
                return false;
            v += d * base;
            base *= 60;
        }
        out = sign * v;
        return true;
    }
    if (text == ".")
        return false;
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size())
        return false;
    out = sign * d;
    return true;
}

} // namespace

PlainTag resolvePlainScalar(const std::string& s)
{
    if (s.empty())
        return PlainTag::Null;
    const char first = s[0];
    // PyYAML picks the candidate resolvers by first character, in registration order:
    // bool, float, int, merge, null, timestamp, value.
    if (contains("yYnNtTfFoO", first)
        && isOneOf(s, {"yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on",
                       "On", "ON", "off", "Off", "OFF"}))
        return PlainTag::Bool;
    if (contains("-+0123456789.", first) && std::regex_match(s, floatRe()))
        return PlainTag::Float;
    if (contains("-+0123456789", first) && std::regex_match(s, intRe()))
        return PlainTag::Int;
    if (first == '<' && s == "<<")
        return PlainTag::Merge;
    if (contains("~nN", first) && isOneOf(s, {"~", "null", "Null", "NULL"}))
        return PlainTag::Null;
    if (contains("0123456789", first) && std::regex_match(s, timestampRe()))
        return PlainTag::Timestamp;
    if (first == '=' && s == "=")
        return PlainTag::ValueTag;
    return PlainTag::Str;
}

namespace {

// ---- yaml-cpp node -> Value --------------------------------------------------------------------

class Converter {
public:
    explicit Converter(std::string source) : m_source(std::move(source)) {}

    Result<Value> convert(const YAML::Node& node, int depth)
    {
        const int line = node.Mark().line + 1;
        const int column = node.Mark().column + 1;
        if (depth > kMaxDepth)
            return makeError(where(m_source, line, column) + ": nesting deeper than " + std::to_string(kMaxDepth)
                             + " levels (or a recursive alias); a config file is never this deep");
        Result<Value> r = convertInner(node, depth);
        if (r) {
            r->line = line;
            r->column = column;
        }
        return r;
    }

private:
    Result<Value> scalar(const YAML::Node& node)
    {
        const std::string& tag = node.Tag();
        const std::string& text = node.Scalar();
        const std::string at = where(m_source, node.Mark().line + 1, node.Mark().column + 1);
        auto asTagged = [&](PlainTag t) -> Result<Value> {
            switch (t) {
            case PlainTag::Null: return Value();
            case PlainTag::Bool: {
                std::string lower = text;
                std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
                if (isOneOf(lower, {"yes", "true", "on"}))
                    return Value(true);
                if (isOneOf(lower, {"no", "false", "off"}))
                    return Value(false);
                return makeError(at + ": '" + text + "' is not a boolean; write true or false");
            }
            case PlainTag::Int: {
                std::int64_t v = 0;
                if (!constructInt(text, v))
                    return makeError(at + ": the integer '" + text
                                     + "' cannot be read (out of the 64-bit range or malformed); quote it to keep it as text");
                return Value(v);
            }
            case PlainTag::Float: {
                double v = 0;
                if (!constructFloat(text, v))
                    return makeError(at + ": the number '" + text + "' cannot be read as a float; quote it to keep it as text");
                return Value(v);
            }
            case PlainTag::Timestamp:
            case PlainTag::Str: return Value(text);
            case PlainTag::Merge: return Value(text); // handled by the mapping
            case PlainTag::ValueTag:
                return makeError(at + ": could not determine a constructor for the tag 'tag:yaml.org,2002:value' "
                                      "(a bare '='); quote it: '='");
            }
            return Value(text);
        };
        if (tag == "?" || tag.empty())
            return asTagged(resolvePlainScalar(text));
        if (tag == "!" || tag == "tag:yaml.org,2002:str")
            return Value(text);
        if (tag == "tag:yaml.org,2002:int")
            return asTagged(PlainTag::Int);
        if (tag == "tag:yaml.org,2002:float")
            return asTagged(PlainTag::Float);
        if (tag == "tag:yaml.org,2002:bool")
            return asTagged(PlainTag::Bool);
        if (tag == "tag:yaml.org,2002:null")
            return Value();
        return makeError(at + ": could not determine a constructor for the tag '" + tag
                         + "'; remove the tag, `yaml.safe_load` accepts only the standard ones");
    }

    Result<Value> convertInner(const YAML::Node& node, int depth)
    {
        switch (node.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null: return Value();
        case YAML::NodeType::Scalar: return scalar(node);
        case YAML::NodeType::Sequence: {
            Value::List list;
            for (const auto& item : node) {
                auto v = convert(item, depth + 1);
                if (!v)
                    return v.error();
                list.push_back(std::move(*v));
            }
            return Value(std::move(list));
        }
        case YAML::NodeType::Map: {
            Value out = Value::emptyMap();
            Value::Map merged;
            for (const auto& kv : node) {
                const YAML::Node& keyNode = kv.first;
                const std::string at = where(m_source, keyNode.Mark().line + 1, keyNode.Mark().column + 1);
                if (keyNode.IsSequence() || keyNode.IsMap())
                    return makeError(at + ": found unhashable key (a list or mapping used as a key); use a plain name");
                if (keyNode.IsScalar() && keyNode.Tag() == "?" && keyNode.Scalar() == "<<") {
                    auto mv = convert(kv.second, depth + 1);
                    if (!mv)
                        return mv.error();
                    // PyYAML's flatten_mapping: a mapping, or a list of mappings (earlier wins).
                    std::vector<const Value*> sources;
                    if (mv->isMap())
                        sources.push_back(&*mv);
                    else if (mv->isList()) {
                        for (const auto& s : mv->asList()) {
                            if (!s.isMap())
                                return makeError(at + ": expected a mapping for merging, but found " + s.typeName());
                            sources.push_back(&s);
                        }
                    } else {
                        return makeError(at + ": expected a mapping or list of mappings for merging, but found "
                                         + mv->typeName());
                    }
                    for (const Value* s : sources)
                        for (const auto& e : s->asMap())
                            if (std::none_of(merged.begin(), merged.end(), [&](const Value::Entry& m) { return m.key == e.key; }))
                                merged.push_back(e);
                    continue;
                }
                auto k = convert(keyNode, depth + 1);
                if (!k)
                    return k.error();
                auto v = convert(kv.second, depth + 1);
                if (!v)
                    return v.error();
                auto& map = out.asMap();
                auto it = std::find_if(map.begin(), map.end(), [&](const Value::Entry& e) { return e.key == *k; });
                if (it != map.end())
                    it->value = std::move(*v); // duplicate key: the last one wins, silently, as in PyYAML
                else
                    map.push_back(Value::Entry{std::move(*k), std::move(*v)});
            }
            if (!merged.empty()) {
                Value::Map result;
                for (auto& m : merged)
                    if (std::none_of(out.asMap().begin(), out.asMap().end(), [&](const Value::Entry& e) { return e.key == m.key; }))
                        result.push_back(m);
                for (auto& e : out.asMap())
                    result.push_back(e);
                return Value(std::move(result));
            }
            return out;
        }
        }
        return Value();
    }

    std::string m_source;
};

// Counts documents without building them. yaml-cpp 0.7's LoadAll never ends on some malformed
// streams (a stray `,` after a closed flow mapping yields endless empty documents), so the
// stream is walked with a bound first, and only the first document is then built.
class DocumentCounter : public YAML::EventHandler {
public:
    std::vector<YAML::Mark> starts;
    void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

} // namespace

Result<Value> parseYaml(const std::string& text, const std::string& source)
{
    if (auto ok = checkReadable(text, source); !ok)
        return ok.error();
    if (auto ok = checkNesting(text, source); !ok)
        return ok.error();
    YAML::Node root;
    try {
        std::istringstream stream(text);
        YAML::Parser parser(stream);
        DocumentCounter counter;
        int documents = 0;
        while (documents < 2 && parser.HandleNextDocument(counter))
            ++documents;
        if (documents == 0)
            return Value();
        if (documents > 1) {
            const YAML::Mark m = counter.starts.size() > 1 ? counter.starts[1] : YAML::Mark();
            return makeError(where(source, m.line + 1, m.column + 1)
                             + ": expected a single document in the stream, but found another document; remove what "
                               "follows the first document (a second `---` section or stray characters)");
        }
        root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
        // A tab in a line's indentation is what most often breaks a hand-edited file; yaml-cpp
        // reports what follows from it, PyYAML names the tab. Name it too.
        std::istringstream lines(text);
        int number = 0;
        for (std::string line; std::getline(lines, line);) {
            ++number;
            const auto first = line.find_first_not_of(" \t");
            const auto tab = line.find('\t');
            if (number <= e.mark.line + 1 && first != std::string::npos && tab < first && line[first] != '#')
                return makeError(where(source, number, static_cast<int>(tab) + 1)
                                 + ": YAML syntax error: this line is indented with a tab (found character '\\t' that cannot "
                                   "start any token); YAML indents with spaces only: replace the tab with spaces");
        }
        return makeError(where(source, e.mark.line + 1, e.mark.column + 1) + ": YAML syntax error: " + e.msg
                         + "; fix the indentation, quoting or brackets at this place");
    } catch (const YAML::Exception& e) {
        return makeError(where(source, e.mark.line + 1, e.mark.column + 1) + ": YAML error: " + e.msg);
    } catch (const std::exception& e) {
        return makeError(source + ": YAML error: " + e.what());
    }
    try {
        return Converter(source).convert(root, 0);
    } catch (const std::exception& e) {
        return makeError(source + ": YAML error: " + e.what());
    }
}

// ---- JSON ------------------------------------------------------------------------------------

namespace {

// Python's json accepts NaN, Infinity and -Infinity (and writes them); nlohmann does not. They
// are swapped for marker strings outside of string literals before parsing and back after.
const std::string kNanMarker = "\x01shardscope-json-NaN";
const std::string kInfMarker = "\x01shardscope-json-Infinity";
const std::string kNegInfMarker = "\x01shardscope-json--Infinity";

std::string markNonFinite(const std::string& text)
{
    std::string out;
    out.reserve(text.size());
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            out += c;
            if (c == '\\' && i + 1 < text.size())
                out += text[++i];
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
            out += c;
            continue;
        }
        auto at = [&](const char* word) { return text.compare(i, std::strlen(word), word) == 0; };
        // The marker is written with a JSON escape; it decodes to the \x01-prefixed string.
        auto marker = [](const std::string& m) { return "\"\\u0001" + m.substr(1) + "\""; };
        if (at("-Infinity")) {
            out += marker(kNegInfMarker);
            i += 8;
        } else if (at("Infinity")) {
            out += marker(kInfMarker);
            i += 7;
        } else if (at("NaN")) {
            out += marker(kNanMarker);
            i += 2;
        } else {
            out += c;
        }
    }
    return out;
}

Value fromNlohmann(const nlohmann::ordered_json& j)
{
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const auto u = j.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return Value(static_cast<double>(u));
        return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: {
        const auto& s = j.get_ref<const std::string&>();
        if (s == kNanMarker)
            return Value(std::numeric_limits<double>::quiet_NaN());
        if (s == kInfMarker)
            return Value(std::numeric_limits<double>::infinity());
        if (s == kNegInfMarker)
            return Value(-std::numeric_limits<double>::infinity());
        return Value(s);
    }
    case nlohmann::ordered_json::value_t::array: {
        Value::List list;
        for (const auto& item : j)
            list.push_back(fromNlohmann(item));
        return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
        Value out = Value::emptyMap();
        for (auto it = j.begin(); it != j.end(); ++it)
            out.set(it.key(), fromNlohmann(it.value()));
        return out;
    }
    default: return Value();
    }
}

} // namespace

Result<Value> parseJson(const std::string& text, const std::string& source)
{
    try {
        // Python's json keeps the last of duplicate keys; nlohmann's ordered_json does too via set().
        auto j = nlohmann::ordered_json::parse(text);
        return fromNlohmann(j);
    } catch (const nlohmann::json::parse_error& e) {
        // Retry with the non-finite literals Python accepts; report the first error otherwise.
        if (text.find("NaN") != std::string::npos || text.find("Infinity") != std::string::npos) {
            try {
                return fromNlohmann(nlohmann::ordered_json::parse(markNonFinite(text)));
            } catch (const std::exception&) {
            }
        }
        // e.byte is 1-based and points just past the offending character.
        const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
        int line = 0, column = 0;
        lineColumnOf(text, offset, line, column);
        std::string what = e.what();
        if (auto p = what.find("syntax error while parsing"); p != std::string::npos)
            what = what.substr(p);
        return makeError(where(source, line, column) + ": invalid JSON: " + what
                         + " (a trailing comma before } or ] is a common cause; JSON allows none)");
    } catch (const std::exception& e) {
        return makeError(source + ": invalid JSON: " + e.what());
    }
}

// ---- writers --------------------------------------------------------------------------------

namespace {

bool isBreak(char32_t c) { return c == '\n' || c == 0x85 || c == 0x2028 || c == 0x2029; }
bool isSpaceOrBreakOrNul(char32_t c) { return c == 0 || c == ' ' || c == '\t' || c == '\r' || isBreak(c); }

struct Analysis {
    bool empty = false;
    bool multiline = false;
    bool allowFlowPlain = true;
    bool allowBlockPlain = true;
    bool allowSingleQuoted = true;
    bool allowDoubleQuoted = true;
};

Analysis analyzeScalar(const std::u32string& s)
{
    Analysis a;
    if (s.empty()) {
        a.empty = true;
        a.allowFlowPlain = false;
        return a;
    }
    bool blockIndicators = false, flowIndicators = false, lineBreaks = false, special = false;
    bool leadingSpace = false, leadingBreak = false, trailingSpace = false, trailingBreak = false;
    bool breakSpace = false, spaceBreak = false;
    auto startsWith = [&](const char* p) {
        for (std::size_t i = 0; p[i]; ++i)
            if (i >= s.size() || s[i] != static_cast<char32_t>(p[i]))
                return false;
        return true;
    };
    if (startsWith("---") || startsWith("...")) {
        blockIndicators = true;
        flowIndicators = true;
    }
    bool precededByWhitespace = true;
    bool followedByWhitespace = s.size() == 1 || isSpaceOrBreakOrNul(s[1]);
    bool previousSpace = false, previousBreak = false;
    auto in = [](char32_t c, std::u32string_view set) { return set.find(c) != std::u32string_view::npos; };
    for (std::size_t index = 0; index < s.size(); ++index) {
        const char32_t ch = s[index];
        if (index == 0) {
            if (in(ch, U"#,[]{}&*!|>'\"%@`")) {
                flowIndicators = true;
                blockIndicators = true;
            }
            if (in(ch, U"?:")) {
                flowIndicators = true;
                if (followedByWhitespace)
                    blockIndicators = true;
            }
            if (ch == '-' && followedByWhitespace) {
                flowIndicators = true;
                blockIndicators = true;
            }
        } else {
            if (in(ch, U",?[]{}"))
                flowIndicators = true;
            if (ch == ':') {
                flowIndicators = true;
                if (followedByWhitespace)
                    blockIndicators = true;
            }
            if (ch == '#' && precededByWhitespace) {
                flowIndicators = true;
                blockIndicators = true;
            }
        }
        if (isBreak(ch))
            lineBreaks = true;
        if (!(ch == '\n' || (ch >= 0x20 && ch <= 0x7e))) {
            // allow_unicode is off in safe_dump, so every non-ASCII character is "special".
            special = true;
        }
        if (ch == ' ') {
            if (index == 0)
                leadingSpace = true;
            if (index == s.size() - 1)
                trailingSpace = true;
            if (previousBreak)
                breakSpace = true;
            previousSpace = true;
            previousBreak = false;
        } else if (isBreak(ch)) {
            if (index == 0)
                leadingBreak = true;
            if (index == s.size() - 1)
                trailingBreak = true;
            if (previousSpace)
                spaceBreak = true;
            previousSpace = false;
            previousBreak = true;
        } else {
            previousSpace = false;
            previousBreak = false;
        }
        precededByWhitespace = isSpaceOrBreakOrNul(ch);
        followedByWhitespace = index + 2 >= s.size() || isSpaceOrBreakOrNul(s[index + 2]);
    }
    if (leadingSpace || leadingBreak || trailingSpace || trailingBreak)
        a.allowFlowPlain = a.allowBlockPlain = false;
    if (breakSpace)
        a.allowFlowPlain = a.allowBlockPlain = a.allowSingleQuoted = false;
    if (spaceBreak || special)
        a.allowFlowPlain = a.allowBlockPlain = a.allowSingleQuoted = false;
    if (lineBreaks)
        a.allowFlowPlain = a.allowBlockPlain = false;
    if (flowIndicators)
        a.allowFlowPlain = false;
    if (blockIndicators)
        a.allowBlockPlain = false;
    a.multiline = lineBreaks;
    return a;
}

// A port of the PyYAML emitter states that safe_dump of plain data reaches.
class PyYamlEmitter {
public:
    std::string finish(const Value& root)
    {
        emitNode(root, /*root=*/true, false, false, false);
        // expect_document_end: write_indent, then stream end ("..." after an open-ended root).
        writeIndent();
        if (m_openEnded) {
            writeIndicator("...", true);
            writeIndent();
        }
        return m_out;
    }

private:
    static constexpr int kBestIndent = 2;
    static constexpr int kBestWidth = 80;

    void write(const std::u32string& s)
    {
        m_out += toUtf8(s);
        m_column += static_cast<int>(s.size());
    }
    void write(const std::string& ascii)
    {
        m_out += ascii;
        m_column += static_cast<int>(ascii.size());
    }

    void writeIndicator(const std::string& indicator, bool needWhitespace, bool whitespace = false, bool indention = false)
    {
        const std::string data = (m_whitespace || !needWhitespace) ? indicator : " " + indicator;
        m_whitespace = whitespace;
        m_indention = m_indention && indention;
        m_openEnded = false;
        write(data);
    }

    void writeLineBreak()
    {
        m_whitespace = true;
        m_indention = true;
        m_column = 0;
        m_out += '\n';
    }

    void writeIndent()
    {
        const int indent = m_indent < 0 ? 0 : m_indent;
        if (!m_indention || m_column > indent || (m_column == indent && !m_whitespace))
            writeLineBreak();
        if (m_column < indent) {
            m_whitespace = true;
            write(std::string(static_cast<std::size_t>(indent - m_column), ' '));
        }
    }

    void increaseIndent(bool flow, bool indentless = false)
    {
        m_indents.push_back(m_indent);
        if (m_indent < 0)
            m_indent = flow ? kBestIndent : 0;
        else if (!indentless)
            m_indent += kBestIndent;
    }
    void popIndent()
    {
        m_indent = m_indents.back();
        m_indents.pop_back();
    }

    static bool isEmptyCollection(const Value& v)
    {
        return (v.isList() && v.asList().empty()) || (v.isMap() && v.asMap().empty());
    }

    void emitNode(const Value& v, bool root, bool sequence, bool mapping, bool simpleKey)
    {
        m_rootContext = root;
        m_sequenceContext = sequence;
        m_mappingContext = mapping;
        m_simpleKeyContext = simpleKey;
        if (v.isMap()) {
            if (m_flowLevel > 0 || v.asMap().empty())
                emitEmptyFlow("{", "}");
            else
                emitBlockMapping(v.asMap());
        } else if (v.isList()) {
            if (m_flowLevel > 0 || v.asList().empty())
                emitEmptyFlow("[", "]");
            else
                emitBlockSequence(v.asList());
        } else {
            increaseIndent(true);
            processScalar(v);
            popIndent();
        }
    }

    void emitEmptyFlow(const std::string& open, const std::string& close)
    {
        writeIndicator(open, true, true);
        ++m_flowLevel;
        increaseIndent(true);
        popIndent();
        --m_flowLevel;
        writeIndicator(close, false);
    }

    static bool keyLess(const Value& a, const Value& b)
    {
        // Python sorts str keys by code point (= UTF-8 byte order); mixed key types would raise
        // in Python, here they get a stable order instead (by kind first).
        if (a.kind() != b.kind()) {
            auto rank = [](const Value& v) { return v.isBool() || v.isNumber() ? 0 : static_cast<int>(v.kind()); };
            if (rank(a) != rank(b))
                return rank(a) < rank(b);
        }
        if ((a.isBool() || a.isNumber()) && (b.isBool() || b.isNumber())) {
            auto num = [](const Value& v) { return v.isBool() ? (v.asBool() ? 1.0 : 0.0) : v.asNumber(); };
            return num(a) < num(b);
        }
        if (a.isString() && b.isString())
            return a.asString() < b.asString();
        return false;
    }

    bool checkSimpleKey(const Value& key)
    {
        if (key.isMap() || key.isList())
            return isEmptyCollection(key);
        const std::u32string text = fromUtf8Lenient(scalarText(key));
        const Analysis a = analyzeScalar(text);
        return text.size() < 128 && !a.empty && !a.multiline;
    }

    void emitBlockMapping(const Value::Map& map)
    {
        increaseIndent(false);
        std::vector<const Value::Entry*> entries;
        for (const auto& e : map)
            entries.push_back(&e);
        std::stable_sort(entries.begin(), entries.end(),
                         [](const Value::Entry* a, const Value::Entry* b) { return keyLess(a->key, b->key); });
        for (const auto* e : entries) {
            writeIndent();
            if (checkSimpleKey(e->key)) {
                emitNode(e->key, false, false, true, true);
                writeIndicator(":", false);
                emitNode(e->value, false, false, true, false);
            } else {
                writeIndicator("?", true, false, true);
                emitNode(e->key, false, false, true, false);
                writeIndent();
                writeIndicator(":", true, false, true);
                emitNode(e->value, false, false, true, false);
            }
        }
        popIndent();
    }

    void emitBlockSequence(const Value::List& list)
    {
        const bool indentless = m_mappingContext && !m_indention;
        increaseIndent(false, indentless);
        for (const auto& item : list) {
            writeIndent();
            writeIndicator("-", true, false, true);
            emitNode(item, false, true, false, false);
        }
        popIndent();
    }

    static std::string scalarText(const Value& v)
    {
        switch (v.kind()) {
        case Value::Kind::Null: return "null";
        case Value::Kind::Bool: return v.asBool() ? "true" : "false";
        case Value::Kind::Int: return std::to_string(v.asInt());
        case Value::Kind::Float: {
            const double d = v.asFloat();
            if (std::isnan(d))
                return ".nan";
            if (std::isinf(d))
                return d > 0 ? ".inf" : "-.inf";
            std::string r = pythonFloatRepr(d);
            std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
            if (r.find('.') == std::string::npos && r.find('e') != std::string::npos)
                r.replace(r.find('e'), 1, ".0e");
            return r;
        }
        case Value::Kind::String: return v.asString();
        default: return {};
        }
    }

    void processScalar(const Value& v)
    {
        const std::string text8 = scalarText(v);
        const std::u32string text = fromUtf8Lenient(text8);
        const Analysis a = analyzeScalar(text);
        // implicit[0]: the plain spelling reads back as the same type. Always true for the
        // non-string representers; for a str only if PyYAML's resolver says str.
        const bool implicitPlain = !v.isString() || resolvePlainScalar(text8) == PlainTag::Str;
        char style = '"';
        if (implicitPlain && !(m_simpleKeyContext && (a.empty || a.multiline))
            && ((m_flowLevel > 0 && a.allowFlowPlain) || (m_flowLevel == 0 && a.allowBlockPlain)))
            style = 0;
        else if (a.allowSingleQuoted && !(m_simpleKeyContext && a.multiline))
            style = '\'';
        const bool split = !m_simpleKeyContext;
        if (style == 0)
            writePlain(text, split);
        else if (style == '\'')
            writeSingleQuoted(text, split);
        else
            writeDoubleQuoted(text, split);
    }

    void writePlain(const std::u32string& text, bool split)
    {
        if (m_rootContext)
            m_openEnded = true;
        if (text.empty())
            return;
        if (!m_whitespace)
            write(std::string(" "));
        m_whitespace = false;
        m_indention = false;
        bool spaces = false, breaks = false;
        std::size_t start = 0, end = 0;
        while (end <= text.size()) {
            const bool atEnd = end == text.size();
            const char32_t ch = atEnd ? 0 : text[end];
            if (spaces) {
                if (atEnd || ch != ' ') {
                    if (start + 1 == end && m_column > kBestWidth && split) {
                        writeIndent();
                        m_whitespace = false;
                        m_indention = false;
                    } else {
                        write(text.substr(start, end - start));
                    }
                    start = end;
                }
            } else if (breaks) {
                if (atEnd || !isBreak(ch)) {
                    if (text[start] == '\n')
                        writeLineBreak();
                    for (std::size_t i = start; i < end; ++i) {
                        writeLineBreak();
                    }
                    writeIndent();
                    m_whitespace = false;
                    m_indention = false;
                    start = end;
                }
            } else {
                if (atEnd || ch == ' ' || isBreak(ch)) {
                    write(text.substr(start, end - start));
                    start = end;
                }
            }
            if (!atEnd) {
                spaces = ch == ' ';
                breaks = isBreak(ch);
            }
            ++end;
        }
    }

    void writeSingleQuoted(const std::u32string& text, bool split)
    {
        writeIndicator("'", true);
        bool spaces = false, breaks = false;
        std::size_t start = 0, end = 0;
        while (end <= text.size()) {
            const bool atEnd = end == text.size();
            const char32_t ch = atEnd ? 0 : text[end];
            if (spaces) {
                if (atEnd || ch != ' ') {
                    if (start + 1 == end && m_column > kBestWidth && split && start != 0 && end != text.size())
                        writeIndent();
                    else
                        write(text.substr(start, end - start));
                    start = end;
                }
            } else if (breaks) {
                if (atEnd || !isBreak(ch)) {
                    if (text[start] == '\n')
                        writeLineBreak();
                    for (std::size_t i = start; i < end; ++i)
                        writeLineBreak();
                    writeIndent();
                    start = end;
                }
            } else {
                if (atEnd || ch == ' ' || isBreak(ch) || ch == '\'') {
                    if (start < end) {
                        write(text.substr(start, end - start));
                        start = end;
                    }
                }
            }
            if (!atEnd && ch == '\'') {
                write(std::string("''"));
                start = end + 1;
            }
            if (!atEnd) {
                spaces = ch == ' ';
                breaks = isBreak(ch);
            }
            ++end;
        }
        writeIndicator("'", false);
    }

    void writeDoubleQuoted(const std::u32string& text, bool split)
    {
        writeIndicator("\"", true);
        std::size_t start = 0, end = 0;
        while (end <= text.size()) {
            const bool atEnd = end == text.size();
            const char32_t ch = atEnd ? 0 : text[end];
            if (atEnd || ch == '"' || ch == '\\' || ch == 0x85 || ch == 0x2028 || ch == 0x2029 || ch == 0xfeff
                || !(ch >= 0x20 && ch <= 0x7e)) {
                if (start < end) {
                    write(text.substr(start, end - start));
                    start = end;
                }
                if (!atEnd) {
                    std::string data;
                    switch (ch) {
                    case 0: data = "\\0"; break;
                    case 0x07: data = "\\a"; break;
                    case 0x08: data = "\\b"; break;
                    case 0x09: data = "\\t"; break;
                    case 0x0a: data = "\\n"; break;
                    case 0x0b: data = "\\v"; break;
                    case 0x0c: data = "\\f"; break;
                    case 0x0d: data = "\\r"; break;
                    case 0x1b: data = "\\e"; break;
                    case '"': data = "\\\""; break;
                    case '\\': data = "\\\\"; break;
                    case 0x85: data = "\\N"; break;
                    case 0xa0: data = "\\_"; break;
                    case 0x2028: data = "\\L"; break;
                    case 0x2029: data = "\\P"; break;
                    default: {
                        char buf[16];
                        if (ch <= 0xff)
                            std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(ch));
                        else if (ch <= 0xffff)
                            std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(ch));
                        else
                            std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(ch));
                        data = buf;
                    }
                    }
                    write(data);
                    start = end + 1;
                }
            }
            if (end > 0 && end + 1 < text.size() && (ch == ' ' || start >= end)
                && m_column + static_cast<int>(end - start) > kBestWidth && split) {
                // text[start:end] is empty right after an escape (start == end + 1).
                std::u32string data = (start < end ? text.substr(start, end - start) : std::u32string()) + U"\\";
                if (start < end)
                    start = end;
                write(data);
                writeIndent();
                m_whitespace = false;
                m_indention = false;
                if (text[start] == ' ')
                    write(std::string("\\"));
            }
            ++end;
        }
        writeIndicator("\"", false);
    }

    std::string m_out;
    int m_column = 0;
    int m_indent = -1; // -1: None
    std::vector<int> m_indents;
    int m_flowLevel = 0;
    bool m_whitespace = true;
    bool m_indention = true;
    bool m_openEnded = false;
    bool m_rootContext = false;
    bool m_sequenceContext = false;
    bool m_mappingContext = false;
    bool m_simpleKeyContext = false;
};

void jsonString(std::string& out, const std::string& s)
{
    out += '"';
    std::u32string cps = fromUtf8Lenient(s);
    for (char32_t c : cps) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (c < 0x20 || (c >= 0x7f && c <= 0xffff && c > 0x7e)) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else if (c > 0xffff) {
                const char32_t v = c - 0x10000;
                char buf[16];
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                              static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    out += '"';
}

std::string jsonKey(const Value& key)
{
    // json.dumps turns non-str keys into their JSON spelling.
    switch (key.kind()) {
    case Value::Kind::String: return key.asString();
    case Value::Kind::Bool: return key.asBool() ? "true" : "false";
    case Value::Kind::Null: return "null";
    case Value::Kind::Int: return std::to_string(key.asInt());
    case Value::Kind::Float: return pythonFloatRepr(key.asFloat());
    default: return key.pyRepr();
    }
}

void dumpJsonInto(std::string& out, const Value& v, int indent)
{
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    const std::string closePad(static_cast<std::size_t>(indent), ' ');
    switch (v.kind()) {
    case Value::Kind::Null: out += "null"; break;
    case Value::Kind::Bool: out += v.asBool() ? "true" : "false"; break;
    case Value::Kind::Int: out += std::to_string(v.asInt()); break;
    case Value::Kind::Float: {
        const double d = v.asFloat();
        if (std::isnan(d))
            out += "NaN";
        else if (std::isinf(d))
            out += d > 0 ? "Infinity" : "-Infinity";
        else
            out += pythonFloatRepr(d);
        break;
    }
    case Value::Kind::String: jsonString(out, v.asString()); break;
    case Value::Kind::List: {
        if (v.asList().empty()) {
            out += "[]";
            break;
        }
        out += "[\n";
        bool first = true;
        for (const auto& item : v.asList()) {
            if (!first)
                out += ",\n";
            first = false;
            out += pad;
            dumpJsonInto(out, item, indent + 2);
        }
        out += "\n" + closePad + "]";
        break;
    }
    case Value::Kind::Map: {
        if (v.asMap().empty()) {
            out += "{}";
            break;
        }
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& e : v.asMap())
            items.emplace_back(jsonKey(e.key), &e.value);
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += "{\n";
        bool first = true;
        for (const auto& [k, val] : items) {
            if (!first)
                out += ",\n";
            first = false;
            out += pad;
            jsonString(out, k);
            out += ": ";
            dumpJsonInto(out, *val, indent + 2);
        }
        out += "\n" + closePad + "}";
        break;
    }
    }
}

} // namespace

std::string dumpYaml(const Value& value)
{
    return PyYamlEmitter().finish(value);
}

std::string dumpJson(const Value& value)
{
    std::string out;
    dumpJsonInto(out, value, 0);
    return out;
}

Result<std::string> readTextFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return makeError(path + ": cannot open the file for reading (" + std::string(std::strerror(errno))
                         + "); check the path and its permissions");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Result<void> writeTextFile(const std::string& path, const std::string& text)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        return makeError(path + ": cannot open the file for writing (" + std::string(std::strerror(errno))
                         + "); check that its folder exists and is writable");
    out << text;
    out.close();
    if (!out)
        return makeError(path + ": writing failed; check the free disk space");
    return {};
}

} // namespace shardscope::config
