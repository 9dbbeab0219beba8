#pragma once

// LoRA for the Hugging Face decoders, with PEFT's meanings (model.lora in the recipe): adapters on
// the targeted projections, everything else frozen; the adapter saved as PEFT saves it
// (adapter_config.json + adapter_model.safetensors, keys "base_model.model.<path>.lora_A.weight"),
// so that peft.PeftModel.from_pretrained(base, dir) gives the same model; and the merge PEFT's
// merge_and_unload does, for a full export.

#include "engine/recipe/recipe.h"
#include "engine/models/models.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::models {

struct LoraSummary {
    std::int64_t trainable = 0; // parameters that train (the adapters, and biases per model.lora.bias)
    std::int64_t total = 0;
    std::size_t adaptedModules = 0;
};

// Adds the adapters model.lora asks for (config::loraTargets decides where) and freezes the rest.
// Throws std::runtime_error for a model that is not a Llama-family decoder or a target that
// matches nothing.
LoraSummary applyLora(TrainableModel& model, const config::ModelRecipe& recipe);

using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;

// Writes `dir`/adapter_config.json and adapter_model.safetensors from the model's full parameters
// (by the engine's names). Throws on I/O errors.
void saveLoraAdapter(const std::string& dir, const NamedTensorList& parameters, const config::ModelRecipe& recipe);

// The parameters with every adapter merged into its base weight and the adapters dropped:
// W + lora_B @ lora_A * alpha / r.
NamedTensorList mergeLora(const NamedTensorList& parameters, const config::ModelRecipe& recipe);

} // namespace shardscope::models
