#include "engine/accelerate/value.h"

#include "engine/accelerate/ascii_case.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace shardscope::config {

const Value* Value::find(std::string_view key) const
{
    if (!isMap())
        return nullptr;
    for (const auto& e : asMap())
        if (e.key.isString() && e.key.asString() == key)
            return &e.value;
    return nullptr;
}

Value* Value::find(std::string_view key) { return const_cast<Value*>(static_cast<const Value*>(this)->find(key)); }

void Value::set(std::string_view key, Value value)
{
    if (!isMap())
        m_data = Map{};
    if (Value* existing = find(key)) {
        *existing = std::move(value);
        return;
    }
    asMap().push_back(Entry{Value(std::string(key)), std::move(value)});
}

bool Value::erase(std::string_view key)
{
    if (!isMap())
        return false;
    auto& m = asMap();
    for (auto it = m.begin(); it != m.end(); ++it) {
        if (it->key.isString() && it->key.asString() == key) {
            m.erase(it);
            return true;
        }
    }
    return false;
}

bool Value::truthy() const
{
    switch (kind()) {
    case Kind::Null:
        return false;
    case Kind::Bool:
        return asBool();
    case Kind::Int:
        return asInt() != 0;
    case Kind::Float:
        return asFloat() != 0.0;
    case Kind::String:
        return !asString().empty();
    case Kind::List:
        return !asList().empty();
    case Kind::Map:
        return !asMap().empty();
    }
    return false;
}

std::string pythonFloatRepr(double d)
{
    if (std::isnan(d))
        return "nan";
    if (std::isinf(d))
        return d > 0 ? "inf" : "-inf";
    // Shortest round-trip digits in scientific form, then Python's float_repr_style rules:
    // positional when -4 <= exponent < 16, else d.ddde+XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    bool negative = false;
    if (!sci.empty() && sci[0] == '-') {
        negative = true;
        sci.erase(0, 1);
    }
    const auto ePos = sci.find('e');
    std::string mantissa = sci.substr(0, ePos);
    const int exponent = std::stoi(sci.substr(ePos + 1));
    std::string digits;
    for (char c : mantissa)
        if (c != '.')
            digits += c;
    while (digits.size() > 1 && digits.back() == '0')
        digits.pop_back();
    std::string out;
    if (exponent >= -4 && exponent < 16) {
        if (exponent >= 0) {
            std::string intPart = digits.substr(0, std::min<std::size_t>(digits.size(), exponent + 1));
            while (static_cast<int>(intPart.size()) < exponent + 1)
                intPart += '0';
            std::string frac = digits.size() > static_cast<std::size_t>(exponent) + 1 ? digits.substr(exponent + 1) : "";
            out = intPart + "." + (frac.empty() ? "0" : frac);
        } else {
            out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
        }
    } else {
        out = digits.substr(0, 1);
        if (digits.size() > 1)
            out += "." + digits.substr(1);
        char e[16];
        std::snprintf(e, sizeof e, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += e;
    }
    return negative ? "-" + out : out;
}

std::string pythonStrRepr(std::string_view s)
{
    const bool hasSingle = s.find('\'') != std::string_view::npos;
    const bool hasDouble = s.find('"') != std::string_view::npos;
    const char quote = (hasSingle && !hasDouble) ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == static_cast<unsigned char>(quote))
            out += std::string("\\") + quote;
        else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else
            out += static_cast<char>(c);
    }
    out += quote;
    return out;
}

std::string Value::pyRepr() const
{
    switch (kind()) {
    case Kind::Null:
        return "None";
    case Kind::Bool:
        return asBool() ? "True" : "False";
    case Kind::Int:
        return std::to_string(asInt());
    case Kind::Float:
        return pythonFloatRepr(asFloat());
    case Kind::String:
        return pythonStrRepr(asString());
    case Kind::List: {
        std::string out = "[";
        bool first = true;
        for (const auto& v : asList()) {
            out += (first ? "" : ", ") + v.pyRepr();
            first = false;
        }
        return out + "]";
    }
    case Kind::Map: {
        std::string out = "{";
        bool first = true;
        for (const auto& e : asMap()) {
            out += (first ? "" : ", ") + e.key.pyRepr() + ": " + e.value.pyRepr();
            first = false;
        }
        return out + "}";
    }
    }
    return {};
}

std::string Value::pyStr() const { return isString() ? asString() : pyRepr(); }

std::string Value::typeName() const
{
    switch (kind()) {
    case Kind::Null:
        return "null";
    case Kind::Bool:
        return "a boolean";
    case Kind::Int:
        return "an integer";
    case Kind::Float:
        return "a number";
    case Kind::String:
        return "a string";
    case Kind::List:
        return "a list";
    case Kind::Map:
        return "a mapping";
    }
    return {};
}

bool operator==(const Value& a, const Value& b)
{
    if (a.kind() != b.kind())
        return false;
    switch (a.kind()) {
    case Value::Kind::Null:
        return true;
    case Value::Kind::Bool:
        return a.asBool() == b.asBool();
    case Value::Kind::Int:
        return a.asInt() == b.asInt();
    case Value::Kind::Float:
        return a.asFloat() == b.asFloat() || (std::isnan(a.asFloat()) && std::isnan(b.asFloat()));
    case Value::Kind::String:
        return a.asString() == b.asString();
    case Value::Kind::List:
        return a.asList() == b.asList();
    case Value::Kind::Map: {
        // Dict equality ignores order, as in Python.
        const auto& am = a.asMap();
        const auto& bm = b.asMap();
        if (am.size() != bm.size())
            return false;
        for (const auto& e : am) {
            bool found = false;
            for (const auto& f : bm) {
                if (e.key == f.key) {
                    if (!(e.value == f.value))
                        return false;
                    found = true;
                    break;
                }
            }
            if (!found)
                return false;
        }
        return true;
    }
    }
    return false;
}

std::optional<bool> accelerateBool(const Value* value)
{
    if (!value || value->isNull())
        return std::nullopt;
    const std::string s = asciiLower(value->pyStr());
    if (s == "y" || s == "yes" || s == "t" || s == "true" || s == "on" || s == "1")
        return true;
    if (s == "n" || s == "no" || s == "f" || s == "false" || s == "off" || s == "0")
        return false;
    return std::nullopt;
}

} // namespace shardscope::config
