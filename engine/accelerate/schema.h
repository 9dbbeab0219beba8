#pragma once

// The schema of Accelerate's config file: every key of the top level (ClusterConfig for
// `compute_environment: LOCAL_MACHINE`, SageMakerConfig otherwise) and of the nested sections,
// with its type, default, allowed values and the Accelerate versions that added or removed it.
// Values, never menu positions (menus reorder between versions; see the reference, §11.11).
// Source: ../shared/refs/accelerate-config-reference.md §2, checked against accelerate 1.15.

#include "engine/accelerate/value.h"

#include <string>
#include <string_view>
#include <vector>

namespace shardscope::config {

// Sections: "cluster" and "sagemaker" are the two top levels; the rest are nested dicts.
inline constexpr std::string_view kClusterSection = "cluster";
inline constexpr std::string_view kSageMakerSection = "sagemaker";
inline constexpr std::string_view kNestedSections[] = {"fsdp_config",   "deepspeed_config",   "fp8_config",
                                                       "dynamo_config", "megatron_lm_config", "parallelism_config",
                                                       "mpirun_config"};

struct KeySpec {
    std::string section;
    std::string key;
    std::vector<Value::Kind> types; // accepted kinds; Float keys also accept Int
    // Top level: the dataclass default (absent = required). Nested: the launcher/runtime default
    // when the key is absent. Null when there is none.
    Value defaultValue;
    bool required = false; // top level: no dataclass default
    std::vector<std::string> allowed; // allowed string values; empty: any
    std::string addedIn; // Accelerate version, e.g. "0.24"
    std::string removedIn; // empty: still current
    bool convertedOnLoad = false; // legacy key Accelerate converts (fp16, dynamo_backend)
    std::string doc; // one line for forms and messages
};

const std::vector<KeySpec>& configSchema();
// nullptr when unknown (removed keys are found, with removedIn set).
const KeySpec* findKeySpec(std::string_view section, std::string_view key);
// Current (not removed) keys of a section, in Accelerate's declaration order.
std::vector<const KeySpec*> currentKeys(std::string_view section);
// The closest current key by edit distance, for "did you mean" (empty when nothing is close).
std::string nearestKey(std::string_view section, std::string_view key);

// Enumerations Accelerate checks, by value.
const std::vector<std::string>& distributedTypes(); // DistributedType
const std::vector<std::string>& sageMakerDistributedTypes(); // SageMakerDistributedType
const std::vector<std::string>& dynamoBackends(); // DynamoBackend
const std::vector<std::string>& fsdpShardingStrategies(); // FULL_SHARD=1 ... HYBRID_SHARD_ZERO2=5

std::string describeKinds(const std::vector<Value::Kind>& kinds); // "an integer or a string"

} // namespace shardscope::config
