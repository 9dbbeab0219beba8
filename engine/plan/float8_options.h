#pragma once

// How a run with mixed_precision: fp8 runs, and which of its model's linear layers it runs in fp8.
// Torch-free like the rest of the settings (engine/plan): the plan carries it to the ranks, the estimator and
// the Configure page read it too.
//
// The options are read the way Accelerate's runtime reads them: from the ACCELERATE_FP8_*
// variables `accelerate launch` sets from fp8_config (env_export), so the questionnaire's
// spellings the runtime ignores (amax_history_length, amax_compute_algorithm) are ignored here
// too, and the CLI defaults apply. What this engine does not implement is refused, never ignored.

#include "engine/recipe/recipe.h"
#include "engine/accelerate/validation.h"

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::config {

struct Float8Options {
    // fp8_config.backend: AO (torchao's tensorwise dynamic scaling; the default, as Accelerate
    // prefers torchao) or TE (Transformer Engine's delayed scaling).
    enum class Scaling { Tensorwise, Delayed };
    Scaling scaling = Scaling::Tensorwise;
    // Delayed scaling (TE's DelayedScaling, fp8_format HYBRID).
    std::int64_t amaxHistoryLen = 1024; // amax_history_len
    bool amaxComputeMax = false; // amax_compute_algo: max (true) or most_recent (false, the default)
    int margin = 0;
    std::int64_t interval = 1;
    // Whether evaluation runs in fp8: always with AO (torchao has no eval switch); with TE only
    // under use_autocast_during_eval.
    bool inEval = true;
    // AO's enable_fsdp_float8_all_gather (default on): asks for fp8 weight all-gathers under FSDP.
    bool fsdpFloat8AllGather = true;

    std::string describe() const; // "tensorwise dynamic scaling (AO)", "delayed scaling (TE, ...)"
};

// From a plan's environment (NAME=VALUE). Each value the engine cannot honour is an error keyed
// fp8_config.<key>, saying what is implemented instead.
Float8Options float8OptionsFrom(const std::vector<std::string>& environment, std::vector<Diagnostic>& problems);

// A linear layer of a recipe's model: its module path and shape, in the order torch's
// named_modules() visits it.
struct LinearLayer {
    std::string name; // "layers.1", "h.0.attn.c_attn", "model.layers.0.self_attn.q_proj", "lm_head"
    std::int64_t in = 0;
    std::int64_t out = 0;
    bool fp8 = false; // what fp8 converts (below)
};

// Every nn.Linear of the model the recipe builds, marked as Accelerate's torchao filter
// (accelerate.utils.ao.filter_linear_layers) marks it: fp8 unless it is the first or the last
// linear layer, or a dimension is not divisible by 16. The gpt2 family has none: transformers
// builds GPT-2's projections as Conv1D, which no fp8 backend converts. Empty when the
// architecture does not resolve.
std::vector<LinearLayer> linearLayersOf(const Recipe& recipe);
// How many of those are fp8, counted without listing them (the estimator's: a recipe may ask for
// more layers than could ever be listed).
std::int64_t fp8LinearCount(const Recipe& recipe);

} // namespace shardscope::config
