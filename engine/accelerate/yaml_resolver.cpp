// YAML 1.1 scalar resolution and construction, as PyYAML's Resolver and SafeConstructor do it.
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

namespace detail {

// ---- YAML 1.1 scalar resolution (PyYAML's Resolver) -------------------------------------------

const std::regex& floatRe()
{
    static const std::regex re(
        R"(^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$)");
    return re;
}

const std::regex& intRe()
{
    static const std::regex re(
        R"(^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$)");
    return re;
}

const std::regex& timestampRe()
{
    static const std::regex re(
        R"(^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$)");
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

} // namespace detail

using namespace detail;

PlainTag resolvePlainScalar(const std::string& s)
{
    if (s.empty())
        return PlainTag::Null;
    const char first = s[0];
    // PyYAML picks the candidate resolvers by first character, in registration order:
    // bool, float, int, merge, null, timestamp, value.
    if (contains("yYnNtTfFoO", first)
        && isOneOf(s, {"yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON",
                       "off", "Off", "OFF"}))
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

} // namespace shardscope::config
