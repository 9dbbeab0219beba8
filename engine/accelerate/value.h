#pragma once

// Value: a YAML/JSON document as Python sees it after `yaml.safe_load` / `json.load`: null, bool,
// int, float, str, list, or a dict that keeps insertion order. Accelerate does no type coercion
// on load (`num_processes: "4"` stays a string, an unquoted `NO` is the bool false) and keeps
// unknown nested keys, so the config is stored as this tree, never as menu positions or as a
// struct that would lose what the user wrote. Typed reading lives in accelerate_config.h.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace shardscope::config {

class Value {
public:
    enum class Kind { Null, Bool, Int, Float, String, List, Map };
    struct Entry;
    using List = std::vector<Value>;
    using Map = std::vector<Entry>; // insertion order, like a Python dict

    // The constructors are defined below the class, once Entry is complete: constructing the
    // variant needs every alternative complete, and clang checks that where they are written.
    Value() = default;
    Value(std::nullptr_t);
    Value(bool b);
    Value(int i);
    Value(std::int64_t i);
    Value(double d);
    Value(const char* s);
    Value(std::string s);
    Value(List l);
    Value(Map m);
    static Value emptyMap();

    Kind kind() const { return static_cast<Kind>(m_data.index()); }
    bool isNull() const { return kind() == Kind::Null; }
    bool isBool() const { return kind() == Kind::Bool; }
    bool isInt() const { return kind() == Kind::Int; }
    bool isFloat() const { return kind() == Kind::Float; }
    bool isNumber() const { return isInt() || isFloat(); }
    bool isString() const { return kind() == Kind::String; }
    bool isList() const { return kind() == Kind::List; }
    bool isMap() const { return kind() == Kind::Map; }

    bool asBool() const { return std::get<bool>(m_data); }
    std::int64_t asInt() const { return std::get<std::int64_t>(m_data); }
    double asFloat() const { return std::get<double>(m_data); }
    double asNumber() const { return isInt() ? static_cast<double>(asInt()) : asFloat(); }
    const std::string& asString() const { return std::get<std::string>(m_data); }
    const List& asList() const { return std::get<List>(m_data); }
    List& asList() { return std::get<List>(m_data); }
    const Map& asMap() const { return std::get<Map>(m_data); }
    Map& asMap() { return std::get<Map>(m_data); }

    // Map access by string key (non-string keys never match). Null when absent or not a map.
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    bool contains(std::string_view key) const { return find(key) != nullptr; }
    // Sets a string key, keeping its position when it exists (Python dict assignment).
    void set(std::string_view key, Value value);
    bool erase(std::string_view key);

    // Python truthiness (`if value:`): None, False, 0, 0.0, "", [] and {} are false.
    bool truthy() const;

    // Python's repr()/str() of the value, as `accelerate env` prints it (True, None, 'x', [...]).
    std::string pyRepr() const;
    std::string pyStr() const;

    // Type name a user understands, for messages ("a string", "a boolean", ...).
    std::string typeName() const;

    // Structural equality with Python semantics except that 1 != 1.0 and True != 1: values must
    // have the same kind, which is what "loads with the same values" means for a config file.
    friend bool operator==(const Value& a, const Value& b);

    // Where the value was in its source file (1-based; 0 when unknown or built in code).
    int line = 0;
    int column = 0;

private:
    std::variant<std::monostate, bool, std::int64_t, double, std::string, List, Map> m_data;
};

struct Value::Entry {
    Value key;
    Value value;
};

inline Value::Value(std::nullptr_t) { }
inline Value::Value(bool b) : m_data(b) { }
inline Value::Value(int i) : m_data(std::int64_t{i}) { }
inline Value::Value(std::int64_t i) : m_data(i) { }
inline Value::Value(double d) : m_data(d) { }
inline Value::Value(const char* s) : m_data(std::string(s)) { }
inline Value::Value(std::string s) : m_data(std::move(s)) { }
inline Value::Value(List l) : m_data(std::move(l)) { }
inline Value::Value(Map m) : m_data(std::move(m)) { }
inline Value Value::emptyMap() { return Value(Map{}); }

// Accelerate's truth rule for the keys its launcher hands to the runtime as environment variables
// (FSDP_*, ACCELERATE_*): the value's str(), lower-cased, read by accelerate.utils.str_to_bool
// (y, yes, t, true, on, 1 / n, no, f, false, off, 0). So the string "false" is false and "yes"
// true. nullopt: absent, null, or a value str_to_bool refuses (validation reports its type).
std::optional<bool> accelerateBool(const Value* value);

// Python's repr() of a float (shortest round-trip digits, '1e+16', '1.0', 'inf', 'nan').
std::string pythonFloatRepr(double d);
// Python's repr() of a str (single quotes unless the text has ' and no ").
std::string pythonStrRepr(std::string_view s);

} // namespace shardscope::config
