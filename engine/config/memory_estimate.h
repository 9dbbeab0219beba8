#pragma once

// Per-rank memory of training: parameters, gradients, optimizer state and activations, for each
// precision mode and sharding choice. Model states follow the ZeRO paper (Rajbhandari et al.
// 2020) exactly: mixed-precision Adam keeps 2Ψ fp16 parameters + 2Ψ fp16 gradients + 12Ψ fp32
// master/momentum/variance = 16Ψ bytes for Ψ parameters; stage 1 shards the 12Ψ, stage 2 also
// the gradients, stage 3 also the parameters (4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N per rank).
// Activations use Korthikanti et al. 2022 (sbh(34 + 5as/h) bytes per layer in 16 bit).
// See docs/MEMORY_ESTIMATE.md.

#include "engine/common/result.h"
#include "engine/config/accelerate_config.h"
#include "engine/config/recipe.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::config {

enum class PrecisionMode {
    Fp32, // mixed_precision: no
    Mixed16, // fp16 or bf16 compute with fp32 master weights (Accelerate's fp16/bf16)
    PureBf16, // bf16 weights, grads and optimizer state, no master copy ("memory-constrained")
    Fp8, // fp8 matmuls; model states as Mixed16 (Accelerate keeps bf16 + fp32 master)
};
enum class OptimizerKind { Adam, SgdMomentum, Sgd };

struct ModelShape {
    std::int64_t parameters = 0; // Ψ
    // Of those, the ones that train (gradients, optimizer state, master weights); -1: all. A LoRA
    // run trains its adapters only; the frozen base costs its parameters alone.
    std::int64_t trainable = -1;
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

struct Sharding {
    int zeroStage = 0; // 0 = replicated (DDP); FSDP FULL_SHARD = 3, SHARD_GRAD_OP = 2
    int shardRanks = 1; // N: ranks the states are sharded over
    bool offloadOptimizer = false; // optimizer state (and master weights) in host memory
    bool offloadParams = false; // sharded parameters in host memory (stage 3 / FSDP offload)
    bool offloadGrads = false; // FSDP CPU offload also moves gradients
    bool activationCheckpointing = false;
    // Mixed precision by torch autocast (DDP, MULTI_CPU/GPU, a single process): parameters and
    // gradients stay fp32 and no master copy exists, so fp16/bf16 cost what fp32 costs in model
    // states. DeepSpeed and FSDP keep 16-bit parameters and an fp32 master copy instead.
    bool autocast = false;
    std::string label; // "ZeRO-2", "FSDP FULL_SHARD", ...
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
StateBytes stateBytesPerParameter(PrecisionMode precision, OptimizerKind optimizer = OptimizerKind::Adam);

// How fp8 scales (PrecisionMode::Fp8 only): tensorwise keeps no state; delayed scaling keeps, per
// fp8 layer and for each of input, weight and output gradient, a scale and amaxHistoryLen amaxes.
struct Fp8Scaling {
    bool delayed = false;
    std::int64_t amaxHistoryLen = 1024;
};
MemoryEstimate estimateMemory(const ModelShape& model, PrecisionMode precision, const Sharding& sharding,
                              OptimizerKind optimizer = OptimizerKind::Adam, const Fp8Scaling& fp8 = {});

// What an Accelerate config asks for: the sharding (DeepSpeed stage and offload, FSDP strategy
// and offload, parallelism shard size) and the precision. A DeepSpeed JSON file's stage and
// offload win over deepspeed_config when the file can be read (`baseDir` resolves it).
struct MemorySetup {
    PrecisionMode precision = PrecisionMode::Fp32;
    Sharding sharding;
    std::vector<std::string> notes; // assumptions made, for the user
};
Result<MemorySetup> memorySetupFromConfig(const AccelerateConfig& config, const std::string& baseDir = {});

PrecisionMode precisionFromName(const std::string& mixedPrecision); // no/fp16/bf16/fp8
std::string precisionName(PrecisionMode p);

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
