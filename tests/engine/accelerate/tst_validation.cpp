// Validation (launch checks and impossible combinations), the environment given to ranks, and
// DeepSpeed JSON "auto" resolution.

#include "engine/accelerate/deepspeed_json.h"
#include "engine/accelerate/env_export.h"
#include "engine/accelerate/validation.h"
#include "engine/accelerate/launch_flags.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/config_text.h"
#include "tests/common/oracle_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <set>

using namespace shardscope::config;

namespace {

using shardscope::testing::parseConfig;

const Diagnostic* find(const std::vector<Diagnostic>& ds, const std::string& key, Severity s)
{
    for (const auto& d : ds)
        if (d.keyPath == key && d.severity == s)
            return &d;
    return nullptr;
}

std::string env(const std::vector<std::pair<std::string, std::string>>& vars, const std::string& k)
{
    for (const auto& [name, value] : vars)
        if (name == k)
            return value;
    return "<unset>";
}

} // namespace

class TestValidation : public QObject {
    Q_OBJECT

private slots:
    void checks_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QString>("key");
        QTest::addColumn<bool>("isError");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("unquoted NO") << "distributed_type: NO\n"
                                     << "distributed_type" << true << "'NO'";
        QTest::newRow("unquoted no precision") << "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: no\n"
                                               << "mixed_precision" << true << "'no'";
        QTest::newRow("string number") << "distributed_type: MULTI_GPU\nnum_processes: '4'\n"
                                       << "num_processes" << true << "must be an integer";
        QTest::newRow("int gpu ids") << "distributed_type: 'NO'\ngpu_ids: 0\n"
                                     << "gpu_ids" << true << "gpu_ids: '0'";
        QTest::newRow("multi gpu one id") << "distributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: '0'\n"
                                          << "gpu_ids" << true << "Less than two GPU ids";
        QTest::newRow("more processes than ids") << "distributed_type: MULTI_GPU\nnum_processes: 4\ngpu_ids: '0,1'\n"
                                                 << "num_processes" << true << "lists only 2";
        QTest::newRow("multi gpu one process") << "distributed_type: MULTI_GPU\nnum_processes: 1\n"
                                               << "num_processes" << true << "at least 2 processes";
        QTest::newRow("multinode without ip") << "distributed_type: MULTI_GPU\nnum_processes: 4\nnum_machines: 2\n"
                                              << "main_process_ip" << true << "main_process_ip";
        QTest::newRow("fsdp1 efficient loading without sync")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n  fsdp_cpu_ram_efficient_loading: "
               "true\n"
               "  fsdp_sync_module_states: false\n"
            << "fsdp_config.fsdp_sync_module_states" << true << "set `--fsdp_sync_module_states` to `True`";
        QTest::newRow("fsdp2 local state dict") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n  "
                                                   "fsdp_state_dict_type: LOCAL_STATE_DICT\n"
                                                << "fsdp_config.fsdp_state_dict_type" << true << "FSDP1-only";
        QTest::newRow("fsdp2 strategy name") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                                "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
                                             << "fsdp_config.fsdp_reshard_after_forward" << true << "true or false";
        QTest::newRow("fsdp1 strategy bug") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n"
                                               "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
                                            << "fsdp_config.fsdp_reshard_after_forward" << false << "launches FULL_SHARD";
        QTest::newRow("param offload below stage 3")
            << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 2\n  offload_param_device: cpu\n"
            << "deepspeed_config.offload_param_device" << true << "only with ZeRO stage 3";
        QTest::newRow("deepspeed json conflict") << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  "
                                                    "deepspeed_config_file: ds.json\n  zero_stage: 3\n"
                                                 << "deepspeed_config.zero_stage" << true << "deepspeed_config_file";
        QTest::newRow("deepspeed json mixed precision") << "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: "
                                                           "fp16\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
                                                        << "mixed_precision" << true << "ValueError";
        QTest::newRow("parallelism product")
            << "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
               "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n"
            << "parallelism_config" << true << "multiply to 4";
        QTest::newRow("cp with sp") << "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                                       "parallelism_config:\n  parallelism_config_cp_size: 2\n  parallelism_config_sp_size: 2\n"
                                    << "parallelism_config.parallelism_config_cp_size" << true << "cannot be combined";
        // #46: what Accelerate reads, accepted with a warning; what it drops or fails on, said so.
        QTest::newRow("mesh size as text") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                              "parallelism_config:\n  parallelism_config_dp_shard_size: '2'\n"
                                           << "parallelism_config.parallelism_config_dp_shard_size" << false
                                           << "reads the number";
        QTest::newRow("cp size as text") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                            "parallelism_config:\n  parallelism_config_cp_size: '2'\n"
                                         << "parallelism_config.parallelism_config_cp_size" << true << "must be";
        QTest::newRow("unprefixed mesh key") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                                "parallelism_config:\n  dp_shard_size: 2\n"
                                             << "parallelism_config.dp_shard_size" << false << "has no effect";
        QTest::newRow("boolean as yes") << "distributed_type: MULTI_GPU\nnum_processes: 2\ndynamo_config:\n"
                                           "  dynamo_backend: INDUCTOR\n  dynamo_use_fullgraph: 'yes'\n"
                                        << "dynamo_config.dynamo_use_fullgraph" << false << "reads it as true";
        QTest::newRow("two-item override_linear_precision")
            << "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
               "  override_linear_precision: [false, true]\n"
            << "fp8_config.override_linear_precision" << true << "three booleans";
        QTest::newRow("four-item override_linear_precision")
            << "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
               "  override_linear_precision: [false, false, false, true]\n"
            << "fp8_config.override_linear_precision" << false << "uses the first three";
        QTest::newRow("mesh under MULTI_CPU") << "distributed_type: MULTI_CPU\nnum_processes: 2\n"
                                                 "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
                                              << "parallelism_config" << false << "it is ignored";
        QTest::newRow("mesh under FSDP1") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n"
                                             "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
                                          << "parallelism_config" << true << "needs FSDP2";
        QTest::newRow("fp8 on cpu") << "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n"
                                    << "mixed_precision" << false << "fp8 on the CPU runs emulated";
        QTest::newRow("unknown nested key")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_ofload_params: true\n"
            << "fsdp_config.fsdp_ofload_params" << false << "did you mean `fsdp_offload_params`";
        QTest::newRow("word for a number") << "distributed_type: MULTI_CPU\nnum_processes: abc\n"
                                           << "num_processes" << true << "write a whole number, e.g. `num_processes: 2`";
        QTest::newRow("no processes") << "distributed_type: MULTI_CPU\nnum_processes: 0\n"
                                      << "num_processes" << true << "at least 1 process";
        QTest::newRow("negative processes") << "distributed_type: MULTI_CPU\nnum_processes: -5\n"
                                            << "num_processes" << true << "at least 1 process";
        QTest::newRow("port out of range") << "distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: 99999\n"
                                           << "main_process_port" << true << "not a TCP port";
        QTest::newRow("negative port") << "distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: -1\n"
                                       << "main_process_port" << true << "1 to 65535";
        QTest::newRow("port 0 on several machines")
            << "distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: 10.0.0.1\nmain_process_port: 0\n"
            << "main_process_port" << true << "every machine must know the port";
        QTest::newRow("upper-case precision") << "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: BF16\n"
                                              << "mixed_precision" << false << "runs as 'bf16'";
        QTest::newRow("lower-case dynamo backend")
            << "distributed_type: MULTI_CPU\nnum_processes: 2\ndynamo_config:\n  dynamo_backend: eager\n"
            << "dynamo_config.dynamo_backend" << false << "runs as EAGER";
        QTest::newRow("digit-string zero stage")
            << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: '2'\n"
            << "deepspeed_config.zero_stage" << false << "stage 2";
        QTest::newRow("word zero stage")
            << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: two\n"
            << "deepspeed_config.zero_stage" << true << "write a whole number";
        QTest::newRow("exponent as text")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_min_num_params: 1e8\n"
            << "fsdp_config.fsdp_min_num_params" << true << "1e8 as 100000000";
        QTest::newRow("unprefixed fsdp key") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  version: 2\n"
                                             << "fsdp_config.version" << false << "reads it as fsdp_version";
        QTest::newRow("unprefixed fsdp key with its value checked")
            << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  offload_params: maybe\n"
            << "fsdp_config.fsdp_offload_params" << true << "must be";
        QTest::newRow("fsdp section under MULTI_CPU")
            << "distributed_type: MULTI_CPU\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
            << "fsdp_config" << false << "distributed_type is MULTI_CPU, so it is ignored";
        QTest::newRow("deepspeed section under MULTI_GPU")
            << "distributed_type: MULTI_GPU\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
            << "deepspeed_config" << false << "so it is ignored";
        QTest::newRow("fp8 questionnaire spelling") << "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: "
                                                       "fp8\nfp8_config:\n  backend: TE\n  amax_history_length: 16\n"
                                                    << "fp8_config.amax_history_length" << false << "amax_history_len";
    }
    void checks()
    {
        QFETCH(QString, yaml);
        QFETCH(QString, key);
        QFETCH(bool, isError);
        QFETCH(QString, mentions);
        const auto ds = validateConfig(parseConfig(yaml.toStdString()));
        const Diagnostic* d = find(ds, key.toStdString(), isError ? Severity::Error : Severity::Warning);
        std::string all;
        for (const auto& x : ds)
            all += "\n  " + x.keyPath + ": " + x.message;
        QVERIFY2(d, ("no diagnostic for " + key.toStdString() + "; got:" + all).c_str());
        QVERIFY2(d->message.find(mentions.toStdString()) != std::string::npos, d->message.c_str());
        QVERIFY2(d->message.find(key.toStdString().substr(key.toStdString().find('.') + 1)) != std::string::npos,
                 ("the message does not name the key: " + d->message).c_str());
    }

    // accelerate launch passes a file's parallelism_config on for MULTI_GPU and Accelerate's runtime
    // allows it there (its "--use_parallelism_config needs --use_fsdp" check is for the flags).
    void meshUnderMultiGpuIsNoError()
    {
        const auto ds = validateConfig(parseConfig("distributed_type: MULTI_GPU\nnum_processes: 2\n"
                                                   "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"));
        for (const auto& d : ds)
            QVERIFY2(d.severity != Severity::Error, (d.keyPath + ": " + d.message).c_str());
    }

    void oneProblemOneDiagnostic()
    {
        const auto ds = validateConfig(parseConfig("distributed_type: FSDP\nnum_processes: 2\nfsdp_config: FULL_SHARD\n"));
        int errors = 0;
        std::string all;
        for (const auto& d : ds) {
            errors += d.severity == Severity::Error;
            all += "\n  " + d.keyPath + ": " + d.message;
        }
        QVERIFY2(errors == 1, all.c_str());
        QVERIFY(find(ds, "fsdp_config", Severity::Error));
        // One bad backend, one error (it was said twice); the legacy top-level key is still checked.
        for (const char* yaml : {"distributed_type: MULTI_CPU\nnum_processes: 2\ndynamo_config:\n  dynamo_backend: bogus\n",
                                 "distributed_type: MULTI_CPU\nnum_processes: 2\ndynamo_backend: bogus\n"}) {
            const auto backend = validateConfig(parseConfig(yaml));
            const auto count = std::count_if(backend.begin(), backend.end(),
                                             [](const Diagnostic& d) { return d.severity == Severity::Error; });
            QVERIFY2(count == 1, yaml);
        }
    }

    void normalisedAsAccelerateLaunchReadsIt()
    {
        const auto n = applyOverrides(parseConfig("distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: BF16\n"
                                                  "deepspeed_config:\n  zero_stage: '3'\ndynamo_config:\n  backend: eager\n"),
                                      {});
        QCOMPARE(n.mixedPrecision(), std::string("bf16"));
        QCOMPARE(n.nested("deepspeed_config", "zero_stage")->asInt(), std::int64_t{3});
        QCOMPARE(n.nested("dynamo_config", "dynamo_backend")->asString(), std::string("EAGER"));
        QVERIFY(!hasErrors(validateConfig(n)));
        const auto fsdp = applyOverrides(parseConfig("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  version: 2\n"
                                                     "  fsdp_version: 1\n  reshard_after_forward: false\n"),
                                         {});
        QCOMPARE(fsdp.nested("fsdp_config", "fsdp_version")->asInt(), std::int64_t{1}); // the later one wins
        QVERIFY(fsdp.nested("fsdp_config", "fsdp_reshard_after_forward"));
        QVERIFY(!fsdp.nested("fsdp_config", "version"));
    }

    void validCorpusConfigsHaveNoErrors_data()
    {
        QTest::addColumn<QString>("file");
        for (const char* f :
             {"examples__torch_native_parallelism__configs__cp.yaml", "examples__config_yaml_templates__multi_gpu.yaml",
              "examples__config_yaml_templates__deepspeed.yaml", "tests__test_configs__latest.yaml",
              "examples__config_yaml_templates__fsdp.yaml"})
            QTest::newRow(f) << QString(f);
    }
    void validCorpusConfigsHaveNoErrors()
    {
        QFETCH(QString, file);
        auto cfg = loadAccelerateConfig(shardscope::testing::corpusDir() + "/" + file.toStdString());
        QVERIFY(cfg.ok());
        ValidationOptions o;
        o.baseDir = shardscope::testing::corpusDir();
        const auto ds = validateConfig(*cfg, o);
        for (const auto& d : ds)
            QVERIFY2(d.severity != Severity::Error || d.keyPath == "deepspeed_config.deepspeed_config_file",
                     formatDiagnostic(*cfg, d).c_str());
    }

    void corpusDeepSpeedScenarioIsRejectedAsAccelerateDoes()
    {
        // SOURCES.md: loads, then Accelerate raises when the DeepSpeed plugin is built.
        auto cfg = loadAccelerateConfig(shardscope::testing::corpusDir()
                                        + "/docs__source__usage_guides__deepspeed.md__L467-L495.yaml");
        QVERIFY(cfg.ok());
        const auto ds = validateConfig(*cfg);
        for (const char* k : {"gradient_accumulation_steps", "gradient_clipping", "offload_optimizer_device",
                              "offload_param_device", "zero3_save_16bit_model", "zero_stage"})
            QVERIFY2(find(ds, std::string("deepspeed_config.") + k, Severity::Error), k);
        DeepSpeedContext ctx;
        auto resolved = resolveDeepSpeedConfig(*cfg, ctx);
        QVERIFY(!resolved.ok());
        QVERIFY(resolved.error().message.find("When using `deepspeed_config_file`") != std::string::npos);
    }

    void machineProblemsAreWarningsUntilLaunch()
    {
        const auto cfg = parseConfig("distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: bf16\n");
        ValidationOptions o;
        o.machine = MachineInfo{4, false, false, {}};
        auto ds = validateConfig(cfg, o);
        QVERIFY(find(ds, "mixed_precision", Severity::Warning));
        QVERIFY(find(ds, "num_processes", Severity::Warning));
        QVERIFY(!hasErrors(ds));
        o.forLaunch = true;
        ds = validateConfig(cfg, o);
        QVERIFY(find(ds, "mixed_precision", Severity::Error));
        QVERIFY(find(ds, "num_processes", Severity::Error));
    }

    // #46: Accelerate runs one mpirun over a hostfile's machines; Shardscope refuses to launch it
    // (it would start ranks 0-3 of a 16-rank world here and wait for launchers that never come),
    // naming the per-machine launch and SLURM. The corpus's 4-machine Intel CPU file.
    void mpirunHostfileIsRefusedAtLaunch()
    {
        const auto path = shardscope::testing::corpusDir() + "/docs__source__usage_guides__intel_cpu.md__L106-L123.yaml";
        auto cfg = loadAccelerateConfig(path);
        QVERIFY2(cfg.ok(), cfg.ok() ? "" : cfg.error().message.c_str());
        ValidationOptions o;
        QVERIFY(find(validateConfig(*cfg, o), "mpirun_config.mpirun_hostfile", Severity::Warning));
        o.forLaunch = true;
        const auto atLaunch = validateConfig(*cfg, o); // kept: find points into it
        const Diagnostic* d = find(atLaunch, "mpirun_config.mpirun_hostfile", Severity::Error);
        QVERIFY(d);
        QVERIFY2(d->message.find("--machine_rank N") != std::string::npos
                     && d->message.find("--target slurm") != std::string::npos,
                 d->message.c_str());
    }

    // fp8 where the GPU cannot run it is an error even outside a launch, naming the GPU; on the
    // CPU (a use_cpu config, or a machine without GPUs) it is a warning that it runs emulated.
    void fp8NeedsComputeCapability89OrTheCpu()
    {
        ValidationOptions o;
        o.machine = MachineInfo{2, false, true, {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"}};
        auto ds = validateConfig(parseConfig("distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\n"), o);
        const Diagnostic* d = find(ds, "mixed_precision", Severity::Error);
        QVERIFY(d);
        QVERIFY2(d->message.find("NVIDIA A100-SXM4-80GB is below compute capability 8.9") != std::string::npos,
                 d->message.c_str());
        o.machine = MachineInfo{2, true, true, {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}};
        ds = validateConfig(parseConfig("distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\n"), o);
        QVERIFY(!find(ds, "mixed_precision", Severity::Error));
        QVERIFY(!find(ds, "mixed_precision", Severity::Warning));
        o.machine = MachineInfo{0, false, false, {}};
        ds = validateConfig(parseConfig("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n"), o);
        QVERIFY(!hasErrors(ds));
        d = find(ds, "mixed_precision", Severity::Warning);
        QVERIFY(d && d->message.find("emulated") != std::string::npos);
        o.forLaunch = true;
        QVERIFY(
            !hasErrors(validateConfig(parseConfig("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n"), o)));
    }

    void cliFlagsWin()
    {
        const auto cfg = parseConfig("distributed_type: MULTI_GPU\nnum_processes: 1\nmixed_precision: fp16\n");
        LaunchOverrides o;
        o.numProcesses = 4;
        o.mixedPrecision = "bf16";
        const auto merged = applyOverrides(cfg, o);
        QCOMPARE(merged.intField("num_processes").value_or(0), std::int64_t{4});
        QCOMPARE(merged.mixedPrecision(), std::string("bf16"));
        QVERIFY(!find(validateConfig(merged), "num_processes", Severity::Error));
    }

    void environmentPerDistributedType()
    {
        auto simple = launchEnvironment(parseConfig("distributed_type: MULTI_CPU\nnum_processes: 4\n"));
        QCOMPARE(env(simple, "ACCELERATE_USE_CPU"), std::string("False"));
        QCOMPARE(env(simple, "MASTER_ADDR"), std::string("127.0.0.1"));
        QCOMPARE(env(simple, "MASTER_PORT"), std::string("29500"));
        QCOMPARE(env(simple, "KMP_BLOCKTIME"), std::string("<unset>")); // only with use_cpu (ACCELERATE_USE_CPU True)
        QCOMPARE(env(simple, "ACCELERATE_DYNAMO_BACKEND"), std::string("NO"));
        QCOMPARE(env(simple, "ACCELERATE_DYNAMO_USE_FULLGRAPH"), std::string("False"));
        QCOMPARE(launcherFor(parseConfig("distributed_type: MULTI_CPU\n")), LauncherKind::Simple);

        auto fsdp = launchEnvironment(
            parseConfig("distributed_type: FSDP\nnum_processes: 2\nmixed_precision: bf16\ngpu_ids: '0,1'\n"
                        "fsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n"
                        "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"));
        QCOMPARE(env(fsdp, "ACCELERATE_USE_FSDP"), std::string("true"));
        QCOMPARE(env(fsdp, "FSDP_VERSION"), std::string("2"));
        QCOMPARE(env(fsdp, "FSDP_RESHARD_AFTER_FORWARD"), std::string("true"));
        QCOMPARE(env(fsdp, "FSDP_SHARDING_STRATEGY"), std::string("FULL_SHARD"));
        QCOMPARE(env(fsdp, "FSDP_OFFLOAD_PARAMS"), std::string("false"));
        QCOMPARE(env(fsdp, "FSDP_AUTO_WRAP_POLICY"), std::string("TRANSFORMER_BASED_WRAP"));
        QCOMPARE(env(fsdp, "FSDP_STATE_DICT_TYPE"), std::string("<unset>"));
        QCOMPARE(env(fsdp, "ACCELERATE_MIXED_PRECISION"), std::string("bf16"));
        QCOMPARE(env(fsdp, "CUDA_VISIBLE_DEVICES"), std::string("0,1"));

        const auto v1 = parseConfig("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n"
                                    "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n");
        QCOMPARE(env(launchEnvironment(v1), "FSDP_SHARDING_STRATEGY"), std::string("SHARD_GRAD_OP")); // honoured
        EnvironmentOptions bugCompatible;
        bugCompatible.honourFsdp1Strategy = false;
        QCOMPARE(env(launchEnvironment(v1, bugCompatible), "FSDP_SHARDING_STRATEGY"), std::string("FULL_SHARD"));
        QCOMPARE(env(launchEnvironment(v1), "FSDP_RESHARD_AFTER_FORWARD"), std::string("shard_grad_op"));

        auto ds = launchEnvironment(
            parseConfig("distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: fp16\n"
                        "deepspeed_config:\n  zero_stage: 3\n  zero3_init_flag: true\n  gradient_clipping: 1.0\n"));
        QCOMPARE(env(ds, "ACCELERATE_USE_DEEPSPEED"), std::string("true"));
        QCOMPARE(env(ds, "ACCELERATE_DEEPSPEED_ZERO_STAGE"), std::string("3"));
        QCOMPARE(env(ds, "ACCELERATE_DEEPSPEED_ZERO3_INIT"), std::string("true"));
        QCOMPARE(env(ds, "ACCELERATE_GRADIENT_CLIPPING"), std::string("1.0"));
        QCOMPARE(env(ds, "ACCELERATE_CONFIG_DS_FIELDS"),
                 std::string("zero_stage,zero3_init_flag,gradient_clipping,mixed_precision"));
        QCOMPARE(env(ds, "ACCELERATE_DYNAMO_BACKEND"), std::string("<unset>")); // not for DeepSpeed
        QCOMPARE(env(ds, "OMP_NUM_THREADS"), std::string("1")); // torchrun's, for several local ranks

        auto fp8 = launchEnvironment(parseConfig("distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\n"
                                                 "fp8_config:\n  backend: TE\n  fp8_format: E4M3\n"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_BACKEND"), std::string("TE"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_FORMAT"), std::string("E4M3"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_MARGIN"), std::string("0"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_AMAX_COMPUTE_ALGO"), std::string("most_recent"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"), std::string("1"));
        QCOMPARE(env(fp8, "ACCELERATE_FP8_OVERRIDE_FPROP"), std::string("False"));
    }

    // The variables our ranks get against those `accelerate launch` gives its processes for the
    // same file: captured from the real launcher (tests/tools/accelerate_oracle.py launch-env runs
    // `accelerate launch --config_file F dump.py` and records each process's environment).
    void environmentEqualsAccelerateLaunch_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QStringList>("flags"); // accelerate launch's, merged as shardscope launch merges them
        const std::string base = "compute_environment: LOCAL_MACHINE\nmain_training_function: main\nnum_machines: 1\n";
        const std::pair<const char*, std::string> cases[] = {
            {"MULTI_CPU", "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: 'no'\n"},
            {"FSDP v1", "distributed_type: FSDP\nnum_processes: 2\nmixed_precision: bf16\nfsdp_config:\n  fsdp_version: 1\n"
                        "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                        "  fsdp_transformer_layer_cls_to_wrap: GPTBlock\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
                        "  fsdp_backward_prefetch: BACKWARD_PRE\n  fsdp_activation_checkpointing: true\n"},
            {"FSDP v2", "distributed_type: FSDP\nnum_processes: 2\nmixed_precision: 'no'\nfsdp_config:\n  fsdp_version: 2\n"
                        "  fsdp_reshard_after_forward: false\n  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n"
                        "  fsdp_min_num_params: 1000\n  fsdp_offload_params: true\n  fsdp_cpu_ram_efficient_loading: false\n"
                        "  fsdp_sync_module_states: false\n"},
            {"FSDP v2 unprefixed", "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  version: 2\n"
                                   "  reshard_after_forward: true\n  auto_wrap_policy: NO_WRAP\n"},
            {"ZeRO-2", "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: fp16\ndeepspeed_config:\n"
                       "  zero_stage: 2\n  gradient_accumulation_steps: 2\n  gradient_clipping: 1.0\n"
                       "  offload_optimizer_device: cpu\n"},
            {"ZeRO-3", "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
                       "  zero3_init_flag: true\n  zero3_save_16bit_model: true\n  offload_param_device: cpu\n"
                       "  offload_optimizer_device: cpu\n"},
            {"single process", "distributed_type: 'NO'\nnum_processes: 1\nmixed_precision: bf16\n"},
            // fp8_config keys without the fp8 prefix get it (use_mxfp8_block_scaling too, though it
            // holds "fp8"); the questionnaire's spellings become variables of their own.
            {"fp8 TE", "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
                       "  fp8_format: HYBRID\n  amax_history_length: 16\n  amax_compute_algorithm: max\n"
                       "  use_mxfp8_block_scaling: true\n  override_linear_precision: [false, false, true]\n"},
        };
        for (const auto& [name, yaml] : cases)
            for (const char* useCpu : {"false", "true"})
                QTest::newRow((std::string(name) + ", use_cpu: " + useCpu).c_str())
                    << QString::fromStdString(base + yaml + "use_cpu: " + useCpu + "\n") << QStringList();
        // #46: the same command line with the program name swapped. Flags over a file, as
        // accelerate launch merges them (a flag wins; --use_fsdp chooses the launcher).
        const std::string multiGpu = base + "distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: false\n";
        QTest::newRow("flags: FSDP2 over a MULTI_GPU file") << QString::fromStdString(multiGpu)
                                                            << QStringList{"--use_fsdp",
                                                                           "--fsdp_version",
                                                                           "2",
                                                                           "--fsdp_reshard_after_forward",
                                                                           "false",
                                                                           "--fsdp-offload-params",
                                                                           "true",
                                                                           "--fsdp_auto_wrap_policy",
                                                                           "SIZE_BASED_WRAP",
                                                                           "--fsdp_min_num_params",
                                                                           "1000",
                                                                           "--fsdp_state_dict_type",
                                                                           "SHARDED_STATE_DICT"};
        QTest::newRow("flags: dynamo, gpu ids")
            << QString::fromStdString(multiGpu)
            << QStringList{"--dynamo_backend",       "inductor",  "--dynamo_mode", "max-autotune",
                           "--dynamo_use_fullgraph", "--gpu_ids", "0,1",           "--same_network"};
        QTest::newRow("flags: fp8") << QString::fromStdString(
            base + "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\n")
                                    << QStringList{"--fp8_backend", "te", "--fp8_amax_history_len",          "16",
                                                   "--fp8_margin",  "1",  "--fp8_override_linear_precision", "false,false,true"};
        QTest::newRow("flags: HSDP") << QString::fromStdString(base + "distributed_type: FSDP\nnum_processes: 4\n")
                                     << QStringList{"--use_fsdp",
                                                    "--fsdp_version",
                                                    "2",
                                                    "--use_parallelism_config",
                                                    "--parallelism_config_dp_replicate_size",
                                                    "2",
                                                    "--parallelism_config_dp_shard_size",
                                                    "2"};
    }
    void environmentEqualsAccelerateLaunch()
    {
        QFETCH(QString, yaml);
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/config.yaml";
        QVERIFY(writeTextFile(path, yaml.toStdString()).ok());
        std::vector<std::string> oracleArgs = {"launch-env", path};
        std::vector<GivenLaunchFlag> given;
        for (int i = 0; i < flags.size(); ++i) {
            oracleArgs.push_back(flags[i].toStdString());
            const auto* flag = findAccelerateLaunchFlag(flags[i].toStdString());
            QVERIFY2(flag, qPrintable(flags[i]));
            given.push_back({flags[i].toStdString(), {}});
            if (flag->value != FlagValueKind::None) {
                oracleArgs.push_back(flags[++i].toStdString());
                given.back().value = flags[i].toStdString();
            }
        }
        std::string why;
        const auto captured = shardscope::testing::runOracle(oracleArgs, why);
        if (!captured)
            QFAIL(why.c_str());
        QVERIFY2((*captured)["returncode"].get<int>() == 0, (*captured)["stderr"].get<std::string>().c_str());
        const auto& processes = (*captured)["processes"];
        QVERIFY(!processes.empty());

        // What torchrun gives each rank (our launcher gives the same rank variables itself) and what
        // differs on purpose (docs/CONFIG.md): our launcher gives MASTER_ADDR to every rank itself and
        // binds a free port of its own.
        auto perRank = [](const std::string& k) {
            static const std::set<std::string> names = {
                "RANK",       "LOCAL_RANK",       "WORLD_SIZE",  "LOCAL_WORLD_SIZE",
                "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",   "ROLE_WORLD_SIZE",
                "ROLE_NAME",  "MASTER_ADDR",      "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                "PYTHONPATH"};
            return names.count(k) > 0 || k.rfind("TORCHELASTIC_", 0) == 0;
        };
        std::map<std::string, std::string> theirs;
        for (const auto& [k, v] : processes.begin().value().items())
            if (!perRank(k))
                theirs[k] = v.get<std::string>();

        auto cfg = parseAccelerateConfig(yaml.toStdString(), path, FileFormat::Yaml);
        QVERIFY(cfg.ok());
        EnvironmentOptions options;
        options.physicalCores = (*captured)["physical_cores"].get<int>();
        std::map<std::string, std::string> ours;
        std::vector<Diagnostic> flagProblems;
        const AccelerateConfig merged = applyLaunchFlags(applyOverrides(*cfg, {}), given, flagProblems);
        QVERIFY(flagProblems.empty());
        for (const auto& [k, v] : launchEnvironment(merged, options))
            if (!perRank(k))
                ours[k] = v;

        // Deliberate (docs/CONFIG.md): --fp8_backend te is exported upper-cased, as the file spells
        // it; Accelerate exports it as given, and its runtime's FP8BackendType("te") refuses it.
        const std::map<std::string, std::pair<std::string, std::string>> deliberate = {{"ACCELERATE_FP8_BACKEND", {"te", "TE"}}};
        std::string diff;
        for (const auto& [k, v] : theirs)
            if (!ours.count(k))
                diff += "\n  missing " + k + "=" + v;
            else if (deliberate.count(k) && deliberate.at(k) == std::pair{v, ours[k]})
                continue;
            else if (ours[k] != v)
                diff += "\n  " + k + ": accelerate " + v + ", ours " + ours[k];
        for (const auto& [k, v] : ours)
            if (!theirs.count(k))
                diff += "\n  extra " + k + "=" + v;
        QVERIFY2(diff.empty(), diff.c_str());
    }

    void deepSpeedAutoValues()
    {
        const auto cfg = parseConfig("distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n  deepspeed_config_file: "
                                     + shardscope::testing::corpusDir()
                                     + "/examples__deepspeed_config_templates__zero_stage3_config.json\n");
        DeepSpeedContext ctx;
        ctx.numProcesses = 4;
        ctx.microBatchPerGpu = 8;
        ctx.gradientAccumulationSteps = 2;
        ctx.learningRate = 3e-4;
        ctx.weightDecay = 0.1;
        ctx.totalSteps = 1000;
        ctx.mixedPrecision = "fp16";
        auto missingHidden = resolveDeepSpeedConfig(cfg, ctx);
        QVERIFY(!missingHidden.ok());
        QVERIFY(missingHidden.error().message.find("reduce_bucket_size") != std::string::npos);
        ctx.hiddenSize = 1024;
        auto r = resolveDeepSpeedConfig(cfg, ctx);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(r->find("train_micro_batch_size_per_gpu")->asInt(), std::int64_t{8});
        QCOMPARE(r->find("gradient_accumulation_steps")->asInt(), std::int64_t{1}); // concrete in the JSON: it wins
        QCOMPARE(r->find("train_batch_size")->asInt(), std::int64_t{8 * 1 * 4});
        QCOMPARE(r->find("gradient_clipping")->asFloat(), 1.0);
        const Value* zo = r->find("zero_optimization");
        QCOMPARE(zo->find("reduce_bucket_size")->asInt(), std::int64_t{1024 * 1024});
        QCOMPARE(zo->find("stage3_prefetch_bucket_size")->asInt(), std::int64_t{943718});
        QCOMPARE(zo->find("stage3_param_persistence_threshold")->asInt(), std::int64_t{10240});
        QCOMPARE(r->find("optimizer")->find("params")->find("lr")->asFloat(), 3e-4);
        QCOMPARE(r->find("scheduler")->find("params")->find("total_num_steps")->asInt(), std::int64_t{250});
        ctx.mixedPrecision = "bf16"; // the JSON enables fp16
        QVERIFY(!resolveDeepSpeedConfig(cfg, ctx).ok());
    }
};

QTEST_APPLESS_MAIN(TestValidation)
#include "tst_validation.moc"
