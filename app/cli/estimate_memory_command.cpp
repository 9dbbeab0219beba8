// `shardscope estimate-memory`: per-rank memory of parameters, gradients, optimizer state and
// activations for a config (or for every sharding choice), as a table.

#include "app/cli/commands.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <optional>

namespace shardscope::cli {

namespace {

using namespace shardscope::config;

struct EstimateArgs {
    std::string configFile;
    std::string recipe;
    std::string params;
    std::int64_t layers = 0, hidden = 0, heads = 0, seq = 0, batch = 0, vocab = 0;
    int numProcesses = 0;
    std::string precision;
    bool allStages = false;
    bool markdown = false;
};

// A GPT recipe's parameter count: embeddings (tied head), and per block qkv + proj + MLP + 2 norms.
std::vector<std::string> row(const std::string& label, const std::string& precision, const MemoryEstimate& e)
{
    return {label,
            precision,
            formatBytes(e.parameters),
            formatBytes(e.gradients),
            formatBytes(e.optimizer),
            e.activations > 0 ? formatBytes(e.activations) : std::string("-"),
            formatBytes(e.deviceTotal()),
            e.hostTotal() > 0 ? formatBytes(e.hostTotal()) : std::string("-")};
}

// The model to estimate: the recipe's (with its optimizer), then the flags over it.
struct EstimatedModel {
    ModelShape shape;
    OptimizerKind optimizer = OptimizerKind::Adam;
};

Result<EstimatedModel> modelOf(const EstimateArgs& a)
{
    EstimatedModel out;
    ModelShape& model = out.shape;
    if (!a.recipe.empty()) {
        auto r = loadRecipe(a.recipe);
        if (!r)
            return r.error();
        model = modelShapeOf(*r);
        out.optimizer = optimizerKindOf(*r); // as the rank's own estimate counts it
    }
    if (!a.params.empty()) {
        auto p = parseParameterCount(a.params);
        if (!p)
            return makeError("--params '" + a.params + "' is not a parameter count; write e.g. 7B, 1.3e9 or 125M");
        model.parameters = *p;
    }
    for (auto [given, field] : {std::pair{a.layers, &model.layers},
                                {a.hidden, &model.hidden},
                                {a.heads, &model.heads},
                                {a.seq, &model.sequence},
                                {a.batch, &model.microBatch},
                                {a.vocab, &model.vocab}})
        if (given)
            *field = given;
    if (model.parameters <= 0)
        return makeError("no model size; pass --recipe R or --params N (e.g. 7B)");
    return out;
}

int runEstimate(const EstimateArgs& a)
{
    auto estimated = modelOf(a);
    if (!estimated) {
        std::cerr << "shardscope estimate-memory: error: " << estimated.error().message << "\n";
        return 1;
    }
    const ModelShape& model = estimated->shape;
    const OptimizerKind optimizer = estimated->optimizer;
    std::optional<PrecisionMode> precision;
    if (!a.precision.empty()) {
        auto mode = precision::parseMode(a.precision);
        if (!mode) {
            std::cerr << "shardscope estimate-memory: error: --precision: " << mode.error().message << "\n";
            return 1;
        }
        precision = *mode;
    }

    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> notes;
    int ranks = a.numProcesses;
    if (!a.configFile.empty()) {
        auto cfg = loadAccelerateConfig(a.configFile);
        if (!cfg) {
            std::cerr << "shardscope estimate-memory: error: " << cfg.error().message << "\n";
            return 1;
        }
        // --num_processes as accelerate launch takes it: over the file's, before anything is read
        // from it (hybrid sharding divides it by the machines).
        if (ranks > 0)
            cfg->setField("num_processes", Value(static_cast<std::int64_t>(ranks)));
        auto setup = memorySetupFromConfig(*cfg, std::filesystem::path(a.configFile).parent_path().string());
        if (!setup) {
            std::cerr << "shardscope estimate-memory: error: " << setup.error().message << "\n";
            return 1;
        }
        ranks = setup->sharding.shardRanks;
        const PrecisionMode p = precision.value_or(setup->precision);
        rows.push_back(row(setup->sharding.label, estimatePrecisionLabel(p),
                           estimateMemory(model, p, setup->sharding, optimizer, setup->fp8)));
        notes = setup->notes;
    }
    if (a.allStages || a.configFile.empty()) {
        if (ranks <= 0)
            ranks = 8;
        const std::vector<PrecisionMode> modes = precision ? std::vector<PrecisionMode>{*precision}
                                                           : std::vector<PrecisionMode>{PrecisionMode::No, PrecisionMode::Bf16,
                                                                                        PrecisionMode::Bf16Pure};
        for (PrecisionMode p : modes) {
            for (int stage = 0; stage <= 3; ++stage) {
                ModelStateLayout s;
                s.zeroStage = stage;
                s.shardRanks = ranks;
                s.autocast = stage == 0; // DDP: torch autocast keeps fp32 parameters
                const std::string label = stage == 0 ? "DDP (ZeRO-0)" : "ZeRO-" + std::to_string(stage);
                rows.push_back(row(label, estimatePrecisionLabel(p), estimateMemory(model, p, s, optimizer)));
            }
            ModelStateLayout off;
            off.zeroStage = 3;
            off.shardRanks = ranks;
            off.offloadOptimizer = off.offloadParams = true;
            rows.push_back(row("ZeRO-3 + offload", estimatePrecisionLabel(p), estimateMemory(model, p, off, optimizer)));
        }
    }
    const std::vector<std::string> header = {"sharding",  "precision",   "parameters",   "gradients",
                                             "optimizer", "activations", "device total", "host (offload)"};
    const std::string trained = model.trainable >= 0 ? " (" + std::to_string(model.trainable) + " train)" : std::string();
    const std::string t = "Memory per rank: " + std::to_string(model.parameters) + " parameters" + trained + ", "
                          + std::to_string(ranks) + " ranks";
    if (a.markdown) {
        std::cout << "| ";
        for (const auto& h : header)
            std::cout << h << " | ";
        std::cout << "\n|";
        for (std::size_t i = 0; i < header.size(); ++i)
            std::cout << "---|";
        std::cout << "\n";
        for (const auto& r : rows) {
            std::cout << "| ";
            for (const auto& c : r)
                std::cout << c << " | ";
            std::cout << "\n";
        }
    } else {
        std::cout << renderTable(t, header, rows);
    }
    for (const auto& n : notes)
        std::cout << "note: " << n << "\n";
    if (model.layers == 0 || model.hidden == 0 || model.sequence == 0 || model.microBatch == 0)
        std::cout << "note: activations not estimated; give --recipe, or --layers --hidden --heads --seq --batch\n";
    return 0;
}

} // namespace

void addEstimateMemoryCommand(CLI::App& app, CommandContext& context)
{
    auto a = std::make_shared<EstimateArgs>();
    auto* cmd = app.add_subcommand("estimate-memory", "Per-rank memory (parameters, gradients, optimizer, activations) "
                                                      "for a config and a model, like `accelerate estimate-memory` but "
                                                      "sharding-, batch- and activation-aware");
    cmd->add_option("--config_file,--config-file", a->configFile, "Accelerate config (sharding, offload, precision, ranks)");
    cmd->add_option("--recipe", a->recipe, "Recipe YAML (model shape and batch size)");
    cmd->add_option("--params", a->params, "Parameter count, e.g. 7B, 1.3e9, 125M");
    cmd->add_option("--layers", a->layers, "Transformer layers")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--hidden", a->hidden, "Hidden size")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--heads", a->heads, "Attention heads")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--seq", a->seq, "Sequence length (tokens)")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--batch", a->batch, "Micro-batch per rank (samples)")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--vocab", a->vocab, "Vocabulary size (fp32 logits)")->transform(numberIn({1, true, 1e9, true}));
    cmd->add_option("--num_processes,--num-processes", a->numProcesses, "Ranks (default: the config's, else 8)")
        ->transform(numberIn({1, true, 65536, true}));
    cmd->add_option("--precision", a->precision, "no, fp16, bf16, bf16-pure or fp8 (default: the config's)");
    cmd->add_flag("--all_stages,--all-stages", a->allStages, "Also list every ZeRO stage and offload");
    cmd->add_flag("--markdown", a->markdown, "Print a Markdown table");
    cmd->callback([a, &context] { context.exitCode = runEstimate(*a); });
}

} // namespace shardscope::cli
