#include "engine/accelerate/accelerate_config.h"

#include "engine/accelerate/ascii_case.h"
#include "engine/accelerate/schema.h"
#include "engine/accelerate/yaml_io.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <pwd.h>
#include <unistd.h>

namespace shardscope::config {

namespace {

std::string_view sectionOf(ConfigKind kind) { return kind == ConfigKind::Cluster ? kClusterSection : kSageMakerSection; }

bool isNestedDictField(std::string_view key)
{
    for (auto s : kNestedSections)
        if (s == key)
            return true;
    return false;
}

std::string at(const std::string& source, const Value& v)
{
    if (v.line <= 0)
        return source;
    return source + ":" + std::to_string(v.line) + ":" + std::to_string(v.column);
}

// An error about the value `v` of `key` in `source`: "source:line:column: what", with the fields.
Error valueError(ErrorKind kind, const std::string& source, const Value& v, const std::string& key, const std::string& what)
{
    Error error = makeError(at(source, v) + ": " + what, kind);
    error.file = source;
    error.line = std::max(0, v.line);
    error.column = std::max(0, v.column);
    error.keyPath = key;
    return error;
}

// Python's sorted() of the unknown keys, for the message (str keys by code point).
std::vector<Value> sortedKeys(std::vector<Value> keys)
{
    std::stable_sort(keys.begin(), keys.end(), [](const Value& a, const Value& b) {
        if (a.isString() && b.isString())
            return a.asString() < b.asString();
        return static_cast<int>(a.kind()) < static_cast<int>(b.kind());
    });
    return keys;
}

Value convertEnumsForDict(const Value& v, bool nested)
{
    // to_dict's _convert_enums: a dict that is empty becomes None; inside dicts, recursively.
    if (v.isMap()) {
        if (v.asMap().empty())
            return Value();
        Value out = v;
        for (auto& e : out.asMap())
            e.value = convertEnumsForDict(e.value, true);
        return out;
    }
    (void)nested;
    return v;
}

} // namespace

AccelerateConfig::AccelerateConfig(ConfigKind kind, Value given, std::string source)
    : m_kind(kind), m_given(std::move(given)), m_source(std::move(source))
{
    if (!m_given.isMap())
        m_given = Value::emptyMap();
}

Value AccelerateConfig::field(std::string_view key) const
{
    if (const Value* v = m_given.find(key)) {
        if (v->isNull() && (isNestedDictField(key) || key == "dynamo_config"))
            return Value::emptyMap(); // __post_init__: None dicts become {}
        return *v;
    }
    if (const KeySpec* spec = findKeySpec(sectionOf(m_kind), key))
        return spec->defaultValue;
    return Value();
}

const Value* AccelerateConfig::nested(std::string_view section, std::string_view key) const
{
    const Value* s = m_given.find(section);
    if (!s || !s->isMap())
        return nullptr;
    return s->find(key);
}

Value AccelerateConfig::allFields() const
{
    Value out = Value::emptyMap();
    for (const KeySpec* spec : currentKeys(sectionOf(m_kind)))
        out.set(spec->key, field(spec->key));
    return out;
}

Value AccelerateConfig::toDict() const
{
    Value out = Value::emptyMap();
    const Value fields = allFields();
    for (const auto& e : fields.asMap()) {
        Value v = convertEnumsForDict(e.value, false);
        if (!v.isNull())
            out.asMap().push_back(Value::Entry{e.key, std::move(v)});
    }
    return out;
}

std::string AccelerateConfig::distributedType() const
{
    const Value v = field("distributed_type");
    return v.isString() ? v.asString() : std::string();
}

std::string AccelerateConfig::mixedPrecision() const
{
    // accelerate launch lower-cases it (BF16 runs as bf16).
    const Value v = field("mixed_precision");
    return v.isString() ? asciiLower(v.asString()) : std::string("no");
}

std::optional<std::int64_t> AccelerateConfig::intField(std::string_view key) const
{
    const Value v = field(key);
    if (v.isInt())
        return v.asInt();
    return std::nullopt;
}

bool AccelerateConfig::boolField(std::string_view key) const { return field(key).truthy(); }

FileFormat formatForPath(std::string_view path)
{
    return (path.size() >= 5 && path.substr(path.size() - 5) == ".json") ? FileFormat::Json : FileFormat::Yaml;
}

namespace {

// Accelerate's process_config: the defaults and legacy keys it rewrites before the dataclass
// sees the dict. Returns whether it added num_processes (a distributed_type NO config).
Result<bool> processConfig(Value& dict, const std::string& source)
{
    if (!dict.contains("compute_environment"))
        dict.set("compute_environment", Value("LOCAL_MACHINE"));
    const Value* dt = dict.find("distributed_type");
    if (!dt)
        return makeError(source
                         + ": A `distributed_type` must be specified in the config file. Add for example "
                           "`distributed_type: MULTI_GPU` (one of "
                         +
                         [] {
                             std::string all;
                             for (const auto& t : distributedTypes())
                                 all += (all.empty() ? "" : ", ") + t;
                             return all;
                         }()
                         + ").");
    const bool injectedNumProcesses = !dict.contains("num_processes") && dt->isString() && dt->asString() == "NO";
    if (injectedNumProcesses)
        dict.set("num_processes", Value(1));
    if (!dict.contains("mixed_precision")) {
        const Value* fp16 = dict.find("fp16");
        dict.set("mixed_precision", (fp16 && fp16->truthy()) ? Value("fp16") : Value());
    }
    dict.erase("fp16");
    if (const Value* legacy = dict.find("dynamo_backend")) {
        Value backend = *legacy;
        dict.erase("dynamo_backend");
        Value dyn = Value::emptyMap();
        if (!(backend.isString() && backend.asString() == "NO"))
            dyn.set("dynamo_backend", backend);
        dict.set("dynamo_config", dyn);
    }
    for (const char* k : {"use_cpu", "debug", "enable_cpu_affinity"})
        if (!dict.contains(k))
            dict.set(k, Value(false));
    return injectedNumProcesses;
}

// Accelerate's "had unknown keys" message (the keys sorted), then a line per key: removed, a near
// miss, or not a key at all. `causeNamed`: the keys follow from the schema a misspelt
// compute_environment chose, so they get no line of their own.
std::string unknownKeysMessage(std::vector<Value> unknown, ConfigKind kind, const std::string& source, const std::string& cause,
                               bool causeNamed, bool injectedNumProcesses)
{
    const std::string_view section = sectionOf(kind);
    unknown = sortedKeys(unknown);
    std::string list = "[";
    for (std::size_t i = 0; i < unknown.size(); ++i)
        list += (i ? ", " : "") + unknown[i].pyRepr();
    list += "]";
    std::string message = cause + "The config file at " + source + " had unknown keys (" + list
                          + "), please try upgrading your `accelerate` version or fix (and potentially remove) these keys from "
                            "your config file.";
    for (const auto& k : unknown) {
        if (causeNamed)
            break;
        const KeySpec* spec = k.isString() ? findKeySpec(section, k.asString()) : nullptr;
        if (injectedNumProcesses && k.isString() && k.asString() == "num_processes") {
            message += "\n  " + source
                       + ": `num_processes` is not in the file: Accelerate's loader adds num_processes: 1 "
                         "to every distributed_type 'NO' config, and its SageMakerConfig has no such key, so no SageMaker "
                         "config with distributed_type 'NO' loads; use DATA_PARALLEL or MODEL_PARALLEL";
            continue;
        }
        message += "\n  " + at(source, k) + ": `" + k.pyStr() + "`: ";
        if (spec && !spec->removedIn.empty())
            message += "removed in Accelerate " + spec->removedIn + "; delete this key";
        else if (std::string near = k.isString() ? nearestKey(section, k.asString()) : std::string(); !near.empty())
            message += "not a key of Accelerate's "
                       + std::string(kind == ConfigKind::Cluster ? "ClusterConfig" : "SageMakerConfig") + "; did you mean `"
                       + near + "`?";
        else
            message += "not a key of Accelerate's "
                       + std::string(kind == ConfigKind::Cluster ? "ClusterConfig" : "SageMakerConfig") + "; remove it";
    }
    return message;
}

} // namespace

Result<AccelerateConfig> parseAccelerateConfig(const std::string& text, const std::string& source, FileFormat format)
{
    auto parsed = format == FileFormat::Json ? parseJson(text, source) : parseYaml(text, source);
    if (!parsed)
        return parsed.error();
    Value dict = std::move(*parsed);
    if (!dict.isMap())
        return makeError(source + ": the file holds " + (dict.isNull() ? std::string("nothing") : dict.typeName())
                             + ", not a mapping of config keys; an Accelerate config is `key: value` lines such as "
                               "`distributed_type: MULTI_GPU` (run `shardscope config` to write one)",
                         ErrorKind::Syntax);

    // Schema choice: compute_environment missing or equal to LOCAL_MACHINE -> ClusterConfig.
    const Value* env = dict.find("compute_environment");
    const ConfigKind kind = (!env || (env->isString() && env->asString() == "LOCAL_MACHINE")) ? ConfigKind::Cluster
                                                                                              : ConfigKind::SageMaker;

    // process_config, in Accelerate's order.
    auto processed = processConfig(dict, source);
    if (!processed)
        return processed.error();
    const bool injectedNumProcesses = *processed;

    // The real cause first, where Accelerate's own message names a consequence: a
    // compute_environment that is LOCAL_MACHINE in another case selects the SageMaker schema.
    std::string cause;
    if (const Value* ce = dict.find("compute_environment"); kind == ConfigKind::SageMaker && ce->isString()) {
        if (asciiUpper(ce->asString()) == "LOCAL_MACHINE")
            cause = at(source, *ce) + ": compute_environment is '" + ce->asString()
                    + "', but Accelerate compares it exactly "
                      "and reads any value other than LOCAL_MACHINE as a SageMaker config. Write `compute_environment: "
                      "LOCAL_MACHINE`. (Accelerate's own message follows.)\n";
    }
    // Required dataclass fields without defaults (only SageMaker can lack them here).
    const std::string_view section = sectionOf(kind);
    std::vector<std::string> missing;
    for (const KeySpec* spec : currentKeys(section))
        if (spec->required && !dict.contains(spec->key))
            missing.push_back(spec->key);
    auto missingMessage = [&] {
        const std::string cls = kind == ConfigKind::Cluster ? "ClusterConfig" : "SageMakerConfig";
        std::string names;
        for (std::size_t i = 0; i < missing.size(); ++i) {
            if (i > 0)
                names += (i + 1 == missing.size()) ? (missing.size() > 2 ? ", and " : " and ") : ", ";
            names += "'" + missing[i] + "'";
        }
        return source + ": " + cls + ".__init__() missing " + std::to_string(missing.size()) + " required positional argument"
               + (missing.size() > 1 ? "s" : "") + ": " + names + ". Add " + (missing.size() > 1 ? "these keys" : "this key")
               + " to the SageMaker config.";
    };
    const std::string computeCause = cause;
    if (cause.empty() && !missing.empty() && kind == ConfigKind::SageMaker)
        cause = missingMessage() + " (Accelerate's own message follows.)\n";

    // Unknown top-level keys are rejected (nested ones are kept).
    std::vector<Value> unknown;
    for (const auto& e : dict.asMap()) {
        const KeySpec* spec = e.key.isString() ? findKeySpec(section, e.key.asString()) : nullptr;
        if (!spec || !spec->removedIn.empty())
            unknown.push_back(e.key);
    }
    if (!unknown.empty())
        return makeError(unknownKeysMessage(unknown, kind, source, cause, !computeCause.empty(), injectedNumProcesses),
                         ErrorKind::UnknownKey);

    if (!missing.empty())
        return makeError(computeCause + missingMessage(), ErrorKind::BadValue);

    // __post_init__: enum conversion of strings (non-strings are left alone, as in Accelerate).
    const Value* ce = dict.find("compute_environment");
    if (ce->isString() && ce->asString() != "LOCAL_MACHINE" && ce->asString() != "AMAZON_SAGEMAKER")
        return valueError(ErrorKind::BadValue, source, *ce, "compute_environment",
                          "'" + ce->asString() + "' is not a valid ComputeEnvironment. Use LOCAL_MACHINE or AMAZON_SAGEMAKER.");
    const Value* dtype = dict.find("distributed_type");
    if (dtype->isString()) {
        const auto& allowed = kind == ConfigKind::Cluster ? distributedTypes() : sageMakerDistributedTypes();
        if (std::find(allowed.begin(), allowed.end(), dtype->asString()) == allowed.end()) {
            std::string all;
            for (const auto& t : allowed)
                all += (all.empty() ? "" : ", ") + t;
            std::string hint;
            if (dtype->asString() == "TP")
                hint = " (TP existed in Accelerate 1.4-1.6 and was removed; use FSDP with parallelism_config_tp_size)";
            return valueError(ErrorKind::BadValue, source, *dtype, "distributed_type",
                              "'" + dtype->asString() + "' is not a valid "
                                  + (kind == ConfigKind::Cluster ? "DistributedType" : "SageMakerDistributedType") + hint
                                  + ". distributed_type must be one of: " + all + ".");
        }
    }
    return AccelerateConfig(kind, std::move(dict), source);
}

Result<AccelerateConfig> loadAccelerateConfig(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) // (a FIFO or a folder: the reader says what it is)
        return makeError("The passed configuration file `" + path
                             + "` does not exist. Please pass an existing file, or create one with `shardscope config` "
                               "(or `accelerate config`).",
                         ErrorKind::Io);
    // An Accelerate config is a few KiB; parsing costs ~200 bytes of memory and ~12 s per MiB of
    // text, so a larger "config" is refused before it is parsed.
    auto text = readTextFile(path, {"an Accelerate config file", 256u << 10, std::chrono::seconds(10)});
    if (!text)
        return text.error();
    return parseAccelerateConfig(*text, path, formatForPath(path));
}

std::string toYamlText(const AccelerateConfig& config) { return dumpYaml(config.toDict()); }

std::string toJsonText(const AccelerateConfig& config) { return dumpJson(config.toDict()) + "\n"; }

Result<void> saveAccelerateConfig(const AccelerateConfig& config, const std::string& path)
{
    return writeTextFile(path, formatForPath(path) == FileFormat::Json ? toJsonText(config) : toYamlText(config));
}

std::string expandUser(const std::string& path)
{
    // os.path.expanduser: "~" and "~/..." from $HOME (else the password database), "~user/..."
    // from that user's entry; an unknown user leaves the path as it is.
    if (path.empty() || path[0] != '~')
        return path;
    const auto slash = path.find('/');
    const std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    std::string home;
    if (user.empty()) {
        if (const char* h = std::getenv("HOME"))
            home = h;
        else if (const passwd* pw = getpwuid(getuid()))
            home = pw->pw_dir;
    } else if (const passwd* pw = getpwnam(user.c_str())) {
        home = pw->pw_dir;
    }
    if (home.empty())
        return path;
    if (home.size() > 1 && home.back() == '/')
        home.pop_back();
    return home + (slash == std::string::npos ? std::string() : path.substr(slash));
}

std::string defaultConfigDir()
{
    std::string hfHome;
    if (const char* h = std::getenv("HF_HOME"))
        hfHome = h;
    else {
        const char* xdg = std::getenv("XDG_CACHE_HOME");
        hfHome = std::string(xdg ? xdg : "~/.cache") + "/huggingface";
    }
    return expandUser(hfHome) + "/accelerate";
}

std::string defaultConfigFile() { return defaultConfigDir() + "/default_config.yaml"; }

} // namespace shardscope::config
