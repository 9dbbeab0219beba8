#pragma once

// `accelerate launch`'s command-line flags (Accelerate 1.15's launch_command_parser), each with
// what `shardscope launch` does with it, so that a user's command line works with the program
// name swapped: a flag either means what it means to Accelerate (most become the config key it
// overrides, as accelerate launch merges flags over the file) or is refused with the reason and
// what to use instead. docs/CONFIG.md's table is this table; tst_launch_flags holds it to
// Accelerate's own parser (every flag there is here).

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/validation.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::config {

enum class LaunchFlagUse {
    Native, // a `shardscope launch` option of the same name and meaning
    ConfigKey, // written into the config over the file's value
    Noted, // accepted; the launcher does the thing its own way (`what` says how)
    Refused, // not run by Shardscope: refused with `what` (the reason and what to use instead)
};

// Path: a file or folder, made absolute against the directory shardscope launch runs in (where
// accelerate launch's ranks would open it), before the config's own folder could take it.
enum class FlagValueKind { None, Text, Path, Int, Float, Bool, BoolList };

struct AccelerateLaunchFlag {
    std::string name; // with underscores, without dashes: "fsdp_version"
    FlagValueKind value = FlagValueKind::None; // None: a switch (argparse store_true)
    LaunchFlagUse use = LaunchFlagUse::ConfigKey;
    std::string section; // ConfigKey: "" (top level), "fsdp_config", "deepspeed_config", ...
    std::string key; // ConfigKey: the key written there
    std::string what; // what Shardscope does with it, for the docs table and the messages
};

// Every flag of `accelerate launch`, in its --help order; the Megatron-LM (--megatron_lm_*) and
// AWS flags are one entry each, matched by their prefix.
const std::vector<AccelerateLaunchFlag>& accelerateLaunchFlags();

// The flag named `name` ("--fsdp-version", "fsdp_version", "-m"); null when Accelerate has none.
const AccelerateLaunchFlag* findAccelerateLaunchFlag(std::string_view name);

struct GivenLaunchFlag {
    std::string name; // as findAccelerateLaunchFlag takes it
    std::optional<std::string> value; // none for a switch
};

// `config` with the flags merged in as accelerate launch merges them (a flag wins over the file;
// --use_fsdp, --multi_gpu and --use_deepspeed choose distributed_type), normalised as it reads
// them. Refused flags and misuses (Accelerate's own checks on flags) go to `problems`, keyed by
// the flag ("--tpu").
AccelerateConfig applyLaunchFlags(const AccelerateConfig& config, const std::vector<GivenLaunchFlag>& flags,
                                  std::vector<Diagnostic>& problems);

} // namespace shardscope::config
