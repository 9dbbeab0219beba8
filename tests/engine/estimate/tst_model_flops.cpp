// #22: the FLOPs MFU counts, against hand counts: the demo GPT and a Llama 3.2 1B shape (which is
// also torchtitan's 6N + 12 L H Q T), LoRA's frozen base, recomputation apart, the MLP; and the
// GPU peak table (dense figures, specific names before general ones, unknowns unknown).

#include "engine/estimate/device_peaks.h"
#include "engine/estimate/model_flops.h"

#include <QtTest>

using namespace shardscope;

namespace {

config::Recipe recipeOf(const std::string& yaml)
{
    auto recipe = config::parseRecipe(yaml, "r.yaml");
    if (!recipe)
        qFatal("%s", recipe.error().message.c_str());
    return *recipe;
}

const std::string kLlama1B = "model:\n"
                             "  type: llama\n"
                             "  block_size: 2048\n"
                             "  hidden_size: 2048\n"
                             "  intermediate_size: 8192\n"
                             "  num_hidden_layers: 16\n"
                             "  num_attention_heads: 32\n"
                             "  num_key_value_heads: 8\n"
                             "  vocab_size: 128256\n"
                             "  max_position_embeddings: 131072\n"
                             "  tie_word_embeddings: true\n";

} // namespace

class TestModelFlops : public QObject {
    Q_OBJECT
private slots:
    void demoGptByHand()
    {
        auto recipe = config::loadRecipe(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-gpt.yaml");
        QVERIFY2(recipe, recipe ? "" : recipe.error().message.c_str());
        auto flops = config::flopsPerToken(*recipe, false);
        QVERIFY2(flops, flops ? "" : flops.error().message.c_str());
        // 4 layers of n_embd 128 (12 d^2 of matmul weights each), the tied head 128 x 256, 128 tokens:
        // forward 2 x (4 x 12 x 16384 + 32768) + 4 x 4 x 128 x 128 = 1,638,400 + 262,144.
        QCOMPARE(flops->forward, 1900544.0);
        QCOMPARE(flops->model, 3 * 1900544.0);
        QCOMPARE(flops->recompute, 0.0);
        auto checkpointed = config::flopsPerToken(*recipe, true);
        QCOMPARE(checkpointed->model, flops->model); // MFU's count is the same
        QCOMPARE(checkpointed->recompute, 2.0 * 4 * 12 * 16384 + 262144); // the blocks again, not the head
        QCOMPARE(checkpointed->hardware(), flops->model + checkpointed->recompute);
    }

    void llamaShapeByHand()
    {
        auto flops = config::flopsPerToken(recipeOf(kLlama1B), false);
        QVERIFY2(flops, flops ? "" : flops.error().message.c_str());
        // A layer: q 2048x2048, k and v 2048x512 (8 of 32 heads), o 2048x2048, gate/up/down 3 x 2048x8192
        // = 60,817,408 weights; 16 layers and the head 2048 x 128256: N = 1,235,746,816.
        const double n = 16.0 * 60817408 + 2048.0 * 128256;
        QCOMPARE(n, 1235746816.0);
        const double attention = 4.0 * 16 * 32 * 64 * 2048; // scores and weighted sum, head_dim 64
        QCOMPARE(flops->forward, 2 * n + attention);
        QCOMPARE(flops->model, 6 * n + 12.0 * 16 * 32 * 64 * 2048); // torchtitan's num_flops_per_token
        QCOMPARE(flops->model, 8219787264.0);
    }

    // LoRA trains the adapters only: the frozen base's weight gradients are never computed.
    void loraCountsTheFrozenBaseOnce()
    {
        const auto full = config::flopsPerToken(recipeOf(kLlama1B), false);
        const auto lora = config::flopsPerToken(recipeOf(kLlama1B + "  lora: {r: 8, target_modules: [q_proj, v_proj]}\n"), false);
        QVERIFY2(lora, lora ? "" : lora.error().message.c_str());
        const double n = 1235746816.0, attention = 4.0 * 16 * 32 * 64 * 2048;
        // Adapters per layer: q 8 x (2048 + 2048), v 8 x (2048 + 512).
        const double adapters = 16.0 * (8 * (2048 + 2048) + 8 * (2048 + 512));
        QCOMPARE(lora->forward, 2 * n + 2 * adapters + attention);
        // Backward: input gradients of everything (one forward), weight gradients of the adapters.
        QCOMPARE(lora->model, lora->forward + (lora->forward + 2 * adapters + attention));
        QVERIFY(lora->model < 0.7 * full->model);
    }

    void mlpByHand()
    {
        auto flops = config::flopsPerToken(recipeOf("model: {type: mlp, input_dim: 32, hidden_dim: 64, depth: 2, output_dim: 1}\n"
                                                    "data: {type: synthetic_regression}\n"),
                                           false);
        QVERIFY2(flops, flops ? "" : flops.error().message.c_str());
        QCOMPARE(flops->forward, 2.0 * (32 * 64 + 64 * 64 + 64 * 1));
        QCOMPARE(flops->model, 3 * flops->forward);
    }

    void modelThatDoesNotResolveSaysWhy()
    {
        auto flops = config::flopsPerToken(recipeOf("model: {type: llama, hidden_size: big}\n"), false);
        QVERIFY(!flops);
        QVERIFY2(flops.error().message.find("hidden_size") != std::string::npos, flops.error().message.c_str());
    }

    void gpuPeaks_data()
    {
        QTest::addColumn<QString>("device");
        QTest::addColumn<QString>("dtype");
        QTest::addColumn<double>("tflops"); // 0: unknown
        QTest::newRow("H100 SXM bf16") << "NVIDIA H100 80GB HBM3"
                                       << "bfloat16" << 989.4;
        QTest::newRow("H100 SXM fp8") << "NVIDIA H100 80GB HBM3"
                                      << "float8" << 1978.9;
        QTest::newRow("H100 PCIe bf16") << "NVIDIA H100 PCIe"
                                        << "bfloat16" << 756.0;
        QTest::newRow("H200 bf16") << "NVIDIA H200"
                                   << "bfloat16" << 989.4;
        QTest::newRow("H100 fp32 (no TF32)") << "NVIDIA H100 80GB HBM3"
                                             << "float32" << 66.9;
        QTest::newRow("A100 bf16") << "NVIDIA A100-SXM4-80GB"
                                   << "bfloat16" << 312.0;
        QTest::newRow("A100 has no fp8") << "NVIDIA A100-SXM4-80GB"
                                         << "float8" << 0.0;
        QTest::newRow("L40S is not an L4") << "NVIDIA L40S"
                                           << "bfloat16" << 362.0;
        QTest::newRow("L4") << "NVIDIA L4"
                            << "bfloat16" << 121.0;
        QTest::newRow("A10G is not an A10") << "NVIDIA A10G"
                                            << "bfloat16" << 0.0;
        QTest::newRow("V100 has no bf16 tensor cores") << "Tesla V100-SXM2-32GB"
                                                       << "bfloat16" << 0.0;
        QTest::newRow("unknown GPU") << "NVIDIA GeForce GT 710"
                                     << "float32" << 0.0;
    }
    void gpuPeaks()
    {
        QFETCH(QString, device);
        QFETCH(QString, dtype);
        QFETCH(double, tflops);
        const auto peak = config::gpuPeakFlops(device.toStdString(), dtype.toStdString());
        if (tflops == 0) {
            QVERIFY(!peak);
            return;
        }
        QVERIFY(peak);
        QCOMPARE(*peak, tflops * 1e12);
    }
};

QTEST_APPLESS_MAIN(TestModelFlops)
#include "tst_model_flops.moc"
