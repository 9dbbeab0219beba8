#pragma once

// Per-rank memory of training: parameters, gradients, optimizer state and activations, for each
// precision mode and sharding choice. Model states follow the ZeRO paper (Rajbhandari et al.
// 2020) exactly: mixed-precision Adam keeps 2Ψ fp16 parameters + 2Ψ fp16 gradients + 12Ψ fp32
// master/momentum/variance = 16Ψ bytes for Ψ parameters; stage 1 shards the 12Ψ, stage 2 also
// the gradients, stage 3 also the parameters (4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N per rank).
// Activations use Korthikanti et al. 2022 (sbh(34 + 5as/h) bytes per layer in 16 bit).
// See docs/MEMORY_ESTIMATE.md.

#include "engine/common/result.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/plan/parallelism.h"
#include "engine/plan/precision_mode.h"
#include "engine/recipe/recipe.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

using precision::PrecisionMode;
enum class OptimizerKind { Adam, SgdMomentum, Sgd };

struct ModelShape {
    std::int64_t parameters = 0; // Ψ
    // Of those, the ones that train (gradients, optimizer state, master weights); -1: all. A LoRA
    // run trains its adapters only; the frozen base costs its parameters alone.
    std::int64_t trainable = -1;
    // Of the parameters, the ones tensor parallelism splits (the decoders' q, k, v, o, gate, up
    // and down projections, parallel/tensor_parallel.h); each of tp ranks holds 1/tp of them.
    std::int64_t splitParameters = 0;
    // Transformer shape for activations; 0 = unknown (activations are then not estimated).
    std::int64_t layers = 0;
    std::int64_t hidden = 0;
    std::int64_t heads = 0;
    std::int64_t sequence = 0; // tokens per sample
    std::int64_t microBatch = 0; // samples per rank per step
    std::int64_t vocab = 0;
    // The linear layers mixed_precision fp8 runs in fp8 (Accelerate's filter: every nn.Linear but the
    // first and the last, with both dimensions divisible by 16; see linearLayersOf).
    std::int64_t fp8Linears = 0;
};

struct MemoryEstimate {
    // bytes per rank on the device
    double parameters = 0;
    double gradients = 0;
    double optimizer = 0;
    double activations = 0;
    // bytes per rank in host memory (offload)
    double hostParameters = 0;
    double hostGradients = 0;
    double hostOptimizer = 0;
    // fp8 with delayed scaling: each fp8 layer's three scales and amax histories (fp32) on the device.
    double fp8Scaling = 0;
    double modelStates() const { return parameters + gradients + optimizer; }
    double deviceTotal() const { return modelStates() + activations + fp8Scaling; }
    double hostTotal() const { return hostParameters + hostGradients + hostOptimizer; }
};

// Bytes per parameter of (working parameters, gradients, optimizer incl. master weights).
struct StateBytes {
    double parameters, gradients, optimizer;
};
// Mixed precision (fp16, bf16 and fp8, whose model states Accelerate keeps as bf16 with fp32
// master weights) counts as the ZeRO paper's mixed-precision Adam; bf16-pure keeps no master copy.
StateBytes stateBytesPerParameter(PrecisionMode precision, OptimizerKind optimizer = OptimizerKind::Adam);

// How fp8 scales (PrecisionMode::Fp8 only): tensorwise keeps no state; delayed scaling keeps, per
// fp8 layer and for each of input, weight and output gradient, a scale and amaxHistoryLen amaxes.
struct Fp8Scaling {
    bool delayed = false;
    std::int64_t amaxHistoryLen = 1024;
};
MemoryEstimate estimateMemory(const ModelShape& model, PrecisionMode precision, const ModelStateLayout& layout,
                              OptimizerKind optimizer = OptimizerKind::Adam, const Fp8Scaling& fp8 = {});

// What an Accelerate config asks for, read by interpretParallelism (the reading the run plan
// uses): where the model states live, the precision, and how fp8 scales. A DeepSpeed JSON file's
// stage, offload and precision win over deepspeed_config when the file can be read (`baseDir`
// resolves it); a file that cannot be read is the error.
struct MemorySetup {
    PrecisionMode precision = PrecisionMode::No;
    ModelStateLayout sharding;
    Fp8Scaling fp8;
    std::vector<std::string> notes; // assumptions made, for the user
};
Result<MemorySetup> memorySetupFromConfig(const AccelerateConfig& config, const std::string& baseDir = {});

// The same for a planned run (the rank's out-of-memory report, the Configure page once the
// config and recipe plan): the plan's layout, precision, fp8 scaling and optimizer.
struct RunPlan;
MemorySetup memorySetupOf(const RunPlan& plan);
OptimizerKind optimizerKindOf(const Recipe& recipe); // adamw/adam: Adam; sgd with momentum or without
MemoryEstimate estimateRun(const RunPlan& plan);

// The estimate's name for a precision's model states: "fp32", "fp16/bf16 mixed", "bf16 pure", "fp8".
std::string estimatePrecisionLabel(PrecisionMode p);

// "7B", "1.3e9", "125M", "70000000" -> a parameter count.
std::optional<std::int64_t> parseParameterCount(const std::string& text);
// 1024-based, like accelerate estimate-memory: "13.04 GB".
// Accelerate's convert_bytes text ("104.31 GB": powers of 1024 with its unit names), so the
// table reads like `accelerate estimate-memory`. Elsewhere: engine/common/byte_format.h.
std::string formatBytes(double bytes);

// A box-drawn table (accelerate estimate-memory style) of rows x columns.
std::string renderTable(const std::string& title, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

// A recipe's parameter count and transformer shape, exactly as the engine builds its models (GPT:
// embeddings with the tied head, per block qkv + proj + MLP + 2 norms, the final norm; MLP: its
// linear layers). Shared by `shardscope estimate-memory --recipe` and the Configure page.
ModelShape modelShapeOf(const Recipe& recipe);

} // namespace shardscope::config
