// The one reading of Accelerate's parallelism keys (engine/plan/parallelism.h): the memory
// estimate on the Configure page's path (the config alone, memorySetupFromConfig) equals the
// estimate a rank of the same run uses (the plan, through plan.json, estimateRun), field by field,
// for every config of the corpus with the bundled recipes; and the five cases in which the plan
// and the estimate used to read the same keys differently (refs/code-review-2026-12.md §2) each
// read one way now.

#include "engine/estimate/memory_estimate.h"
#include "engine/plan/parallelism.h"
#include "engine/plan/run_plan.h"
#include "tests/common/config_text.h"
#include "tests/common/oracle_support.h"

#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace shardscope::config;
using shardscope::testing::parseConfig;

namespace {

std::string sourceDir() { return SHARDSCOPE_SOURCE_DIR; }

Recipe recipeNamed(const std::string& name)
{
    auto recipe = loadRecipe(sourceDir() + "/resources/recipes/" + name);
    if (!recipe)
        qFatal("%s", recipe.error().message.c_str());
    return *recipe;
}

// A machine with eight fp8-capable GPUs: the corpus is written for GPU machines, and the estimate
// does not depend on the machine.
MachineInfo gpuMachine()
{
    MachineInfo machine;
    machine.gpuCount = 8;
    machine.fp8Capable = machine.bf16Capable = true;
    return machine;
}

// Planned as the Configure page plans it (the recipe without reading its files).
PlanResult planOf(const AccelerateConfig& config, const Recipe& recipe, const std::string& baseDir = {})
{
    PlanInputs inputs;
    inputs.config = config;
    inputs.configBaseDir = baseDir;
    inputs.recipe = recipe;
    inputs.recipeSource = "recipe.yaml";
    inputs.readRecipeFiles = false;
    inputs.machine = gpuMachine();
    return buildRunPlan(inputs);
}

// What a rank reads: the plan after its trip through plan.json.
RunPlan rankPlanOf(const RunPlan& plan)
{
    auto back = planFromJson(planToJson(plan), "plan.json");
    if (!back)
        qFatal("%s", back.error().message.c_str());
    return *back;
}

QString differences(const MemoryEstimate& a, const MemoryEstimate& b)
{
    QString out;
    auto field = [&](const char* name, double x, double y) {
        if (x != y)
            out += QStringLiteral("%1: %2 vs %3; ").arg(QLatin1String(name)).arg(x, 0, 'g', 17).arg(y, 0, 'g', 17);
    };
    field("parameters", a.parameters, b.parameters);
    field("gradients", a.gradients, b.gradients);
    field("optimizer", a.optimizer, b.optimizer);
    field("activations", a.activations, b.activations);
    field("hostParameters", a.hostParameters, b.hostParameters);
    field("hostGradients", a.hostGradients, b.hostGradients);
    field("hostOptimizer", a.hostOptimizer, b.hostOptimizer);
    field("fp8Scaling", a.fp8Scaling, b.fp8Scaling);
    return out;
}

// The layout both paths give for one config: from the config alone, and from the rank's plan.
struct BothReadings {
    ModelStateLayout page;
    std::optional<RunPlan> rank;
    std::vector<Diagnostic> problems;
};

BothReadings bothReadings(const std::string& yaml, const std::string& recipe = "demo-gpt.yaml")
{
    const AccelerateConfig config = parseConfig(yaml);
    BothReadings both;
    auto setup = memorySetupFromConfig(config);
    if (!setup)
        qFatal("%s", setup.error().message.c_str());
    both.page = setup->sharding;
    PlanResult planned = planOf(config, recipeNamed(recipe));
    both.problems = planned.problems;
    if (planned.plan)
        both.rank = rankPlanOf(*planned.plan);
    return both;
}

bool hasError(const std::vector<Diagnostic>& problems, const std::string& keyPath)
{
    return std::any_of(problems.begin(), problems.end(),
                       [&](const Diagnostic& d) { return d.severity == Severity::Error && d.keyPath == keyPath; });
}

QString describe(const std::vector<Diagnostic>& problems)
{
    QString out;
    for (const auto& d : problems)
        out += QString::fromStdString(d.keyPath + ": " + d.message + "\n");
    return out;
}

} // namespace

class TestParallelism : public QObject {
    Q_OBJECT

private slots:
    // accelerate.utils.str_to_bool over the value's str(), lower-cased.
    void accelerateBoolIsStrToBool_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<int>("expected"); // 1 true, 0 false, -1 no value
        QTest::newRow("bool true") << "k: true" << 1;
        QTest::newRow("bool false") << "k: false" << 0;
        QTest::newRow("string false") << "k: 'false'" << 0;
        QTest::newRow("string False") << "k: 'False'" << 0;
        QTest::newRow("string yes") << "k: 'yes'" << 1;
        QTest::newRow("string off") << "k: 'off'" << 0;
        QTest::newRow("int 1") << "k: 1" << 1;
        QTest::newRow("int 0") << "k: 0" << 0;
        QTest::newRow("int 2") << "k: 2" << -1;
        QTest::newRow("string maybe") << "k: maybe" << -1;
        QTest::newRow("null") << "k: null" << -1;
    }
    void accelerateBoolIsStrToBool()
    {
        QFETCH(QString, yaml);
        QFETCH(int, expected);
        const AccelerateConfig config = parseConfig("distributed_type: FSDP\nfsdp_config:\n  " + yaml.toStdString() + "\n");
        const auto value = accelerateBool(config.nested("fsdp_config", "k"));
        QCOMPARE(value.has_value() ? int(*value) : -1, expected);
        QVERIFY(!accelerateBool(nullptr).has_value());
    }

    // 1. FSDP CPU offload under SHARD_GRAD_OP: the shards, their gradients and the optimizer step
    // go to the host, and the device keeps the full parameters between forward and backward. The
    // rank's estimate once offloaded the full parameters too, then kept the shards on the device.
    void fsdpOffloadUnderShardGradOpKeepsFullParametersOnTheDevice()
    {
        const auto both = bothReadings("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                       "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: true\n");
        QVERIFY2(both.rank, qPrintable(describe(both.problems)));
        QCOMPARE(both.page.zeroStage, 3);
        QVERIFY(both.page.fullParamsForwardToBackward);
        QVERIFY(both.page.offloadParams);
        QVERIFY(both.page.offloadGrads);
        QVERIFY(both.page.offloadOptimizer);
        QVERIFY(both.rank->stateLayout == both.page);
        QVERIFY(both.rank->sharding && both.rank->sharding->offloadToHost && !both.rank->sharding->reshardAfterForward);
        const MemoryEstimate rank = estimateRun(*both.rank);
        QVERIFY(rank.parameters > 0);
        QCOMPARE(rank.hostParameters * 2, rank.parameters); // this rank's half on the host, all on the device
    }

    // 2. HYBRID_SHARD shards within one machine's ranks, in the estimate and in the engine alike;
    // parallelism_config's dp_shard_size x dp_replicate_size is the same hybrid layout.
    void hybridShardGroupIsOneMachinesRanks()
    {
        const auto hybrid = bothReadings("distributed_type: FSDP\nnum_processes: 8\nnum_machines: 2\nmachine_rank: 0\n"
                                         "main_process_ip: 10.0.0.1\nmain_process_port: 29500\nfsdp_config:\n"
                                         "  fsdp_sharding_strategy: HYBRID_SHARD\n");
        QVERIFY2(hybrid.rank, qPrintable(describe(hybrid.problems)));
        QCOMPARE(hybrid.page.shardRanks, 4);
        QCOMPARE(hybrid.rank->sharding->hybridGroupSize, 4);
        QVERIFY(hybrid.rank->stateLayout == hybrid.page);

        const auto hsdp = bothReadings("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                       "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
                                       "  parallelism_config_dp_shard_size: 2\n");
        QVERIFY2(hsdp.rank, qPrintable(describe(hsdp.problems)));
        QCOMPARE(hsdp.page.shardRanks, 2);
        QCOMPARE(hsdp.rank->sharding->hybridGroupSize, 2);
        QVERIFY(hsdp.rank->stateLayout == hsdp.page);
        // The Configure page says which ranks shard and which replicate together (#46).
        QVERIFY(std::any_of(hsdp.page.notes.begin(), hsdp.page.notes.end(), [](const std::string& note) {
            return note.find("shard groups [0, 1] [2, 3], replicate groups [0, 2] [1, 3]") != std::string::npos;
        }));
    }

    // 3. DeepSpeed's nvme offload: Accelerate means it, so the estimate counts it as offload; this
    // engine refuses it before launch.
    void nvmeOffloadIsEstimatedAndRefusedByThePlan()
    {
        const auto both = bothReadings("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                       "  zero_stage: 3\n  offload_optimizer_device: nvme\n  offload_param_device: nvme\n");
        QVERIFY(both.page.offloadOptimizer);
        QVERIFY(both.page.offloadParams);
        QVERIFY(!both.rank);
        QVERIFY2(hasError(both.problems, "deepspeed_config.offload_optimizer_device"), qPrintable(describe(both.problems)));
    }

    // 4. fsdp_version written as the string "2" (as the launcher exports it): FSDP2 in both, so
    // fsdp_reshard_after_forward: false is SHARD_GRAD_OP.
    void fsdpVersionAsAStringIsFsdp2()
    {
        const std::string yaml = "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: '2'\n"
                                 "  fsdp_reshard_after_forward: false\n";
        const ParallelismReading reading = interpretParallelism(parseConfig(yaml));
        QCOMPARE(reading.spec.fsdpVersion, 2);
        QCOMPARE(reading.spec.fsdpShardingStrategy, std::string("SHARD_GRAD_OP"));
        const auto both = bothReadings(yaml);
        QVERIFY(both.page.fullParamsForwardToBackward);
        QCOMPARE(both.page.label, std::string("FSDP2 SHARD_GRAD_OP"));
        // Validation still asks for the number without quotes; where the plan builds, it agrees.
        if (both.rank) {
            QVERIFY(!both.rank->sharding->reshardAfterForward);
            QVERIFY(both.rank->stateLayout == both.page);
        }
        const auto unquoted = bothReadings("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                           "  fsdp_reshard_after_forward: false\n");
        QVERIFY2(unquoted.rank, qPrintable(describe(unquoted.problems)));
        QVERIFY(unquoted.rank->stateLayout == both.page);
    }

    // 5. Truthiness: Accelerate's (str_to_bool), in the plan and the estimate alike. The string
    // "false" does not offload (Python's truthiness made it true in the estimate) and "yes" does
    // (the plan's own rule took only "true", "True" and "1").
    void truthinessIsAcceleratesInBoth_data()
    {
        QTest::addColumn<QString>("value");
        QTest::addColumn<bool>("offload");
        QTest::newRow("'false'") << "'false'" << false;
        QTest::newRow("'yes'") << "'yes'" << true;
        QTest::newRow("'True'") << "'True'" << true;
        QTest::newRow("false") << "false" << false;
    }
    void truthinessIsAcceleratesInBoth()
    {
        QFETCH(QString, value);
        QFETCH(bool, offload);
        const auto both = bothReadings(
            "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_offload_params: " + value.toStdString() + "\n");
        QCOMPARE(both.page.offloadGrads, offload);
        QCOMPARE(both.page.offloadParams, offload);
        if (both.rank) {
            QCOMPARE(both.rank->sharding->offloadToHost, offload);
            QVERIFY(both.rank->stateLayout == both.page);
        }
    }

    // The DeepSpeed JSON's bf16/fp16 "enabled": true is what DeepSpeed trains in where
    // mixed_precision says no (Accelerate fills only "auto"); the plan used to run fp32.
    void deepSpeedJsonPrecisionIsThePlans()
    {
        QTemporaryDir dir;
        {
            std::ofstream json(dir.filePath("ds.json").toStdString());
            json << R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2},)"
                    R"( "gradient_accumulation_steps": 1, "train_micro_batch_size_per_gpu": "auto"})";
        }
        const AccelerateConfig config = parseConfig("distributed_type: DEEPSPEED\nnum_processes: 2\n"
                                                    "deepspeed_config:\n  deepspeed_config_file: ds.json\n");
        const std::string base = dir.path().toStdString();
        auto setup = memorySetupFromConfig(config, base);
        QVERIFY(setup.ok());
        QVERIFY(setup->precision == PrecisionMode::Bf16);
        const PlanResult planned = planOf(config, recipeNamed("demo-gpt.yaml"), base);
        QVERIFY2(planned.plan, qPrintable(describe(planned.problems)));
        QVERIFY(planned.plan->precision == PrecisionMode::Bf16);
        QCOMPARE(planned.plan->stateLayout.zeroStage, 2);
    }

    // FSDP1 with the strategy's name in fsdp_reshard_after_forward: the engine runs what the user
    // chose, as the estimate and the exported FSDP_SHARDING_STRATEGY say (it ran FULL_SHARD).
    void fsdp1StrategyInTheReshardKeyIsRun()
    {
        const auto both = bothReadings("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n"
                                       "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n");
        QVERIFY2(both.rank, qPrintable(describe(both.problems)));
        QVERIFY(!both.rank->sharding->reshardAfterForward);
        QVERIFY(std::find(both.rank->environment.begin(), both.rank->environment.end(), "FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP")
                != both.rank->environment.end());
        QVERIFY(both.rank->stateLayout == both.page);
    }

    // #46: dp_shard 2 x tp 2 is planned as the engine runs it (FSDP over each position of the
    // tensor groups, no hybrid groups, one optimizer parameter per model parameter), and the
    // estimate's layout is the rank's; tp alone runs under MULTI_GPU (on the CPU engine with
    // use_cpu). What tensor parallelism does not combine with is refused with the reason.
    void tensorParallelIsPlannedOrRefused()
    {
        const std::string kLlama = "demo-llama.yaml";
        const auto both = bothReadings("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                       "  fsdp_use_orig_params: false\n"
                                       "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
                                       "  parallelism_config_tp_size: 2\n",
                                       kLlama);
        QVERIFY2(both.rank, qPrintable(describe(both.problems)));
        QCOMPARE(both.rank->tensorParallelSize, 2);
        QCOMPARE(both.rank->sharding->hybridGroupSize, 0);
        QVERIFY(both.rank->sharding->useOrigParams);
        QCOMPARE(both.rank->stateLayout.shardRanks, 2);
        QCOMPARE(both.rank->stateLayout.tensorParallel, 2);
        QVERIFY(both.rank->stateLayout == both.page);
        // What the Run page shows of it, and of HSDP's mesh.
        const auto mesh = describeMesh(*both.rank);
        QCOMPARE(mesh.summary, std::string("dp_shard 2 x tp 2: tensor groups [0, 1] [2, 3], data groups [0, 2] [1, 3]"));
        QCOMPARE(mesh.ranks.at(1), std::string("rank 1: tensor group 0 (its rank 1), data-parallel rank 0 of 2"));
        const auto hsdp = bothReadings("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                       "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
                                       "  parallelism_config_dp_shard_size: 2\n");
        QVERIFY2(hsdp.rank, qPrintable(describe(hsdp.problems)));
        const auto hybridMesh = describeMesh(*hsdp.rank);
        QCOMPARE(hybridMesh.summary,
                 std::string("dp_replicate 2 x dp_shard 2: shard groups [0, 1] [2, 3], replicate groups [0, 2] [1, 3]"));
        QCOMPARE(hybridMesh.ranks.at(2), std::string("rank 2: replica 1, shard 0 of 2"));
        QVERIFY(describeMesh(*bothReadings("distributed_type: FSDP\nnum_processes: 2\n").rank).empty());
        const auto alone = bothReadings("distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: true\n"
                                        "parallelism_config:\n  parallelism_config_tp_size: 2\n",
                                        kLlama);
        QVERIFY2(alone.rank, qPrintable(describe(alone.problems)));
        QCOMPARE(alone.rank->tensorParallelSize, 2);
        QVERIFY(!alone.rank->sharding);
        const std::string tpKey = "parallelism_config.parallelism_config_tp_size";
        for (const std::string& yaml :
             {std::string("distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
                          "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_dp_shard_size: 2\n"
                          "  parallelism_config_tp_size: 2\n"),
              std::string("distributed_type: MULTI_GPU\nnum_processes: 4\nuse_cpu: true\nparallelism_config:\n"
                          "  parallelism_config_dp_replicate_size: 2\n  parallelism_config_tp_size: 2\n"),
              std::string("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
                          "parallelism_config:\n  parallelism_config_tp_size: 2\n"),
              std::string("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                          "  fsdp_activation_checkpointing: true\nparallelism_config:\n"
                          "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n"),
              // The demo Llama's 2 key-value heads do not split 4 ways.
              std::string("distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
                          "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 4\n")}) {
            const auto refused = bothReadings(yaml, kLlama);
            QVERIFY2(!refused.rank && hasError(refused.problems, tpKey), qPrintable(QString::fromStdString(yaml)));
        }
        // Accelerate's runtime: FSDP with nothing to shard across.
        const auto nothingToShard = bothReadings("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                                 "parallelism_config:\n  parallelism_config_tp_size: 2\n",
                                                 kLlama);
        QVERIFY(!nothingToShard.rank);
        QVERIFY2(hasError(nothingToShard.problems, "parallelism_config.parallelism_config_dp_shard_size"),
                 qPrintable(describe(nothingToShard.problems)));
    }

    // #46: each rank's tensor and data groups are Accelerate's device mesh for the same sizes
    // (its tp and dp_shard groups, tests/tools/accelerate_oracle.py mesh).
    void tensorParallelGroupsAreAcceleratesMesh_data()
    {
        QTest::addColumn<int>("shard");
        QTest::addColumn<int>("tp");
        QTest::newRow("tp 2") << 1 << 2;
        QTest::newRow("2 x tp 2") << 2 << 2;
        QTest::newRow("3 x tp 2") << 3 << 2;
        QTest::newRow("2 x tp 4") << 2 << 4;
    }
    void tensorParallelGroupsAreAcceleratesMesh()
    {
        QFETCH(int, shard);
        QFETCH(int, tp);
        const int world = shard * tp;
        std::string why;
        const auto mesh = shardscope::testing::runOracle({"mesh", "1", std::to_string(shard), std::to_string(tp)}, why);
        if (!mesh)
            QFAIL(why.c_str());
        for (int rank = 0; rank < world; ++rank) {
            const auto ours = shardscope::parallel::tensorParallelGroupsOf(rank, world, tp);
            const auto& theirs = (*mesh)["ranks"][rank];
            QCOMPARE(ours.tensor, theirs["tp"].get<std::vector<int>>());
            if (shard > 1)
                QCOMPARE(ours.data, theirs["dp_shard"].get<std::vector<int>>());
            else
                QCOMPARE(ours.data, std::vector<int>{rank});
        }
    }

    // A parallelism_config dimension the engine does not run is refused, never ignored.
    void meshDimensionsTheEngineLacksAreRefused()
    {
        // Context and sequence parallelism: refused before any rank starts, with the reason (#46).
        for (const char* dimension : {"cp_size", "sp_size"}) {
            const auto refused = bothReadings(
                std::string("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                            "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
                            "  parallelism_config_")
                + dimension + ": 2\n");
            QVERIFY(!refused.rank);
            QVERIFY2(hasError(refused.problems, std::string("parallelism_config.parallelism_config_") + dimension),
                     qPrintable(describe(refused.problems)));
        }
    }

    // #46: the engine's hybrid groups are Accelerate's device mesh for the same sizes: each rank's
    // dp_shard and dp_replicate groups, as Accelerate's own ParallelismConfig.get_device_mesh makes
    // them (tests/tools/accelerate_oracle.py mesh), for the groups the plan asks for.
    void hybridGroupsAreAcceleratesMesh_data()
    {
        QTest::addColumn<int>("replicate");
        QTest::addColumn<int>("shard");
        QTest::newRow("2 x 2") << 2 << 2;
        QTest::newRow("2 x 3") << 2 << 3;
        QTest::newRow("4 x 2") << 4 << 2;
    }
    void hybridGroupsAreAcceleratesMesh()
    {
        QFETCH(int, replicate);
        QFETCH(int, shard);
        const int world = replicate * shard;
        const auto both = bothReadings("distributed_type: FSDP\nnum_processes: " + std::to_string(world)
                                       + "\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
                                         "  parallelism_config_dp_replicate_size: "
                                       + std::to_string(replicate)
                                       + "\n  parallelism_config_dp_shard_size: " + std::to_string(shard) + "\n");
        QVERIFY2(both.rank, qPrintable(describe(both.problems)));
        QCOMPARE(both.rank->sharding->hybridGroupSize, shard);
        std::string why;
        const auto mesh = shardscope::testing::runOracle({"mesh", std::to_string(replicate), std::to_string(shard)}, why);
        if (!mesh)
            QFAIL(why.c_str());
        for (int rank = 0; rank < world; ++rank) {
            const auto ours = shardscope::parallel::hybridGroupsOf(rank, world, both.rank->sharding->hybridGroupSize);
            const auto& theirs = (*mesh)["ranks"][rank];
            QCOMPARE(ours.shard, theirs["dp_shard"].get<std::vector<int>>());
            QCOMPARE(ours.replicate, theirs["dp_replicate"].get<std::vector<int>>());
        }
    }

    // #46: the mesh under the other launchers that pass it on. MULTI_GPU runs as DDP: replicas
    // only; DeepSpeed's ZeRO shards over every rank: no replicate x shard split, no sp; MULTI_CPU's
    // launcher drops the section, so it changes nothing (validation warns).
    void meshUnderTheOtherLaunchers()
    {
        auto refusal = [](const std::string& yaml, const std::string& key) {
            const auto both = bothReadings(yaml);
            return !both.rank && hasError(both.problems, key);
        };
        QVERIFY(refusal("distributed_type: MULTI_GPU\nnum_processes: 2\nparallelism_config:\n"
                        "  parallelism_config_dp_shard_size: 2\n",
                        "parallelism_config.parallelism_config_dp_shard_size"));
        QVERIFY(refusal("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 2\n"
                        "parallelism_config:\n  parallelism_config_sp_size: 2\n",
                        "parallelism_config.parallelism_config_sp_size"));
        QVERIFY(refusal("distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n  zero_stage: 3\n"
                        "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n  parallelism_config_dp_replicate_size: 2\n",
                        "parallelism_config.parallelism_config_dp_shard_size"));
        const auto cpu = bothReadings("distributed_type: MULTI_CPU\nnum_processes: 2\nparallelism_config:\n"
                                      "  parallelism_config_tp_size: 2\n");
        QVERIFY2(cpu.rank, qPrintable(describe(cpu.problems)));
        QCOMPARE(cpu.rank->numProcesses, 2);
    }

    // A size written as text ('2') is read as Accelerate's runtime reads it (int()); an unprefixed
    // key, which accelerate launch drops, changes nothing.
    void meshSizesAsAccelerateReadsThem()
    {
        const auto quoted = bothReadings("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                         "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
                                         "  parallelism_config_dp_shard_size: '2'\n");
        QVERIFY2(quoted.rank, qPrintable(describe(quoted.problems)));
        QCOMPARE(quoted.rank->sharding->hybridGroupSize, 2);
        QCOMPARE(quoted.page.shardRanks, 2);
        const auto unprefixed = bothReadings("distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                             "parallelism_config:\n  dp_shard_size: 2\n  dp_replicate_size: 2\n");
        QVERIFY2(unprefixed.rank, qPrintable(describe(unprefixed.problems)));
        QCOMPARE(unprefixed.page.shardRanks, 4);
    }

    // A check the plan can decide is the plan's (it was thrown inside the rank).
    void noWeightDecayWithFlatShardsIsRefusedByThePlan()
    {
        Recipe recipe = recipeNamed("demo-gpt.yaml");
        recipe.optimizer.noWeightDecay = {"bias"};
        const AccelerateConfig config = parseConfig("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                    "  fsdp_use_orig_params: false\n");
        const PlanResult planned = planOf(config, recipe);
        QVERIFY(!planned.plan);
        QVERIFY2(hasError(planned.problems, "fsdp_config.fsdp_use_orig_params"), qPrintable(describe(planned.problems)));
        const PlanResult kept = planOf(parseConfig("distributed_type: FSDP\nnum_processes: 2\n"), recipe); // the default: true
        QVERIFY2(kept.plan, qPrintable(describe(kept.problems)));
    }

    // The parity: for every config of the corpus, with each bundled recipe, the estimate the page
    // shows equals the one the rank of the same run uses, field by field. The page shows the
    // planned run's estimate when the plan builds (estimateRun, the rank's function) and the config
    // alone's while it is refused; so the config alone must already agree with the rank's plan.
    void estimateOnThePagesPathEqualsTheRanks()
    {
        const std::string corpus = sourceDir() + "/../shared/corpus/accelerate-configs";
        if (!std::filesystem::is_directory(corpus))
            QSKIP("../shared/corpus is not beside the checkout");
        std::vector<std::filesystem::path> files;
        for (const auto& entry : std::filesystem::directory_iterator(corpus))
            if (entry.path().extension() == ".yaml" || entry.path().extension() == ".yml" || entry.path().extension() == ".json")
                files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        int compared = 0, refused = 0;
        QStringList failures;
        for (const std::string recipeName : {"demo-gpt.yaml", "demo-llama.yaml"}) {
            const Recipe recipe = recipeNamed(recipeName);
            for (const auto& file : files) {
                auto config = loadAccelerateConfig(file.string());
                if (!config) // DeepSpeed's own JSON files, and the corpus's deliberately broken ones
                    continue;
                const std::string base = file.parent_path().string();
                const PlanResult planned = planOf(*config, recipe, base);
                auto setup = memorySetupFromConfig(*config, base);
                if (!planned.plan) {
                    ++refused;
                    continue;
                }
                if (!setup) {
                    failures << QString::fromStdString(file.string() + " plans but its estimate fails: " + setup.error().message);
                    continue;
                }
                const RunPlan rank = rankPlanOf(*planned.plan);
                const MemoryEstimate ranks = estimateRun(rank);
                const MemoryEstimate page = estimateRun(*planned.plan);
                const MemoryEstimate alone = estimateMemory(modelShapeOf(recipe), setup->precision, setup->sharding,
                                                            optimizerKindOf(recipe), setup->fp8);
                const QString name = QString::fromStdString(file.filename().string() + " + " + recipeName);
                if (const QString d = differences(page, ranks); !d.isEmpty())
                    failures << name + " (page vs rank): " + d;
                if (const QString d = differences(alone, ranks); !d.isEmpty())
                    failures << name + " (config alone vs rank): " + d;
                if (!(setup->sharding == rank.stateLayout) || setup->precision != rank.precision)
                    failures << name + ": layout or precision differ";
                ++compared;
            }
        }
        QVERIFY2(failures.isEmpty(), qPrintable(failures.join('\n')));
        // Not vacuous: most of the corpus plans on an 8-GPU machine.
        QVERIFY2(compared >= 40, qPrintable(QStringLiteral("compared %1, refused %2").arg(compared).arg(refused)));
    }
};

QTEST_APPLESS_MAIN(TestParallelism)
#include "tst_parallelism.moc"
