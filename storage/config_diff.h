#pragma once

// The config difference of "runs compare": configs and recipes are YAML, and a flat key-path
// comparison (fsdp_config.fsdp_sharding_strategy: FULL_SHARD vs SHARD_GRAD_OP) is what a user
// scans. The flattener reads the block-style YAML that Accelerate and our recipes write (nested
// mappings, sequences, comments, quoted and block scalars); flow collections ({}, [a, b]) are
// compared as written.

#include "storage/run_types.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope::storage {

// (key path, scalar text) in document order; sequence items are path[0], path[1], ...; a key
// with neither a value nor children maps to "".
std::vector<std::pair<std::string, std::string>> flattenYaml(std::string_view text);

// Key paths whose values differ between the documents (absent counts as different), in the order
// they first appear. `file` labels the rows ("config", "recipe").
std::vector<ConfigDifference> diffYaml(const std::vector<std::string_view>& documents, const std::string& file);

// How the run ran as the history recorded it from its plan (the precision mode, bf16-pure
// included, which no Accelerate key spells; the processes; the distributed type), as a small YAML
// document: the "run" rows of a comparison, beside its config and recipe.
std::string ranAsYaml(const RunSummary& run);

} // namespace shardscope::storage
