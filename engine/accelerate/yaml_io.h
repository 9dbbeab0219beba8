#pragma once

// Reading and writing YAML and JSON exactly as Accelerate does: PyYAML `safe_load` (YAML 1.1
// scalar resolution), `json.load`, PyYAML `safe_dump` and `json.dumps(indent=2, sort_keys=True)`.
// See Note [PyYAML compatibility] in yaml_io.cpp.

#include "engine/common/result.h"
#include "engine/common/user_file.h"
#include "engine/accelerate/value.h"

#include <string>

namespace shardscope::config {

// `source` names the file in messages: "<source>:<line>:<column>: ...".
Result<Value> parseYaml(const std::string& text, const std::string& source);
Result<Value> parseJson(const std::string& text, const std::string& source);

// PyYAML `safe_dump(value)` with its defaults: block style, keys sorted, 2-space indent,
// indentless lists, width 80, YAML-1.1-ambiguous strings quoted, non-ASCII escaped.
std::string dumpYaml(const Value& value);
// Python `json.dumps(value, indent=2, sort_keys=True)` (ensure_ascii on), no trailing newline.
std::string dumpJson(const Value& value);

// What PyYAML's resolver makes of a plain (unquoted) scalar.
enum class PlainTag { Null, Bool, Int, Float, Merge, Timestamp, ValueTag, Str };
PlainTag resolvePlainScalar(const std::string& text);

// A settings file a user hands over (a config, a recipe, a DeepSpeed JSON, a run's plan): through
// the one reader of user files (engine/common/user_file.h), at most 1 MiB unless `kind` says.
Result<std::string> readTextFile(const std::string& path,
                                 const UserFileKind& kind = {"the file", 1u << 20, std::chrono::seconds(10)});
Result<void> writeTextFile(const std::string& path, const std::string& text);

} // namespace shardscope::config
