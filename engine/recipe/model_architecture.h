#pragma once

// Where a recipe's Hugging Face model comes from, resolved the same way by the launcher (to refuse
// before launch what cannot run) and by each rank (to build it): model.pretrained's config.json,
// or the config.json keys the recipe's model section writes. Torch-free.

#include "engine/common/result.h"
#include "engine/recipe/hf_model_config.h"
#include "engine/recipe/recipe.h"

namespace shardscope::config {

// The architecture of a recipe whose model.type is a Hugging Face family (or auto). `source`
// names the recipe in messages. A pretrained folder of another family than model.type names is
// an error.
Result<HfModelConfig> resolveArchitecture(const ModelRecipe& model, const std::string& source);

// Everything checkable before launch: the architecture resolves, the engine implements all of it
// for sequences of model.block_size tokens (unsupportedFeatures, every line in one message), and
// the byte-level text's tokens fit its vocabulary.
Result<HfModelConfig> checkArchitecture(const Recipe& recipe, const std::string& source);

// The projections model.lora adapts, by module path ("model.layers.0.self_attn.q_proj"), matched
// as PEFT matches a target_modules list: a name equals the path or its last dotted parts. An entry
// that matches nothing is an error naming it and the projections there are.
Result<std::vector<std::string>> loraTargets(const LoraRecipe& lora, const HfModelConfig& architecture);

// The config.json an export of this model writes (before its dtype is set): the pretrained
// folder's own, or the recipe's keys with model_type and architectures added.
Result<std::string> architectureConfigJson(const ModelRecipe& model);

// The model recipe with the architecture's sizes in the fields the engine's own GPT and the data
// code read: vocab_size, and for gpt2 also n_layer, n_embd and n_head.
ModelRecipe withArchitecture(ModelRecipe model, const HfModelConfig& architecture);

} // namespace shardscope::config
