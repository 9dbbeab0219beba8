// The YAML writer: a port of the parts of PyYAML's emitter that safe_dump of a dict reaches.
// See Note [PyYAML compatibility] in yaml_io.cpp.

#include "engine/accelerate/yaml_io.h"
#include "engine/accelerate/yaml_detail.h"

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

namespace shardscope::config {

using namespace detail;

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
        case Value::Kind::Null:
            return "null";
        case Value::Kind::Bool:
            return v.asBool() ? "true" : "false";
        case Value::Kind::Int:
            return std::to_string(v.asInt());
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
        case Value::Kind::String:
            return v.asString();
        default:
            return {};
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
                    case 0:
                        data = "\\0";
                        break;
                    case 0x07:
                        data = "\\a";
                        break;
                    case 0x08:
                        data = "\\b";
                        break;
                    case 0x09:
                        data = "\\t";
                        break;
                    case 0x0a:
                        data = "\\n";
                        break;
                    case 0x0b:
                        data = "\\v";
                        break;
                    case 0x0c:
                        data = "\\f";
                        break;
                    case 0x0d:
                        data = "\\r";
                        break;
                    case 0x1b:
                        data = "\\e";
                        break;
                    case '"':
                        data = "\\\"";
                        break;
                    case '\\':
                        data = "\\\\";
                        break;
                    case 0x85:
                        data = "\\N";
                        break;
                    case 0xa0:
                        data = "\\_";
                        break;
                    case 0x2028:
                        data = "\\L";
                        break;
                    case 0x2029:
                        data = "\\P";
                        break;
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

} // namespace

std::string dumpYaml(const Value& value) { return PyYamlEmitter().finish(value); }

} // namespace shardscope::config
