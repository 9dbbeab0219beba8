#pragma once

// Shared by the tests of Accelerate's file and of a model's config.json: run
// tests/tools/accelerate_oracle.py with the project's virtual environment (the real Accelerate),
// and encode our Values the way the script encodes Python objects, so that a comparison of the two
// JSON dumps is a comparison of types and values.

#include "engine/accelerate/value.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::testing {

inline std::string sourceDir() { return SHARDSCOPE_SOURCE_DIR; }
inline std::string corpusDir() { return sourceDir() + "/../shared/corpus/accelerate-configs"; }
inline std::string venvPython() { return sourceDir() + "/.venv/bin/python"; }

inline std::string shellQuote(const std::string& s)
{
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Runs tests/tools/<script> on the project venv and parses the JSON it prints; on failure returns
// nullopt and says why (missing venv, script error).
inline std::optional<nlohmann::json> runPythonTool(const std::string& script, const std::vector<std::string>& args,
                                                   std::string& why)
{
    if (!std::filesystem::exists(venvPython())) {
        why = "no project venv at " + venvPython() + " (run scripts/setup.sh): the reference Accelerate is missing";
        return std::nullopt;
    }
    std::string cmd = shellQuote(venvPython()) + " " + shellQuote(sourceDir() + "/tests/tools/" + script);
    for (const auto& a : args)
        cmd += " " + shellQuote(a);
    cmd += " 2>/dev/null";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) {
        why = "cannot start " + cmd;
        return std::nullopt;
    }
    std::string output;
    char buf[65536];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;)
        output.append(buf, n);
    const int rc = pclose(pipe);
    if (rc != 0) {
        why = "the oracle failed (exit " + std::to_string(rc) + "): " + cmd;
        return std::nullopt;
    }
    try {
        return nlohmann::json::parse(output);
    } catch (const std::exception& e) {
        why = std::string("the oracle printed no JSON: ") + e.what();
        return std::nullopt;
    }
}

// Runs the Accelerate oracle (tests/tools/accelerate_oracle.py).
inline std::optional<nlohmann::json> runOracle(const std::vector<std::string>& args, std::string& why)
{
    return runPythonTool("accelerate_oracle.py", args, why);
}

inline nlohmann::json toOracleJson(const config::Value& v)
{
    using K = config::Value::Kind;
    switch (v.kind()) {
    case K::Null:
        return nullptr;
    case K::Bool:
        return v.asBool();
    case K::Int:
        return v.asInt();
    case K::Float:
        if (std::isnan(v.asFloat()))
            return nlohmann::json{{"__float__", "nan"}};
        if (std::isinf(v.asFloat()))
            return nlohmann::json{{"__float__", v.asFloat() > 0 ? "inf" : "-inf"}};
        return v.asFloat();
    case K::String:
        return v.asString();
    case K::List: {
        auto out = nlohmann::json::array();
        for (const auto& x : v.asList())
            out.push_back(toOracleJson(x));
        return out;
    }
    case K::Map: {
        bool allStr = true;
        for (const auto& e : v.asMap())
            allStr = allStr && e.key.isString();
        if (allStr) {
            auto out = nlohmann::json::object();
            for (const auto& e : v.asMap())
                out[e.key.asString()] = toOracleJson(e.value);
            return out;
        }
        auto pairs = nlohmann::json::array();
        for (const auto& e : v.asMap())
            pairs.push_back(nlohmann::json::array({toOracleJson(e.key), toOracleJson(e.value)}));
        return nlohmann::json{{"__dict__", pairs}};
    }
    }
    return nullptr;
}

// dump() keeps 1 and 1.0 apart, which operator== of nlohmann does not.
inline std::string canonical(const nlohmann::json& j) { return j.dump(); }

} // namespace shardscope::testing
