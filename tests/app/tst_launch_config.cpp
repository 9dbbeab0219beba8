// `shardscope launch --config_file`: an Accelerate config decides the run's shape (ranks, backend,
// FSDP strategy and wrap policy, ZeRO stage, mixed precision, Accelerate's environment), the
// launch flags win over it, and what the engine cannot do is refused before any rank starts.

#include "app/launcher/launch_plan.h"
#include "engine/config/accelerate_config.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>

using namespace shardscope;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");

config::AccelerateConfig parse(const char* yaml)
{
    auto c = config::parseAccelerateConfig(yaml, "test.yaml", config::FileFormat::Yaml);
    if (!c)
        qFatal("%s", c.error().message.c_str());
    return *c;
}

bool hasEnv(const LaunchPlan& plan, const std::string& entry)
{
    return std::find(plan.environment.begin(), plan.environment.end(), entry) != plan.environment.end();
}

} // namespace

class TestLaunchConfig : public QObject {
    Q_OBJECT
private slots:
    void fsdpConfigBecomesEngineOptions()
    {
        auto plan = planLaunch(parse("compute_environment: LOCAL_MACHINE\n"
                                     "distributed_type: FSDP\n"
                                     "mixed_precision: bf16\n"
                                     "num_processes: 4\n"
                                     "fsdp_config:\n"
                                     "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                                     "  fsdp_transformer_layer_cls_to_wrap: GPTBlock, Block2\n"
                                     "  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
                                     "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"),
                               /*hasGpu=*/false);
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QCOMPARE(plan->numProcesses, 4);
        QCOMPARE(plan->distributedType, std::string("FSDP"));
        const std::vector<std::string> expected = {"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "--fsdp_auto_wrap_policy",
                                                   "TRANSFORMER_BASED_WRAP", "--fsdp_transformer_layer_cls_to_wrap", "GPTBlock",
                                                   "Block2",
                                                   // unset in the file: accelerate launch's defaults (true)
                                                   "--fsdp_cpu_ram_efficient_loading", "--fsdp_use_orig_params",
                                                   "--fsdp_state_dict_type", "SHARDED_STATE_DICT"};
        QCOMPARE(plan->workerArgs, expected);
        QCOMPARE(plan->mixedPrecision, std::string("bf16")); // the launch passes it (a flag wins over it)
        QVERIFY(hasEnv(*plan, "ACCELERATE_USE_FSDP=true"));
        QVERIFY(hasEnv(*plan, "ACCELERATE_MIXED_PRECISION=bf16"));
    }

    void fsdp2AndDeepSpeed()
    {
        auto v2 = planLaunch(parse("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                   "  fsdp_reshard_after_forward: false\n"),
                             false);
        QVERIFY(v2.ok());
        QCOMPARE(v2->workerArgs[1], std::string("SHARD_GRAD_OP"));
        auto zero = planLaunch(parse("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"), false);
        QVERIFY(zero.ok());
        QCOMPARE(zero->workerArgs, (std::vector<std::string>{"--zero_stage", "3", "--zero3_init"})); // the plugin's stage-3 default
        auto offload = planLaunch(parse("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
                                        "  offload_optimizer_device: cpu\n  offload_param_device: cpu\n"),
                                  false);
        QVERIFY2(offload.ok(), offload.ok() ? "" : offload.error().message.c_str());
        QCOMPARE(offload->workerArgs, (std::vector<std::string>{"--zero_stage", "3", "--offload_optimizer_device", "cpu",
                                                                "--offload_param_device", "cpu", "--zero3_init"}));
        auto zeroKnobs = planLaunch(parse("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
                                          "  gradient_accumulation_steps: 4\n  gradient_clipping: 0.5\n"
                                          "  zero3_init_flag: true\n  zero3_save_16bit_model: true\n"),
                                    false);
        QVERIFY(zeroKnobs.ok());
        QCOMPARE(zeroKnobs->workerArgs,
                 (std::vector<std::string>{"--zero_stage", "3", "--gradient_accumulation_steps", "4", "--max_grad_norm", "0.5",
                                           "--zero3_init", "--zero3_save_16bit_model"}));
        // From the JSON file: numbers win over the recipe, "auto" leaves the recipe's value.
        QTemporaryDir dir;
        QFile json(dir.filePath("ds.json"));
        QVERIFY(json.open(QIODevice::WriteOnly));
        json.write("{\"gradient_accumulation_steps\": 2, \"gradient_clipping\": \"auto\", "
                   "\"zero_optimization\": {\"stage\": 2}}");
        json.close();
        const QByteArray withFile = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: "
            + json.fileName().toUtf8() + "\n";
        auto fromFile = planLaunch(parse(withFile.constData()), false);
        QVERIFY2(fromFile.ok(), fromFile.ok() ? "" : fromFile.error().message.c_str());
        QCOMPARE(fromFile->workerArgs, (std::vector<std::string>{"--zero_stage", "2", "--gradient_accumulation_steps", "2"}));
        auto hybrid = planLaunch(parse("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                       "  fsdp_sharding_strategy: HYBRID_SHARD_ZERO2\n  fsdp_offload_params: true\n"
                                       "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: true\n"
                                       "  fsdp_use_orig_params: true\n  fsdp_activation_checkpointing: true\n"),
                                 false);
        QVERIFY2(hybrid.ok(), hybrid.ok() ? "" : hybrid.error().message.c_str());
        QCOMPARE(hybrid->workerArgs,
                 (std::vector<std::string>{"--fsdp_sharding_strategy", "HYBRID_SHARD_ZERO2", "--fsdp_auto_wrap_policy", "NO_WRAP",
                                           "--fsdp_offload_params", "--fsdp_cpu_ram_efficient_loading", "--fsdp_use_orig_params",
                                           "--fsdp_activation_checkpointing", "--fsdp_state_dict_type", "FULL_STATE_DICT"}));
    }

    void cpuFsdpGetsAccelerateFsdpEnvironment()
    {
        // use_cpu: true does not change Accelerate's launcher: the FSDP variables are exported.
        config::EnvironmentOptions environment;
        environment.physicalCores = 8;
        auto plan = planLaunch(parse("distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n  fsdp_version: 2\n"),
                               false, environment);
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QVERIFY(hasEnv(*plan, "ACCELERATE_USE_FSDP=true"));
        QVERIFY(hasEnv(*plan, "FSDP_VERSION=2"));
        QVERIFY(hasEnv(*plan, "FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD=false"));
        QVERIFY(hasEnv(*plan, "OMP_NUM_THREADS=4")); // 8 physical cores / 2 local ranks
        QVERIFY(std::none_of(plan->environment.begin(), plan->environment.end(),
                             [](const std::string& e) { return e.rfind("ACCELERATE_USE_CPU=", 0) == 0 || e.rfind("KMP_", 0) == 0; }));
        environment.inheritedOmpThreads = 3;
        plan = planLaunch(parse("distributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n"), false, environment);
        QVERIFY(plan.ok());
        QVERIFY(hasEnv(*plan, "OMP_NUM_THREADS=3")); // the launching environment's wins
    }

    void unsupportedChoicesAreRefused_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QString>("expected");
        QTest::newRow("MULTI_GPU without a GPU") << "distributed_type: MULTI_GPU\nnum_processes: 2\n"
                                                 << "needs NVIDIA GPUs and this machine has none";
        QTest::newRow("optimizer offload to nvme") << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                                      "  zero_stage: 2\n  offload_optimizer_device: nvme\n"
                                                   << "deepspeed_config.offload_optimizer_device: nvme is not supported";
        QTest::newRow("parameter offload below stage 3") << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                                            "  zero_stage: 2\n  offload_param_device: cpu\n"
                                                         << "offload_param_device: cpu needs zero_stage 3";
        QTest::newRow("efficient loading without sync") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                           "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: false\n"
                                                        << "set `--fsdp_sync_module_states` to `True`";
        QTest::newRow("efficient loading by default, without sync") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                                       "  fsdp_sync_module_states: false\n"
                                                                    << "set `--fsdp_sync_module_states` to `True`";
        QTest::newRow("offload with NO_SHARD") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                                                  "  fsdp_sharding_strategy: NO_SHARD\n  fsdp_offload_params: true\n"
                                               << "fsdp_offload_params: true with NO_SHARD is not supported";
        QTest::newRow("activation offload") << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                                               "  fsdp_activation_checkpointing: true\n  fsdp_activation_checkpointing_offload: true\n"
                                            << "does not offload them";
        QTest::newRow("NO with 2 processes") << "distributed_type: 'NO'\nnum_processes: 2\n" << "runs one process";
    }
    void unsupportedChoicesAreRefused()
    {
        QFETCH(QString, yaml);
        QFETCH(QString, expected);
        const QByteArray text = yaml.toUtf8();
        auto plan = planLaunch(parse(text.constData()), false);
        QVERIFY(!plan.ok());
        QVERIFY2(plan.error().message.find(expected.toStdString()) != std::string::npos, plan.error().message.c_str());
    }

    // A real launch: the config's FSDP strategy trains (as its loss equals DDP's), the flag's
    // --num_processes wins over the file's, and the history records the distributed type.
    void launchFollowsTheConfigAndFlagsWin()
    {
        QTemporaryDir dir;
        QFile config(dir.filePath("fsdp.yaml"));
        config.open(QIODevice::WriteOnly);
        config.write("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: 'no'\nnum_processes: 4\n"
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
                                             "--run_name", name, "--num_processes", "2"} + extra);
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
        auto [ddpCode, ddpOut, ddpLosses, ddpRanks] = launch("ddp", {});
        QVERIFY(ddpCode == 0);
        QCOMPARE(fsdpLosses.size(), 6);
        for (int i = 0; i < 6; ++i)
            QVERIFY(std::abs(fsdpLosses[i] - ddpLosses[i]) <= 1e-5 * std::abs(ddpLosses[i]));
    }

    void invalidConfigStopsBeforeAnyRank_data()
    {
        QTest::addColumn<QByteArray>("yaml");
        QTest::addColumn<QString>("named");
        QTest::newRow("misspelt key") << QByteArray("distributed_type: MULTI_CPU\nnum_procesess: 2\n") << "num_processes";
        // Used to launch on port 34463 (99999 mod 65536).
        QTest::newRow("port out of range") << QByteArray("distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: 99999\n")
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
};

QTEST_GUILESS_MAIN(TestLaunchConfig)
#include "tst_launch_config.moc"
