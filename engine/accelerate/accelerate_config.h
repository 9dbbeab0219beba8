#pragma once

// An Accelerate config file, loaded and saved the way Accelerate 1.15 does it
// (`load_config_from_file`, `process_config`, `to_dict`, `to_yaml_file`/`to_json_file`), so
// that any file written by `accelerate config` comes here and goes back key for key.
// Reference: ../shared/refs/accelerate-config-reference.md §1.

#include "engine/common/result.h"
#include "engine/accelerate/value.h"

#include <optional>
#include <string>
#include <string_view>

namespace shardscope::config {

enum class ConfigKind { Cluster, SageMaker }; // ClusterConfig / SageMakerConfig
enum class FileFormat { Yaml, Json };

class AccelerateConfig {
public:
    AccelerateConfig() = default;
    AccelerateConfig(ConfigKind kind, Value given, std::string source = {});

    ConfigKind kind() const { return m_kind; }
    const std::string& source() const { return m_source; }

    // The keys the file gave, after Accelerate's normalisation (what the dataclass received).
    const Value& given() const { return m_given; }
    Value& given() { return m_given; }

    // A field with its dataclass default when absent (nested dicts default to {}).
    Value field(std::string_view key) const;
    // A key inside a nested section (fsdp_config, ...), or nullptr.
    const Value* nested(std::string_view section, std::string_view key) const;
    void setField(std::string_view key, Value value) { m_given.set(key, std::move(value)); }

    // Every dataclass field in declaration order with defaults: the object Accelerate holds.
    Value allFields() const;
    // Accelerate's to_dict(): empty dicts become None, None values are dropped (top level only).
    Value toDict() const;

    // Convenience readers; empty/nullopt when the value is absent or not of the expected type.
    std::string distributedType() const; // "" when not a string (e.g. an unquoted NO)
    std::string mixedPrecision() const; // "no" when absent
    std::optional<std::int64_t> intField(std::string_view key) const;
    bool boolField(std::string_view key) const; // Python truthiness of the field

    friend bool operator==(const AccelerateConfig& a, const AccelerateConfig& b)
    {
        return a.m_kind == b.m_kind && a.allFields() == b.allFields();
    }

private:
    ConfigKind m_kind = ConfigKind::Cluster;
    Value m_given = Value::emptyMap();
    std::string m_source;
};

FileFormat formatForPath(std::string_view path); // .json -> Json, anything else -> Yaml

// Parses a config file's text. `source` is the path, used in messages exactly as Accelerate
// uses it ("The config file at <source> had unknown keys ...").
Result<AccelerateConfig> parseAccelerateConfig(const std::string& text, const std::string& source, FileFormat format);
// Loads a file; the format follows the extension, as in Accelerate.
Result<AccelerateConfig> loadAccelerateConfig(const std::string& path);

std::string toYamlText(const AccelerateConfig& config); // bytes of to_yaml_file
std::string toJsonText(const AccelerateConfig& config); // bytes of to_json_file (trailing newline)
Result<void> saveAccelerateConfig(const AccelerateConfig& config, const std::string& path);

// $HF_HOME/accelerate (HF_HOME defaults to $XDG_CACHE_HOME/huggingface, XDG_CACHE_HOME to
// ~/.cache), and the default file inside it.
std::string defaultConfigDir();
std::string defaultConfigFile();

// Python's os.path.expanduser ("~", "~/x", "~user/x"), as Accelerate applies it to paths.
std::string expandUser(const std::string& path);

} // namespace shardscope::config
