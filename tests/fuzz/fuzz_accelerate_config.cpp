// Fuzz target: the Accelerate config loader (engine/accelerate/accelerate_config.h), YAML and JSON.
// Invariants: a rejection is an error whose message names the file (or the key at fault); what
// loads survives validation, the launch-time checks and the DeepSpeed resolution without a crash,
// every diagnostic has a message, and saving what loaded converges (a save of a save is the same
// bytes) as in tst_config_fuzz.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/deepspeed_json.h"
#include "engine/accelerate/env_export.h"
#include "engine/accelerate/validation.h"
#include "tests/fuzz/fuzz_check.h"

using namespace shardscope::config;

namespace {

void checkSavingConverges(const AccelerateConfig& cfg, FileFormat format)
{
    const std::string saved = format == FileFormat::Yaml ? toYamlText(cfg) : toJsonText(cfg);
    auto back = parseAccelerateConfig(saved, "saved", format);
    FUZZ_CHECK(back.ok(), "the saved file does not load: " + back.error().message + "\n--- saved ---\n" + saved);
    const std::string second = format == FileFormat::Yaml ? toYamlText(*back) : toJsonText(*back);
    auto back2 = parseAccelerateConfig(second, "saved2", format);
    FUZZ_CHECK(back2.ok(), "the second save does not load: " + back2.error().message);
    const std::string third = format == FileFormat::Yaml ? toYamlText(*back2) : toJsonText(*back2);
    FUZZ_CHECK(third == second, "saving does not converge\n--- second ---\n" + second + "\n--- third ---\n" + third);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text = shardscope::fuzz::text(data, size);
    for (FileFormat format : {FileFormat::Yaml, FileFormat::Json}) {
        const std::string source = format == FileFormat::Yaml ? "fuzz.yaml" : "fuzz.json";
        auto cfg = parseAccelerateConfig(text, source, format);
        if (!cfg) {
            const std::string& m = cfg.error().message;
            FUZZ_CHECK(!m.empty(), "a rejection without a message");
            FUZZ_CHECK(m.find(source) != std::string::npos || m.find("distributed_type") != std::string::npos,
                       "the message does not say where: " + m);
            continue;
        }
        // A deepspeed_config_file is read from disk by the checks below; a fuzzed path could name
        // /dev/zero or a FIFO, which is the user's own doing, not a loader bug: leave those out.
        const Value* dsFile = cfg->nested("deepspeed_config", "deepspeed_config_file");
        const bool namesFile = dsFile && !(dsFile->isString() && (dsFile->asString() == "none" || dsFile->asString().empty()))
                               && !dsFile->isNull();
        if (!namesFile) {
            for (bool forLaunch : {false, true}) {
                ValidationOptions options;
                options.forLaunch = forLaunch;
                options.machine = MachineInfo{forLaunch ? 2 : 0, false, forLaunch, {}};
                for (const auto& d : validateConfig(*cfg, options)) {
                    FUZZ_CHECK(!d.message.empty(), "a diagnostic without a message at " + d.keyPath);
                    FUZZ_CHECK(!formatDiagnostic(*cfg, d).empty(), "an empty formatted diagnostic");
                }
            }
            LaunchOverrides overrides;
            overrides.numProcesses = 2;
            overrides.mixedPrecision = "bf16";
            (void)validateConfig(applyOverrides(*cfg, overrides), ValidationOptions{true, MachineInfo{1, true, true, {}}, {}});
            (void)launchEnvironment(*cfg);
            if (cfg->distributedType() == "DEEPSPEED") {
                DeepSpeedContext context;
                context.numProcesses = 2;
                context.microBatchPerGpu = 4;
                context.hiddenSize = 64;
                context.learningRate = 1e-3;
                context.weightDecay = 0.0;
                context.warmupSteps = 10;
                context.totalSteps = 100;
                auto resolved = resolveDeepSpeedConfig(*cfg, context);
                FUZZ_CHECK(resolved.ok() || !resolved.error().message.empty(), "a DeepSpeed rejection without a message");
            }
        }
        // `distributed_type: null` (or `compute_environment: null`, which selects SageMaker) loads
        // in Accelerate too, but its writer drops nulls, so the saved file no longer loads (or
        // loads as the other schema); validation reports these (see tst_config_fuzz).
        if (cfg->field("distributed_type").isNull() || cfg->field("compute_environment").isNull()
            || (cfg->kind() == ConfigKind::SageMaker
                && (cfg->field("ec2_instance_type").isNull() || cfg->field("iam_role_name").isNull())))
            continue;
        for (FileFormat out : {FileFormat::Yaml, FileFormat::Json})
            checkSavingConverges(*cfg, out);
    }
    return 0;
}
