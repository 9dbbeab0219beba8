// `shardscope launch --config_file`: an Accelerate config decides the run's shape (ranks, backend,
// FSDP strategy and wrap policy, ZeRO stage, mixed precision, Accelerate's environment), the
// launch flags win over it, and what the engine cannot do is refused before any rank starts.

#include "engine/accelerate/accelerate_config.h"
#include "engine/plan/run_plan.h"
#include "tests/common/config_text.h"
#include "tests/common/files.h"
#include "tests/common/recipe_run.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

using namespace shardscope;
using config::PlanResult;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");

config::AccelerateConfig parse(const char* yaml) { return testing::parseConfig(yaml, "test.yaml"); }

// A recipe with nothing to read from disk (the planner checks a text recipe's file).
config::Recipe mlpRecipe()
{
    config::Recipe r;
    r.model.type = "mlp";
    r.data.type = "synthetic_regression";
    return r;
}

// The plan on a machine without GPUs; FSDP and DeepSpeed run there on the CPU engine, which a
// config asks for with use_cpu: true (added when the text does not say).
PlanResult planOf(const char* yaml, const std::vector<std::string>& engineFlags = {},
                  const config::EnvironmentOptions& environment = {}, int gpus = 0)
{
    const std::string text = std::string(yaml).find("use_cpu") == std::string::npos
                                     && std::string(yaml).find("MULTI_GPU") == std::string::npos
                                 ? "use_cpu: true\n" + std::string(yaml)
                                 : std::string(yaml);
    config::PlanInputs in;
    in.config = config::applyOverrides(parse(text.c_str()), {});
    in.recipe = mlpRecipe();
    in.recipeSource = "r.yaml";
    in.engineFlags = engineFlags;
    in.machine.gpuCount = gpus;
    in.environment = environment;
    return config::buildRunPlan(in);
}

std::string problemsOf(const PlanResult& r)
{
    std::string text;
    for (const auto& d : r.problems)
        text += d.keyPath + ": " + d.message + "\n";
    return text;
}

bool hasEnv(const config::RunPlan& plan, const std::string& entry)
{
    return std::find(plan.environment.begin(), plan.environment.end(), entry) != plan.environment.end();
}

} // namespace

#define VERIFY_PLAN(r) QVERIFY2((r).ok(), problemsOf(r).c_str())

class TestLaunchConfig : public QObject {
    Q_OBJECT
private slots:
    void fsdpConfigBecomesEngineOptions()
    {
        auto r = planOf("compute_environment: LOCAL_MACHINE\n"
                        "distributed_type: FSDP\n"
                        "mixed_precision: bf16\n"
                        "num_processes: 4\n"
                        "fsdp_config:\n"
                        "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                        "  fsdp_transformer_layer_cls_to_wrap: GPTBlock, Block2\n"
                        "  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
                        "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
        VERIFY_PLAN(r);
        const auto& plan = *r.plan;
        QCOMPARE(plan.numProcesses, 4);
        QCOMPARE(plan.distributedType, std::string("FSDP"));
        QVERIFY(plan.backend == dist::BackendKind::Gloo); // no GPU here
        QVERIFY(plan.precision == precision::PrecisionMode::Bf16);
        QVERIFY(plan.sharding);
        QCOMPARE(plan.sharding->zeroStage, 3);
        QCOMPARE(plan.sharding->reshardAfterForward, false); // SHARD_GRAD_OP
        QVERIFY(plan.sharding->wrapPolicy == parallel::WrapPolicy::TransformerBased);
        QCOMPARE(plan.sharding->transformerLayerClasses, (std::vector<std::string>{"GPTBlock", "Block2"}));
        // unset in the file: accelerate launch's defaults (true)
        QCOMPARE(plan.sharding->rankZeroLoadsWeights, true);
        QCOMPARE(plan.sharding->useOrigParams, true);
        QCOMPARE(plan.sharding->offloadToHost, false);
        QVERIFY(plan.stateDictType == config::StateDictType::Sharded);
        QVERIFY(hasEnv(plan, "ACCELERATE_USE_FSDP=true"));
        QVERIFY(hasEnv(plan, "ACCELERATE_MIXED_PRECISION=bf16"));
    }

    void fsdp2AndDeepSpeed()
    {
        auto v2 = planOf("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                         "  fsdp_reshard_after_forward: false\n");
        VERIFY_PLAN(v2);
        QCOMPARE(v2.plan->sharding->reshardAfterForward, false);
        QVERIFY(v2.plan->sharding->wrapPolicy == parallel::WrapPolicy::NoWrap); // the file names none
        auto zero = planOf("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n");
        VERIFY_PLAN(zero);
        QCOMPARE(zero.plan->sharding->zeroStage, 3);
        QCOMPARE(zero.plan->sharding->reshardRootAfterForward, true);
        QCOMPARE(zero.plan->sharding->rankZeroLoadsWeights, true); // zero3_init: the plugin's stage-3 default
        QCOMPARE(zero.plan->sharding->offloadToHost, false);
        auto offload = planOf("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
                              "  offload_optimizer_device: cpu\n  offload_param_device: cpu\n");
        VERIFY_PLAN(offload);
        QCOMPARE(offload.plan->sharding->offloadToHost, true);
        auto knobs = planOf("distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: fp16\ndeepspeed_config:\n"
                            "  zero_stage: 3\n  gradient_accumulation_steps: 4\n  gradient_clipping: 0.5\n"
                            "  zero3_init_flag: false\n  zero3_save_16bit_model: true\n");
        VERIFY_PLAN(knobs);
        QCOMPARE(knobs.plan->recipe.gradientAccumulationSteps, std::int64_t{4});
        QCOMPARE(knobs.plan->recipe.maxGradNorm, 0.5);
        QCOMPARE(knobs.plan->sharding->rankZeroLoadsWeights, false);
        QCOMPARE(knobs.plan->recipe.exportModel.dtype, std::string("float16")); // 16-bit weights of an fp16 run
        // From the JSON file: numbers win over the recipe, "auto" leaves the recipe's value.
        QTemporaryDir dir;
        QFile json(dir.filePath("ds.json"));
        QVERIFY(json.open(QIODevice::WriteOnly));
        json.write("{\"gradient_accumulation_steps\": 2, \"gradient_clipping\": \"auto\", "
                   "\"zero_optimization\": {\"stage\": 2}}");
        json.close();
        const QByteArray withFile = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: "
                                    + json.fileName().toUtf8() + "\n";
        auto fromFile = planOf(withFile.constData());
        VERIFY_PLAN(fromFile);
        QCOMPARE(fromFile.plan->sharding->zeroStage, 2);
        QCOMPARE(fromFile.plan->recipe.gradientAccumulationSteps, std::int64_t{2});
        QCOMPARE(fromFile.plan->recipe.maxGradNorm, mlpRecipe().maxGradNorm);
        auto hybrid = planOf("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                             "  fsdp_sharding_strategy: HYBRID_SHARD_ZERO2\n  fsdp_offload_params: true\n"
                             "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: true\n"
                             "  fsdp_use_orig_params: true\n  fsdp_activation_checkpointing: true\n");
        VERIFY_PLAN(hybrid);
        const auto& h = *hybrid.plan->sharding;
        QCOMPARE(h.reshardAfterForward, false);
        QCOMPARE(h.hybridGroupSize, 2); // one machine's ranks
        QCOMPARE(h.offloadToHost, true);
        QCOMPARE(h.rankZeroLoadsWeights, true);
        QCOMPARE(h.useOrigParams, true);
        QCOMPARE(h.activationCheckpointing, true);
        QVERIFY(hybrid.plan->stateDictType == config::StateDictType::Full);
    }

    // The engine flags after -- win over the config; a wrong one is an error naming it.
    void engineFlagsWinAndAreChecked()
    {
        auto r = planOf("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n",
                        {"--fsdp_state_dict_type", "SHARDED_STATE_DICT", "--fsdp_transformer_layer_cls_to_wrap", "A", "B",
                         "--fsdp_auto_wrap_policy=TRANSFORMER_BASED_WRAP", "--max_steps", "7", "--crash-in-checkpoint", "3"});
        VERIFY_PLAN(r);
        QVERIFY(r.plan->stateDictType == config::StateDictType::Sharded);
        QCOMPARE(r.plan->sharding->transformerLayerClasses, (std::vector<std::string>{"A", "B"}));
        QCOMPARE(r.plan->recipe.maxSteps, std::int64_t{7});
        QCOMPARE(r.plan->faults.crashInCheckpointAtStep, std::int64_t{3});
        auto wrong = planOf("distributed_type: MULTI_CPU\nnum_processes: 2\n",
                            {"--zero_stag", "2", "--fsdp_sharding_strategy", "HALF_SHARD", "--max_steps"});
        QVERIFY(!wrong.ok());
        const std::string text = problemsOf(wrong);
        QVERIFY2(text.find("--zero_stag: engine flag --zero_stag: unknown; did you mean --zero_stage?") != std::string::npos,
                 text.c_str());
        QVERIFY2(text.find("'HALF_SHARD' is not one of FULL_SHARD") != std::string::npos, text.c_str());
        QVERIFY2(text.find("--max_steps: needs a value") != std::string::npos, text.c_str());
        // Numbers say what was wrong (#43 point 10: "'2.5' is not a number", of a count past int64 too).
        const auto numbers = [&](const std::vector<std::string>& flags) {
            return problemsOf(planOf("distributed_type: MULTI_CPU\nnum_processes: 2\n", flags));
        };
        const std::string fractional = numbers({"--max_steps", "2.5"});
        QVERIFY2(fractional.find("'2.5' is not a whole number; give one from 1 to 1099511627776") != std::string::npos,
                 fractional.c_str());
        const std::string huge = numbers({"--max_steps", "99999999999999999999999"});
        QVERIFY2(huge.find("'99999999999999999999999' is out of range; give a whole number from 1 to") != std::string::npos,
                 huge.c_str());
        const std::string words = numbers({"--zero_stage", "abc"});
        QVERIFY2(words.find("'abc' is not a whole number; give one from 0 to 3") != std::string::npos, words.c_str());
        auto exponent = planOf("distributed_type: MULTI_CPU\nnum_processes: 2\n", {"--max_steps", "1e3"});
        VERIFY_PLAN(exponent);
        QCOMPARE(exponent.plan->recipe.maxSteps, std::int64_t{1000});
    }

    // Every problem at once, not the first: the config's, the engine's and the recipe's.
    void allProblemsAreReportedTogether()
    {
        config::PlanInputs in;
        in.config = config::applyOverrides(parse("distributed_type: DEEPSPEED\nnum_processes: 2\nmain_process_port: 99999\n"
                                                 "deepspeed_config:\n  zero_stage: 2\n  offload_optimizer_device: nvme\n"),
                                           {});
        config::Recipe recipe; // a text recipe whose file does not exist
        recipe.data.path = "/nonexistent/text.txt";
        in.recipe = recipe;
        in.recipeSource = "r.yaml";
        in.maxSteps = 5;
        const auto r = config::buildRunPlan(in);
        QVERIFY(!r.ok());
        auto has = [&](const std::string& key) {
            return std::any_of(r.problems.begin(), r.problems.end(), [&](const config::Diagnostic& d) {
                return d.keyPath == key && d.severity == config::Severity::Error;
            });
        };
        QVERIFY2(has("main_process_port"), problemsOf(r).c_str());
        QVERIFY2(has("deepspeed_config.offload_optimizer_device"), problemsOf(r).c_str());
        QVERIFY2(has("recipe"), problemsOf(r).c_str());
    }

    // plan.json holds the whole plan: what is written is what a rank reads.
    void planJsonRoundTrips()
    {
        auto r = planOf("distributed_type: FSDP\nnum_processes: 4\nmixed_precision: fp16\nfsdp_config:\n"
                        "  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n"
                        "  fsdp_min_num_params: 1234\n  fsdp_backward_prefetch: BACKWARD_PRE\n",
                        {"--threads", "3", "--inject-nonfinite-grad", "4", "--dump-params", "/tmp/p.safetensors"});
        VERIFY_PLAN(r);
        config::RunPlan plan = *r.plan;
        plan.runDir = "/runs/x";
        plan.resumeFrom = "/runs/y/checkpoints/step_2";
        plan.recipe.name = "round-trip";
        plan.recipe.optimizer.lr = 0.000123456789;
        const std::string json = config::planToJson(plan);
        auto back = config::planFromJson(json, "plan.json");
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(config::planToJson(*back), json);
        QCOMPARE(back->recipe.optimizer.lr, 0.000123456789);
        QCOMPARE(back->sharding->minNumParams, std::int64_t{1234});
        QCOMPARE(back->sharding->hybridGroupSize, 4);
        QCOMPARE(back->faults.injectNonfiniteGradAtStep, std::int64_t{4});
        QCOMPARE(back->threads, 3);
        QVERIFY(back->precision == precision::PrecisionMode::Fp16);

        // A damaged plan names what is wrong.
        auto damaged = [&](const std::string& from, const std::string& to) {
            std::string text = json;
            const auto at = text.find(from);
            if (at == std::string::npos)
                qFatal("%s not in the plan", from.c_str());
            text.replace(at, from.size(), to);
            auto read = config::planFromJson(text, "plan.json");
            return read.ok() ? std::string("(read fine)") : read.error().message;
        };
        QCOMPARE(damaged("\"format\": 2", "\"format\": 9"),
                 std::string("plan.json: run plan format 9, but this worker reads format 2; launch it with the shardscope of "
                             "this worker"));
        QCOMPARE(damaged("\"threads\": 3", "\"threads\": \"3\""), std::string("plan.json: threads has the wrong type (string)"));
        QCOMPARE(damaged("\"backend\": \"gloo\"", "\"backend\": \"mpi\""),
                 std::string("plan.json: backend 'mpi' is not gloo or nccl"));
        QVERIFY(damaged("\"zero_stage\": 3", "\"zero_stage\": 7").find("sharding.zero_stage 7") != std::string::npos);
        // The memory layout the rank's estimate reads (#41) is checked as well.
        QVERIFY(damaged("\"shard_ranks\": 4", "\"shard_ranks\": 0").find("state_layout.") != std::string::npos);
        QVERIFY(config::planFromJson("[1]", "p.json").error().message.find("not a JSON object") != std::string::npos);
    }

    // fp8_config as Accelerate's runtime reads it (its ACCELERATE_FP8_* variables): the TE keys
    // become delayed scaling, the questionnaire's spellings the runtime ignores are ignored (with
    // validation's warning), no backend means AO; the plan carries them to the ranks.
    void fp8ConfigBecomesTheScalingRecipe()
    {
        auto r = planOf("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
                        "  amax_history_len: 16\n  amax_compute_algo: max\n  margin: 2\n  interval: 3\n"
                        "  use_autocast_during_eval: true\n");
        VERIFY_PLAN(r);
        QVERIFY(r.plan->fp8.scaling == config::Float8Options::Scaling::Delayed);
        QCOMPARE(r.plan->fp8.amaxHistoryLen, std::int64_t{16});
        QVERIFY(r.plan->fp8.amaxComputeMax);
        QCOMPARE(r.plan->fp8.margin, 2);
        QCOMPARE(r.plan->fp8.interval, std::int64_t{3});
        QVERIFY(r.plan->fp8.inEval);
        auto back = config::planFromJson(config::planToJson(*r.plan), "plan.json");
        QVERIFY(back.ok());
        QCOMPARE(config::planToJson(*back), config::planToJson(*r.plan));
        QVERIFY(back->fp8.amaxComputeMax && back->fp8.amaxHistoryLen == 16 && back->fp8.interval == 3);

        r = planOf("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
                   "  amax_history_length: 16\n  amax_compute_algorithm: max\n");
        VERIFY_PLAN(r);
        QCOMPARE(r.plan->fp8.amaxHistoryLen, std::int64_t{1024}); // as accelerate launch + TERecipeKwargs
        QVERIFY(!r.plan->fp8.amaxComputeMax);
        QVERIFY(!r.plan->fp8.inEval);
        QVERIFY2(problemsOf(r).find("fp8_config.amax_history_length") != std::string::npos, problemsOf(r).c_str());
        // The warning says what happens: the value has no effect (it once said it was honoured).
        QVERIFY2(problemsOf(r).find("no effect and the default is used") != std::string::npos, problemsOf(r).c_str());

        r = planOf("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n");
        VERIFY_PLAN(r);
        QVERIFY(r.plan->fp8.scaling == config::Float8Options::Scaling::Tensorwise);
        QVERIFY(r.plan->fp8.inEval);
        QVERIFY2(problemsOf(r).find("fp8 on the CPU runs emulated") != std::string::npos, problemsOf(r).c_str());

        config::PlanInputs lora;
        lora.recipe = mlpRecipe();
        lora.recipe->model.lora.enabled = true;
        lora.mixedPrecision = "fp8";
        auto refused = config::buildRunPlan(lora);
        QVERIFY(!refused.ok());
        QVERIFY2(problemsOf(refused).find("mixed_precision fp8 with model.lora is not implemented") != std::string::npos,
                 problemsOf(refused).c_str());
    }

    void cpuFsdpGetsAccelerateFsdpEnvironment()
    {
        // use_cpu: true does not change Accelerate's launcher: the FSDP variables are exported.
        config::EnvironmentOptions environment;
        environment.physicalCores = 8;
        auto r = planOf("distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n  fsdp_version: 2\n", {},
                        environment);
        VERIFY_PLAN(r);
        const auto& plan = *r.plan;
        QVERIFY(hasEnv(plan, "ACCELERATE_USE_FSDP=true"));
        QVERIFY(hasEnv(plan, "FSDP_VERSION=2"));
        QVERIFY(hasEnv(plan, "FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD=false"));
        QVERIFY(hasEnv(plan, "OMP_NUM_THREADS=4")); // 8 physical cores / 2 local ranks
        QVERIFY(std::none_of(plan.environment.begin(), plan.environment.end(), [](const std::string& e) {
            return e.rfind("ACCELERATE_USE_CPU=", 0) == 0 || e.rfind("KMP_", 0) == 0;
        }));
        environment.inheritedOmpThreads = 3;
        r = planOf("distributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n", {}, environment);
        VERIFY_PLAN(r);
        QVERIFY(hasEnv(*r.plan, "OMP_NUM_THREADS=3")); // the launching environment's wins
        // and the engine's ranks follow it, as PyTorch's would, unless --threads says otherwise.
        QCOMPARE(r.plan->threads, 3);
        r = planOf("distributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n", {"--threads", "2"}, environment);
        VERIFY_PLAN(r);
        QCOMPARE(r.plan->threads, 2);
        environment.inheritedOmpThreads.reset();
        r = planOf("distributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n", {}, environment);
        VERIFY_PLAN(r);
        QCOMPARE(r.plan->threads, 0); // cores / local ranks, decided by each rank
    }

    void unsupportedChoicesAreRefused_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("expected");
        QTest::newRow("MULTI_GPU without a GPU") << "distributed_type: MULTI_GPU\nnum_processes: 2\n"
                                                 << "distributed_type"
                                                 << "needs GPUs but this machine has none";
        QTest::newRow("optimizer offload to nvme") << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                                      "  zero_stage: 2\n  offload_optimizer_device: nvme\n"
                                                   << "deepspeed_config.offload_optimizer_device"
                                                   << "deepspeed_config.offload_optimizer_device: nvme is not supported";
        QTest::newRow("parameter offload below stage 3") << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                                            "  zero_stage: 2\n  offload_param_device: cpu\n"
                                                         << "deepspeed_config.offload_param_device"
                                                         << "parameters are offloaded only with ZeRO stage 3";
        QTest::newRow("efficient loading without sync")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
               "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: false\n"
            << "fsdp_config.fsdp_sync_module_states"
            << "set `--fsdp_sync_module_states` to `True`";
        QTest::newRow("efficient loading by default, without sync") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                                       "  fsdp_sync_module_states: false\n"
                                                                    << "fsdp_config.fsdp_sync_module_states"
                                                                    << "set `--fsdp_sync_module_states` to `True`";
        QTest::newRow("offload with NO_SHARD") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                  "  fsdp_sharding_strategy: NO_SHARD\n  fsdp_offload_params: true\n"
                                               << "fsdp_config.fsdp_offload_params"
                                               << "fsdp_offload_params: true with NO_SHARD is not supported";
        QTest::newRow("activation offload")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
               "  fsdp_activation_checkpointing: true\n  fsdp_activation_checkpointing_offload: true\n"
            << "fsdp_config.fsdp_activation_checkpointing_offload"
            << "does not offload them";
        QTest::newRow("NO with 2 processes") << "distributed_type: 'NO'\nnum_processes: 2\n"
                                             << "num_processes"
                                             << "runs one process";
        QTest::newRow("network address, one machine")
            << "distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_ip: 10.1.2.3\n"
            << "main_process_ip"
            << "no authentication";
        // fp8_config: what the engine does not implement is refused, saying what it does.
        const char* fp8 = "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n";
        QTest::newRow("fp8 MS-AMP") << QString(fp8) + "  backend: MSAMP\n"
                                    << "fp8_config.backend"
                                    << "MSAMP (MS-AMP's O1/O2 optimizer-level fp8) is not implemented";
        QTest::newRow("fp8 format E4M3") << QString(fp8) + "  backend: TE\n  fp8_format: E4M3\n"
                                         << "fp8_config.fp8_format"
                                         << "it runs HYBRID (e4m3 forward, e5m2 gradients";
        QTest::newRow("fp8 override") << QString(fp8) + "  backend: TE\n  override_linear_precision: [false, true, false]\n"
                                      << "fp8_config.override_linear_precision"
                                      << "does not implement; every matmul of an fp8 layer runs in fp8";
        QTest::newRow("fp8 mxfp8") << QString(fp8) + "  backend: TE\n  use_mxfp8_block_scaling: true\n"
                                   << "fp8_config.use_mxfp8_block_scaling"
                                   << "MXFP8";
        QTest::newRow("fp8 delayed with checkpointing")
            << "distributed_type: FSDP\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\nfsdp_config:\n"
               "  fsdp_activation_checkpointing: true\n"
            << "fsdp_config.fsdp_activation_checkpointing"
            << "recomputed forward would record its amaxes twice";
    }
    void unsupportedChoicesAreRefused()
    {
        QFETCH(QString, yaml);
        QFETCH(QString, key);
        QFETCH(QString, expected);
        const QByteArray text = yaml.toUtf8();
        auto r = planOf(text.constData());
        QVERIFY(!r.ok());
        const auto found = std::find_if(r.problems.begin(), r.problems.end(), [&](const config::Diagnostic& d) {
            return d.keyPath == key.toStdString() && d.message.find(expected.toStdString()) != std::string::npos;
        });
        QVERIFY2(found != r.problems.end(), problemsOf(r).c_str());
    }

    // A real launch: the config's FSDP strategy trains (as its loss equals DDP's), the flag's
    // --num_processes wins over the file's, and the history records the distributed type.
    void launchFollowsTheConfigAndFlagsWin()
    {
        QTemporaryDir dir;
        QFile config(dir.filePath("fsdp.yaml"));
        config.open(QIODevice::WriteOnly);
        config.write(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: 'no'\nnum_processes: 4\n"
            "num_machines: 1\nmachine_rank: 0\nuse_cpu: true\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
            "  fsdp_transformer_layer_cls_to_wrap: GPTBlock\n  fsdp_sharding_strategy: FULL_SHARD\n");
        config.close();
        QFile recipe(dir.filePath("r.yaml"));
        recipe.open(QIODevice::WriteOnly);
        recipe.write("name: cfg\nmodel: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}\n"
                     "training: {per_device_batch_size: 4, max_steps: 6}\n");
        recipe.close();
        auto launch = [&](const QString& name, const QStringList& extra) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(kShardscope, QStringList{"launch", "--recipe", recipe.fileName(), "--runs_dir", dir.filePath("runs"),
                                             "--run_name", name, "--num_processes", "2"}
                                     + extra);
            p.waitForFinished(120000);
            QVector<double> losses;
            int ranks = 0;
            QFile events(dir.filePath("runs/" + name + "/events.jsonl"));
            if (events.open(QIODevice::ReadOnly))
                while (!events.atEnd()) {
                    const auto e = QJsonDocument::fromJson(events.readLine()).object();
                    if (e["type"] == "step" && e["rank"] == 0)
                        losses << e["loss"].toDouble();
                    if (e["type"] == "hello")
                        ++ranks;
                }
            return std::make_tuple(p.exitCode(), QString::fromUtf8(p.readAll()), losses, ranks);
        };
        auto [fsdpCode, fsdpOut, fsdpLosses, fsdpRanks] = launch("fsdp", {"--config_file", config.fileName()});
        QVERIFY2(fsdpCode == 0, qPrintable(fsdpOut));
        QVERIFY(fsdpOut.contains("(FSDP)"));
        QCOMPARE(fsdpRanks, 2); // the flag's 2, not the file's 4
        // Every rank ran the plan the launcher wrote, and nothing else described the run.
        auto plan = config::loadPlan(dir.filePath("runs/fsdp/plan.json").toStdString());
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QCOMPARE(plan->numProcesses, 2);
        QVERIFY(plan->sharding && plan->sharding->reshardAfterForward);
        QCOMPARE(plan->runDir, dir.filePath("runs/fsdp").toStdString());
        auto [ddpCode, ddpOut, ddpLosses, ddpRanks] = launch("ddp", {});
        QVERIFY(ddpCode == 0);
        QCOMPARE(fsdpLosses.size(), 6);
        for (int i = 0; i < 6; ++i)
            QVERIFY(std::abs(fsdpLosses[i] - ddpLosses[i]) <= 1e-5 * std::abs(ddpLosses[i]));
    }

    // #46: an accelerate launch command line with the program name swapped. Its flags are merged
    // over the file (the plan runs them, the run folder keeps the merged config), refused flags
    // stop the launch before anything starts, and the first positional argument is the training
    // script, whatever flags follow it.
    void accelerateLaunchCommandLinesWork()
    {
        QTemporaryDir dir;
        QFile config(dir.filePath("cpu.yaml"));
        config.open(QIODevice::WriteOnly);
        config.write("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n");
        config.close();
        QFile recipe(dir.filePath("r.yaml"));
        recipe.open(QIODevice::WriteOnly);
        recipe.write("name: flags\nmodel: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}\n"
                     "training: {per_device_batch_size: 2, max_steps: 2}\n");
        recipe.close();
        auto run = [&](const QStringList& args) {
            QProcess p;
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(kShardscope, QStringList{"launch"} + args);
            p.waitForFinished(120000);
            return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAll()));
        };
        auto [code, out] = run({"--config_file", config.fileName(), "--use_fsdp", "--fsdp-sharding-strategy", "SHARD_GRAD_OP",
                                "--fsdp_auto_wrap_policy=TRANSFORMER_BASED_WRAP", "--recipe", recipe.fileName(), "--runs_dir",
                                dir.filePath("runs"), "--run_name", "flags", "--no_history"});
        QVERIFY2(code == 0, qPrintable(out));
        QVERIFY2(out.contains("(FSDP)"), qPrintable(out));
        auto plan = config::loadPlan(dir.filePath("runs/flags/plan.json").toStdString());
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QVERIFY(plan->sharding && !plan->sharding->reshardAfterForward); // SHARD_GRAD_OP, from the flag
        QFile kept(dir.filePath("runs/flags/config.yaml"));
        QVERIFY(kept.open(QIODevice::ReadOnly));
        const QByteArray keptText = kept.readAll();
        QVERIFY2(keptText.contains("distributed_type: FSDP") && keptText.contains("fsdp_sharding_strategy: SHARD_GRAD_OP"),
                 keptText.constData());

        std::tie(code, out) = run({"--tpu", "--megatron-lm-tp-degree", "2", "--recipe", recipe.fileName(), "--runs_dir",
                                   dir.filePath("runs"), "--run_name", "refused", "--no_history"});
        QCOMPARE(code, 2);
        QVERIFY2(out.contains("--tpu is not supported: TPUs are not supported by Shardscope"), qPrintable(out));
        QVERIFY2(out.contains("--megatron_lm_tp_degree is not supported"), qPrintable(out));
        QVERIFY(!QDir(dir.filePath("runs/refused")).exists());

        // accelerate launch --config-file F --num-processes 2 train.py --recipe x --num_processes 7: the
        // options before the script are the launch's (in either spelling), everything after it the
        // script's, its --recipe too (taken as the launch's, the run would have been another kind).
        std::tie(code, out) = run({"--config-file", config.fileName(), "--num-processes", "2", dir.filePath("missing_train.py"),
                                   "--recipe", recipe.fileName(), "--num_processes", "7"});
        QCOMPARE(code, 2);
        QVERIFY2(out.contains("the script " + dir.filePath("missing_train.py") + " does not exist"), qPrintable(out));
        QVERIFY2(!out.contains("not expected") && !out.contains("--recipe and --script"), qPrintable(out));
    }

    // A rank given a damaged plan stops before the rendezvous and says which field is wrong.
    void workerRefusesADamagedPlan()
    {
        const QString worker = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope-worker");
        if (!QFile::exists(worker))
            QSKIP("the engine is not built (SHARDSCOPE_BUILD_ENGINE=OFF)");
        QTemporaryDir dir;
        auto r = planOf("distributed_type: MULTI_CPU\nnum_processes: 1\n");
        VERIFY_PLAN(r);
        std::string json = config::planToJson(*r.plan);
        json.replace(json.find("\"mixed_precision\": \"no\""), 23, "\"mixed_precision\": \"fp12\"");
        QFile file(dir.filePath("plan.json"));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(json.c_str());
        file.close();
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* name : {"RANK", "LOCAL_RANK", "GROUP_RANK"})
            env.insert(name, "0");
        env.insert("WORLD_SIZE", "1");
        env.insert("LOCAL_WORLD_SIZE", "1");
        env.insert("MASTER_ADDR", "127.0.0.1");
        env.insert("MASTER_PORT", "1");
        p.setProcessEnvironment(env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(worker, {"train", "--plan", file.fileName()});
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAll());
        QCOMPARE(p.exitCode(), 2);
        QVERIFY2(out.contains("plan.json: mixed_precision 'fp12' is not a precision mode"), qPrintable(out));
    }

    void invalidConfigStopsBeforeAnyRank_data()
    {
        QTest::addColumn<QByteArray>("yaml");
        QTest::addColumn<QString>("named");
        QTest::newRow("misspelt key") << QByteArray("distributed_type: MULTI_CPU\nnum_procesess: 2\n") << "num_processes";
        // Used to launch on port 34463 (99999 mod 65536).
        QTest::newRow("port out of range") << QByteArray(
            "distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: 99999\n")
                                           << "main_process_port is 99999, which is not a TCP port";
    }
    void invalidConfigStopsBeforeAnyRank()
    {
        QFETCH(QByteArray, yaml);
        QFETCH(QString, named);
        QTemporaryDir dir;
        QFile config(dir.filePath("bad.yaml"));
        config.open(QIODevice::WriteOnly);
        config.write(yaml);
        config.close();
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(kShardscope, {"launch", "--config_file", config.fileName(), "--recipe",
                              SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml", "--runs_dir", dir.filePath("runs")});
        p.waitForFinished(60000);
        QCOMPARE(p.exitCode(), 2);
        const QString out = QString::fromUtf8(p.readAll());
        QVERIFY2(out.contains(named), qPrintable(out)); // the key (or the nearest valid one) is named
        QVERIFY(!QFile::exists(dir.filePath("runs")) || QDir(dir.filePath("runs")).isEmpty());
    }

    // #56: a node's launcher runs what its cluster run's request.json says (here on this machine),
    // placed by its command line (its runs folder and run name): the recipe, --max_steps and the
    // engine flags come from the file.
    void aNodeRunsTheRequestFile()
    {
        QTemporaryDir home;
        const QString recipe = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-mlp.yaml");
        const QString request = home.filePath(QStringLiteral("request.json"));
        testing::writeFile(request, "{\"format\": \"shardscope-launch-request\", \"version\": 1, \"recipe\": \"" + recipe.toUtf8()
                                        + "\", \"num_processes\": 2, \"max_steps\": 3, \"worker_args\": [\"--threads\", \"1\"]}");
        const QString runs = home.filePath(QStringLiteral("noderuns"));
        const auto ran = testing::runShardscope(
            home.path(), {"launch", "--request", request, "--runs_dir", runs, "--run_name", "node0", "--no_history"});
        QVERIFY2(ran.exitCode == 0, qPrintable(ran.output));
        QVERIFY2(ran.output.contains(QStringLiteral("2 ranks finished successfully")), qPrintable(ran.output));
        const QByteArray plan = testing::readFile(runs + "/node0/plan.json");
        QVERIFY2(plan.contains("max_steps: 3\\n"), plan.constData()); // the recipe as run
        QVERIFY2(plan.contains("\"threads\": 1"), plan.constData()); // the engine flag
    }
};

QTEST_GUILESS_MAIN(TestLaunchConfig)
#include "tst_launch_config.moc"
