#include "engine/train/runner.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/models/pretrained.h"
#include "engine/plan/machine_probe.h"
#include "engine/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace shardscope::train {

void runTraining(const DistEnv& env, const config::RunPlan& plan, EventSink& events)
{
    // The CPUs this rank's launcher was given (a SLURM job step's, not the whole machine's) over the
    // ranks it started, as on one machine.
    at::set_num_threads(plan.threads > 0 ? plan.threads : std::max(1, config::cpusOfThisProcess() / env.localWorldSize));
    Trainer trainer(env, plan, events);
    trainer.run();
}

void writeLogits(const config::Recipe& recipe, const std::string& weightsDir, const std::string& inputPath,
                 const std::string& outputPath)
{
    auto model = models::buildModel(recipe.model);
    models::loadPretrained(*model, recipe.model, weightsDir);
    model->eval();
    std::ifstream in(inputPath, std::ios::binary);
    std::string bytes(static_cast<std::size_t>(recipe.model.blockSize), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(in.gcount()));
    if (bytes.empty())
        throw std::runtime_error("cannot read input bytes from " + inputPath);
    auto ids = at::empty({1, static_cast<std::int64_t>(bytes.size())}, at::kLong);
    for (std::size_t i = 0; i < bytes.size(); ++i)
        ids[0][static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(static_cast<unsigned char>(bytes[i]));
    torch::NoGradGuard noGrad;
    checkpoint::writeSafetensors(outputPath, {{"input_ids", ids}, {"logits", model->forward(ids)}});
}

} // namespace shardscope::train
