#pragma once

// The optimizer, its learning-rate schedule and the model's frozen parameters, as Hugging Face's
// examples set them up (AdamW or SGD, weight decay off for the names no_weight_decay lists,
// get_{constant,linear,cosine}_schedule_with_warmup).

#include "engine/recipe/recipe.h"
#include "engine/parallel/data_parallel.h"

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardscope::train {

// The learning-rate factor of the schedule for 0-based optimizer step `step` of `total`.
double scheduleFactor(const config::ScheduleRecipe& s, std::int64_t step, std::int64_t total);
void setLearningRate(torch::optim::Optimizer& optimizer, double lr);

// The optimizer over `named` parameters: one group, or two when optimizer.no_weight_decay names
// some (those get weight_decay 0).
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const config::OptimizerRecipe& o, const parallel::NamedTensors& named);
// Bytes of the optimizer's state tensors (Adam's moments, SGD's momentum).
std::int64_t optimizerStateBytes(torch::optim::Optimizer& optimizer);

// model.frozen: parameters whose name starts with one of the prefixes stop requiring grad. A
// prefix that names nothing is an error (a typo would otherwise train what was meant frozen).
void freezeParameters(torch::nn::Module& model, const std::vector<std::string>& prefixes);

} // namespace shardscope::train
