#pragma once

// Source checks for the security suite: our own sources read as C++ text, with comments removed
// and string literals kept apart from code, so a rule can look at what the code does (a call, an
// identifier) without being fooled by a comment or by text inside a literal.

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace security_test {

inline std::string sourceDir() { return SHARDSCOPE_SOURCE_DIR; }

inline std::string readAll(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// Every .cpp/.h below the given folders of the repository, sorted.
inline std::vector<std::filesystem::path> sourcesUnder(const std::vector<std::string>& folders)
{
    std::vector<std::filesystem::path> files;
    for (const auto& folder : folders) {
        const std::filesystem::path root = std::filesystem::path(sourceDir()) / folder;
        if (!std::filesystem::exists(root))
            continue;
        for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
            const auto ext = entry.path().extension().string();
            if (entry.is_regular_file() && (ext == ".cpp" || ext == ".h"))
                files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

// The text with comments blanked out and every string or character literal replaced by `""`
// (so literals stay visible as literals, but their contents cannot match a code pattern).
// Raw string literals (R"sql(...)sql") count as literals too.
inline std::string codeOnly(const std::string& text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
            while (i < text.size() && text[i] != '\n')
                ++i;
        } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
            const auto end = text.find("*/", i + 2);
            const std::size_t stop = end == std::string::npos ? text.size() : end + 2;
            out += ' ';
            out.append(static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                                           text.begin() + static_cast<std::ptrdiff_t>(stop), '\n')),
                       '\n'); // keeps line numbers
            i = stop;
        } else if (c == 'R' && i + 1 < text.size() && text[i + 1] == '"'
                   && (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_'))) {
            // A raw string literal R"delim( ... )delim": newlines kept, contents hidden.
            const auto open = text.find('(', i + 2);
            const std::string close = ")" + text.substr(i + 2, open == std::string::npos ? 0 : open - i - 2) + "\"";
            const auto end = open == std::string::npos ? std::string::npos : text.find(close, open);
            const std::size_t stop = end == std::string::npos ? text.size() : end + close.size();
            out += "\"\"";
            out.append(static_cast<std::size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                                           text.begin() + static_cast<std::ptrdiff_t>(stop), '\n')),
                       '\n');
            i = stop;
        } else if (c == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(text[i - 1]))) {
            out += c; // a digit separator (1'000), not a character literal
            ++i;
        } else if (c == '"' || c == '\'') {
            ++i;
            while (i < text.size() && text[i] != c) {
                if (text[i] == '\\')
                    ++i;
                ++i;
            }
            ++i;
            out += c == '"' ? "\"\"" : "' '";
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

// The argument text of the call whose '(' is at `open` (balanced parentheses), or "" when the
// call is not closed.
inline std::string callArgument(const std::string& code, std::size_t open)
{
    int depth = 0;
    for (std::size_t i = open; i < code.size(); ++i) {
        if (code[i] == '(')
            ++depth;
        else if (code[i] == ')' && --depth == 0)
            return code.substr(open + 1, i - open - 1);
    }
    return {};
}

// Identifiers in a piece of code (literals already replaced by `""`).
inline std::vector<std::string> identifiers(const std::string& code)
{
    std::vector<std::string> names;
    for (std::size_t i = 0; i < code.size();) {
        if (std::isalpha(static_cast<unsigned char>(code[i])) || code[i] == '_') {
            std::size_t j = i;
            while (j < code.size() && (std::isalnum(static_cast<unsigned char>(code[j])) || code[j] == '_'))
                ++j;
            names.push_back(code.substr(i, j - i));
            i = j;
        } else {
            ++i;
        }
    }
    return names;
}

inline int lineOf(const std::string& code, std::size_t offset)
{
    return 1 + static_cast<int>(std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

} // namespace security_test
