// The memory estimate against the ZeRO paper's formulas (exact, in bytes) and against what an
// Accelerate config asks for.

#include "engine/estimate/memory_estimate.h"

#include <QTest>

using namespace shardscope::config;

namespace {
constexpr double kPsi = 7e9; // a 7B model
}

class TestMemoryEstimate : public QObject {
    Q_OBJECT

private slots:
    void zeroFormulas_data()
    {
        QTest::addColumn<int>("stage");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<double>("expectedModelStates"); // bytes per rank
        for (int n : {1, 8, 64}) {
            const double N = n;
            QTest::addRow("stage0 N=%d", n) << 0 << n << 16 * kPsi;
            QTest::addRow("stage1 N=%d", n) << 1 << n << 4 * kPsi + 12 * kPsi / N;
            QTest::addRow("stage2 N=%d", n) << 2 << n << 2 * kPsi + 14 * kPsi / N;
            QTest::addRow("stage3 N=%d", n) << 3 << n << 16 * kPsi / N;
        }
    }
    void zeroFormulas()
    {
        QFETCH(int, stage);
        QFETCH(int, ranks);
        QFETCH(double, expectedModelStates);
        ModelShape m;
        m.parameters = static_cast<std::int64_t>(kPsi);
        ModelStateLayout s;
        s.zeroStage = stage;
        s.shardRanks = ranks;
        const MemoryEstimate e = estimateMemory(m, PrecisionMode::Bf16, s);
        QCOMPARE(e.modelStates(), expectedModelStates);
        // The parts: 2Ψ fp16 parameters, 2Ψ fp16 gradients, 12Ψ optimizer (master, m, v).
        QCOMPARE(e.parameters, stage >= 3 ? 2 * kPsi / ranks : 2 * kPsi);
        QCOMPARE(e.gradients, stage >= 2 ? 2 * kPsi / ranks : 2 * kPsi);
        QCOMPARE(e.optimizer, stage >= 1 ? 12 * kPsi / ranks : 12 * kPsi);
        QCOMPARE(e.hostTotal(), 0.0);
    }

    void precisionModes_data()
    {
        QTest::addColumn<int>("mode");
        QTest::addColumn<double>("bytesPerParam");
        QTest::newRow("fp32 Adam") << int(PrecisionMode::No) << 16.0; // 4 + 4 + 8
        QTest::newRow("mixed Adam") << int(PrecisionMode::Bf16) << 16.0; // 2 + 2 + 12
        QTest::newRow("fp8 Adam") << int(PrecisionMode::Fp8) << 16.0;
        QTest::newRow("pure bf16 Adam") << int(PrecisionMode::Bf16Pure) << 8.0; // 2 + 2 + 4
    }
    void precisionModes()
    {
        QFETCH(int, mode);
        QFETCH(double, bytesPerParam);
        ModelShape m;
        m.parameters = static_cast<std::int64_t>(kPsi);
        const MemoryEstimate e = estimateMemory(m, static_cast<PrecisionMode>(mode), ModelStateLayout{});
        QCOMPARE(e.modelStates(), bytesPerParam * kPsi);
    }

    void offloadMovesStatesToHost()
    {
        ModelShape m;
        m.parameters = static_cast<std::int64_t>(kPsi);
        ModelStateLayout s;
        s.zeroStage = 3;
        s.shardRanks = 8;
        s.offloadOptimizer = true;
        s.offloadParams = true;
        const MemoryEstimate e = estimateMemory(m, PrecisionMode::Bf16, s);
        QCOMPARE(e.optimizer, 0.0);
        QCOMPARE(e.parameters, 0.0);
        QCOMPARE(e.gradients, 2 * kPsi / 8);
        QCOMPARE(e.hostOptimizer, 12 * kPsi / 8);
        QCOMPARE(e.hostParameters, 2 * kPsi / 8);
        QCOMPARE(e.modelStates() + e.hostTotal(), 16 * kPsi / 8); // moved, not lost
    }

    // FSDP's SHARD_GRAD_OP keeps the shards as FULL_SHARD does and every unit's full parameters
    // from its forward to its backward: FSDP books the fp32 shard as the parameter, where ZeRO-2
    // books it with the optimizer. In fp32 both add up to 4Ψ + 16Ψ/N. Offloading the shards leaves
    // the full parameters on the device.
    void fsdpShardGradOpHoldsFullParametersBesideItsShards()
    {
        ModelShape m;
        m.parameters = static_cast<std::int64_t>(kPsi);
        ModelStateLayout s;
        s.zeroStage = 3;
        s.shardRanks = 8;
        s.fullParamsForwardToBackward = true;
        const MemoryEstimate e = estimateMemory(m, PrecisionMode::No, s);
        QCOMPARE(e.parameters, 4 * kPsi + 4 * kPsi / 8);
        QCOMPARE(e.gradients, 4 * kPsi / 8);
        QCOMPARE(e.optimizer, 8 * kPsi / 8);
        ModelStateLayout zero2;
        zero2.zeroStage = 2;
        zero2.shardRanks = 8;
        QCOMPARE(e.modelStates(), estimateMemory(m, PrecisionMode::No, zero2).modelStates());
        QCOMPARE(estimateMemory(m, PrecisionMode::Bf16, s).modelStates(), 2 * kPsi + 16 * kPsi / 8);

        s.offloadParams = s.offloadGrads = s.offloadOptimizer = true;
        const MemoryEstimate offloaded = estimateMemory(m, PrecisionMode::No, s);
        QCOMPARE(offloaded.parameters, 4 * kPsi);
        QCOMPARE(offloaded.hostParameters, 4 * kPsi / 8);
        QCOMPARE(offloaded.modelStates() + offloaded.hostTotal(), e.modelStates()); // moved, not lost
    }

    void activationsFollowKorthikanti()
    {
        ModelShape m;
        m.parameters = 1000;
        m.layers = 2;
        m.hidden = 64;
        m.heads = 4;
        m.sequence = 128;
        m.microBatch = 8;
        const double perLayer = 128.0 * 8 * 64 * (34 + 5.0 * 4 * 128 / 64);
        QCOMPARE(estimateMemory(m, PrecisionMode::Bf16, ModelStateLayout{}).activations, 2 * perLayer);
        QCOMPARE(estimateMemory(m, PrecisionMode::No, ModelStateLayout{}).activations, 4 * perLayer);
        ModelStateLayout ckpt;
        ckpt.activationCheckpointing = true;
        QCOMPARE(estimateMemory(m, PrecisionMode::Bf16, ckpt).activations, 2 * 2 * 128.0 * 8 * 64 + perLayer);
        m.vocab = 256;
        QCOMPARE(estimateMemory(m, PrecisionMode::Bf16, ModelStateLayout{}).activations, 2 * perLayer + 128.0 * 8 * 256 * 4);
    }

    void setupFromConfig_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<int>("stage");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<bool>("offloadOptimizer");
        QTest::addColumn<int>("precision");
        QTest::newRow("ddp") << "distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: bf16\n"
                             << 0 << 8 << false << int(PrecisionMode::Bf16);
        QTest::newRow("zero2 offload") << "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: fp16\n"
                                          "deepspeed_config:\n  zero_stage: 2\n  offload_optimizer_device: cpu\n"
                                       << 2 << 8 << true << int(PrecisionMode::Fp16);
        QTest::newRow("deepspeed default stage") << "distributed_type: DEEPSPEED\nnum_processes: 4\n"
                                                 << 2 << 4 << false << int(PrecisionMode::No);
        QTest::newRow("fsdp2 reshard") << "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
                                          "  fsdp_reshard_after_forward: true\n"
                                       << 3 << 8 << false << int(PrecisionMode::No);
        QTest::newRow("fsdp2 no reshard") << "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
                                             "  fsdp_reshard_after_forward: false\n"
                                          << 3 << 8 << false << int(PrecisionMode::No);
        // FSDP1: the strategy the user wrote is honoured (Accelerate itself launches FULL_SHARD).
        QTest::newRow("fsdp1 strategy in reshard key")
            << "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 1\n"
               "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
            << 3 << 8 << false << int(PrecisionMode::No);
        QTest::newRow("fsdp1 legacy int")
            << "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_sharding_strategy: 3\n"
            << 0 << 8 << false << int(PrecisionMode::No);
        QTest::newRow("fsdp offload") << "distributed_type: FSDP\nnum_processes: 4\nmixed_precision: fp8\nfsdp_config:\n"
                                         "  fsdp_offload_params: true\n"
                                      << 3 << 4 << true << int(PrecisionMode::Fp8);
    }
    void setupFromConfig()
    {
        QFETCH(QString, yaml);
        QFETCH(int, stage);
        QFETCH(int, ranks);
        QFETCH(bool, offloadOptimizer);
        QFETCH(int, precision);
        auto cfg = parseAccelerateConfig(yaml.toStdString(), "c.yaml", FileFormat::Yaml);
        QVERIFY(cfg.ok());
        auto setup = memorySetupFromConfig(*cfg);
        QVERIFY(setup.ok());
        QCOMPARE(setup->sharding.zeroStage, stage);
        const bool shardGradOp = yaml.contains("SHARD_GRAD_OP") || yaml.contains("reshard_after_forward: false");
        QCOMPARE(setup->sharding.fullParamsForwardToBackward, shardGradOp);
        QCOMPARE(setup->sharding.shardRanks, ranks);
        QCOMPARE(setup->sharding.offloadOptimizer, offloadOptimizer);
        QCOMPARE(int(setup->precision), precision);
    }

    void parameterCounts()
    {
        QCOMPARE(parseParameterCount("7B").value_or(0), std::int64_t{7000000000});
        QCOMPARE(parseParameterCount("1.3e9").value_or(0), std::int64_t{1300000000});
        QCOMPARE(parseParameterCount("125M").value_or(0), std::int64_t{125000000});
        QVERIFY(!parseParameterCount("seven").has_value());
        QCOMPARE(formatBytes(112e9), std::string("104.31 GB"));
        QCOMPARE(formatBytes(512), std::string("512 bytes"));
    }
};

QTEST_APPLESS_MAIN(TestMemoryEstimate)
#include "tst_memory_estimate.moc"
