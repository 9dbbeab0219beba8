// JSON as Python's json reads it (NaN and Infinity included) and json.dumps(indent=2, sort_keys=True) writes it.
// See Note [PyYAML compatibility] in yaml_io.cpp.

#include "engine/accelerate/yaml_io.h"
#include "engine/common/json_string.h"
#include "engine/accelerate/yaml_detail.h"

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

namespace shardscope::config {

using namespace detail;

// ---- JSON ------------------------------------------------------------------------------------

namespace {

// Python's json accepts NaN, Infinity and -Infinity (and writes them); nlohmann does not. They
// are swapped for marker strings outside of string literals before parsing and back after.
const std::string kNanMarker = "\x01shardscope-json-NaN";
const std::string kInfMarker = "\x01shardscope-json-Infinity";
const std::string kNegInfMarker = "\x01shardscope-json--Infinity";

std::string markNonFinite(const std::string& text)
{
    return replaceBareNonFinite(text, [](std::string_view word) {
        // The marker is written with a JSON escape; it decodes to the \x01-prefixed string.
        const std::string& m = word == "NaN" ? kNanMarker : word == "Infinity" ? kInfMarker : kNegInfMarker;
        return "\"\\u0001" + m.substr(1) + "\"";
    });
}

Value fromNlohmann(const nlohmann::ordered_json& j)
{
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
        return Value();
    case nlohmann::ordered_json::value_t::boolean:
        return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
        return Value(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const auto u = j.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return Value(static_cast<double>(u));
        return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
        return Value(j.get<double>());
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
    default:
        return Value();
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

// ---- writer ---------------------------------------------------------------------------------

namespace {

void jsonString(std::string& out, const std::string& s)
{
    out += '"';
    for (char32_t c : fromUtf8Lenient(s))
        appendJsonCodePoint(out, c, /*asciiOnly=*/true); // json.dumps' ensure_ascii
    out += '"';
}

std::string jsonKey(const Value& key)
{
    // json.dumps turns non-str keys into their JSON spelling.
    switch (key.kind()) {
    case Value::Kind::String:
        return key.asString();
    case Value::Kind::Bool:
        return key.asBool() ? "true" : "false";
    case Value::Kind::Null:
        return "null";
    case Value::Kind::Int:
        return std::to_string(key.asInt());
    case Value::Kind::Float:
        return pythonFloatRepr(key.asFloat());
    default:
        return key.pyRepr();
    }
}

void dumpJsonInto(std::string& out, const Value& v, int indent)
{
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    const std::string closePad(static_cast<std::size_t>(indent), ' ');
    switch (v.kind()) {
    case Value::Kind::Null:
        out += "null";
        break;
    case Value::Kind::Bool:
        out += v.asBool() ? "true" : "false";
        break;
    case Value::Kind::Int:
        out += std::to_string(v.asInt());
        break;
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
    case Value::Kind::String:
        jsonString(out, v.asString());
        break;
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

std::string dumpJson(const Value& value)
{
    std::string out;
    dumpJsonInto(out, value, 0);
    return out;
}

} // namespace shardscope::config
