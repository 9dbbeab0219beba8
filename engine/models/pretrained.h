#pragma once

// Building the model a recipe names and starting it from a pretrained folder: the engine's GPT
// from a GPT-2 folder (model.type gpt or the gpt2 family), the Llama/Mistral/Qwen2 decoders from
// their own safetensors by transformers' key names.

#include "engine/recipe/recipe.h"
#include "engine/models/models.h"

#include <memory>
#include <string>
#include <vector>

namespace shardscope::models {

// Builds the model a recipe names, initialised from the global torch seed. A Hugging Face family
// resolves its architecture first (config::resolveArchitecture); what does not resolve throws
// std::runtime_error with the reader's message.
std::shared_ptr<TrainableModel> buildModel(const config::ModelRecipe& recipe);

// Copies the weights of the Hugging Face folder `dir` into `model` (built by buildModel from the
// same recipe). Returns the folder's keys no parameter took (for a log line). Throws
// std::runtime_error naming the file or key when a weight is missing, truncated or misshapen.
std::vector<std::string> loadPretrained(TrainableModel& model, const config::ModelRecipe& recipe, const std::string& dir);

} // namespace shardscope::models
