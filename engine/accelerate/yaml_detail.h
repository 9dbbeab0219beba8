#pragma once

// What the YAML and JSON reader and writers of yaml_io.h share inside engine/accelerate: the UTF-8
// layer and the reader's checks (yaml_text.cpp), and PyYAML's scalar construction
// (yaml_resolver.cpp). Not for use outside engine/accelerate.

#include "engine/common/line_column.h"
#include "engine/common/result.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace shardscope::config::detail {

constexpr int kMaxDepth = 64; // nesting levels a config may have (PyYAML recurses without a limit)

// "source:line:column"
std::string where(const std::string& source, int line, int column);

// UTF-8 (yaml_text.cpp)
bool decodeUtf8(std::string_view s, std::u32string& out, std::size_t& badOffset);
void appendUtf8(std::string& out, char32_t cp);
std::string toUtf8(const std::u32string& s);
std::u32string fromUtf8Lenient(const std::string& s);
bool pyyamlPrintable(char32_t c);
// What PyYAML's reader rejects (invalid UTF-8, control characters), and nesting beyond kMaxDepth.
Result<void> checkReadable(const std::string& text, const std::string& source);
Result<void> checkNesting(const std::string& text, const std::string& source);

// PyYAML's constructors of plain scalars (yaml_resolver.cpp)
bool contains(std::string_view set, char c);
bool isOneOf(const std::string& s, std::initializer_list<const char*> words);
bool constructInt(std::string text, std::int64_t& out);
bool constructFloat(std::string text, double& out);

} // namespace shardscope::config::detail
