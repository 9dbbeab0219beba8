// #23 fp8 linear layers on the CPU against tests/tools/fp8_reference.py (the same recipe, op for
// op, in PyTorch from the project's venv, same torch wheel): one layer's forward and backward over
// several calls, and 20 SGD steps of a 3-layer fp8 MLP, bit for bit, for tensorwise and delayed
// scaling (both amax_compute_algo, a margin, an interval). Also: fp8 is close to the exact matmul
// (it is a quantization, not something else), and delayed scaling's scale follows the history.

#include "engine/checkpoint/safetensors.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"
#include "engine/models/float8_conversion.h"
#include "engine/models/pretrained.h"
#include "engine/precision/autocast.h"
#include "engine/precision/float8_linear.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using precision::DelayedScalingOptions;
using precision::Float8LinearState;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kReference = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/fp8_reference.py");

struct Recipe {
    bool delayed = false;
    DelayedScalingOptions options;
    QStringList arguments() const
    {
        if (!delayed)
            return {"--recipe", "tensorwise"};
        return {"--recipe",   "delayed",
                "--history",  QString::number(options.amaxHistoryLen),
                "--algo",     options.amaxComputeMax ? "max" : "most_recent",
                "--margin",   QString::number(options.margin),
                "--interval", QString::number(options.interval)};
    }
};

std::map<std::string, at::Tensor> runReference(const QString& command, const QString& inputs, const QString& outputs,
                                               const Recipe& recipe, const QStringList& extra = {})
{
    QProcess python;
    python.setProcessChannelMode(QProcess::MergedChannels);
    python.start(kPython,
                 QStringList{kReference, command, "--inputs", inputs, "--outputs", outputs} + recipe.arguments() + extra);
    if (!python.waitForFinished(120000) || python.exitCode() != 0)
        qFatal("fp8_reference.py failed: %s", python.readAll().constData());
    return checkpoint::readSafetensors(outputs.toStdString());
}

#define VERIFY_EQUAL(ours, theirs, what)                                                                                         \
    QVERIFY2((ours).scalar_type() == (theirs).scalar_type() && at::equal((ours), (theirs)),                                      \
             qPrintable(QStringLiteral("%1 differs: max |ours - reference| = %2")                                                \
                            .arg(QString::fromStdString(what))                                                                   \
                            .arg(((ours).to(at::kDouble) - (theirs).to(at::kDouble)).abs().max().item<double>())))

void addRecipes()
{
    QTest::addColumn<bool>("delayed");
    QTest::addColumn<int>("history");
    QTest::addColumn<bool>("amaxMax");
    QTest::addColumn<int>("margin");
    QTest::addColumn<int>("interval");
    QTest::newRow("tensorwise") << false << 0 << false << 0 << 1;
    QTest::newRow("delayed, most_recent") << true << 16 << false << 0 << 1;
    QTest::newRow("delayed, max over 4, margin 1, interval 2") << true << 4 << true << 1 << 2;
}

Recipe fetchRecipe()
{
    QFETCH(bool, delayed);
    QFETCH(int, history);
    QFETCH(bool, amaxMax);
    QFETCH(int, margin);
    QFETCH(int, interval);
    Recipe r;
    r.delayed = delayed;
    r.options.amaxHistoryLen = history;
    r.options.amaxComputeMax = amaxMax;
    r.options.margin = margin;
    r.options.interval = interval;
    return r;
}

} // namespace

class TestFloat8 : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { at::set_num_threads(1); }

    void layerEqualsTheReference_data() { addRecipes(); }
    void layerEqualsTheReference()
    {
        const Recipe recipe = fetchRecipe();
        QTemporaryDir dir;
        torch::manual_seed(7);
        // bf16 activations, an fp32 master weight, as under mixed precision.
        const auto x = (torch::randn({4, 8, 64}) * 3).to(at::kBFloat16);
        const auto weight = torch::randn({48, 64}) * 0.1;
        const auto bias = torch::randn({48}) * 0.1;
        const auto grad = (torch::randn({4, 8, 48}) * 1e-3).to(at::kBFloat16);
        const QString inputs = dir.filePath("in.safetensors");
        checkpoint::writeSafetensors(inputs.toStdString(), {{"x", x}, {"weight", weight}, {"bias", bias}, {"grad", grad}});
        const int calls = 5; // delayed scaling's scales change from call to call
        auto theirs = runReference("layer", inputs, dir.filePath("out.safetensors"), recipe, {"--calls", QString::number(calls)});
        std::optional<Float8LinearState> state;
        if (recipe.delayed)
            state.emplace(recipe.options);
        for (int k = 0; k < calls; ++k) {
            auto xi = x.clone().requires_grad_(true);
            auto wi = weight.clone().requires_grad_(true);
            auto bi = bias.clone().requires_grad_(true);
            auto out = precision::float8Linear(xi, wi, bi, state ? &*state : nullptr);
            out.backward(grad);
            const std::string n = std::to_string(k);
            VERIFY_EQUAL(out.detach(), theirs.at("out_" + n), "output of call " + n);
            VERIFY_EQUAL(xi.grad(), theirs.at("dx_" + n), "input gradient of call " + n);
            VERIFY_EQUAL(wi.grad(), theirs.at("dw_" + n), "weight gradient of call " + n);
            VERIFY_EQUAL(bi.grad(), theirs.at("db_" + n), "bias gradient of call " + n);
        }
        // A quantization of the exact product, not something else: within fp8's few per cent.
        auto exact = torch::matmul(x.to(at::kFloat), weight.t()) + bias;
        auto ours = precision::float8Linear(x, weight, bias, nullptr).to(at::kFloat);
        const double relative = ((ours - exact).norm() / exact.norm()).item<double>();
        QVERIFY2(relative < 0.08, qPrintable(QString::number(relative)));
    }

    void trainingStepsEqualTheReference_data() { addRecipes(); }
    void trainingStepsEqualTheReference()
    {
        const Recipe recipe = fetchRecipe();
        QTemporaryDir dir;
        torch::manual_seed(11);
        const int steps = 20;
        std::vector<std::pair<std::string, at::Tensor>> tensors = {
            {"w0", torch::randn({64, 32}) * 0.2},  {"b0", torch::zeros({64})},
            {"w1", torch::randn({64, 64}) * 0.15}, {"b1", torch::zeros({64})},
            {"w2", torch::randn({16, 64}) * 0.15}, {"b2", torch::zeros({16})},
            {"xs", torch::randn({steps, 16, 32})}, {"ys", torch::randn({steps, 16, 16}) * 0.5}};
        const QString inputs = dir.filePath("in.safetensors");
        checkpoint::writeSafetensors(inputs.toStdString(), tensors);
        auto theirs = runReference("train", inputs, dir.filePath("out.safetensors"), recipe, {"--lr", "0.05"});

        std::vector<at::Tensor> params;
        for (int i = 0; i < 6; ++i)
            params.push_back(tensors[static_cast<std::size_t>(i)].second.clone().requires_grad_(true));
        std::vector<std::optional<Float8LinearState>> states(3);
        if (recipe.delayed)
            for (auto& s : states)
                s.emplace(recipe.options);
        std::vector<at::Tensor> losses;
        const auto& xs = tensors[6].second;
        const auto& ys = tensors[7].second;
        for (int step = 0; step < steps; ++step) {
            at::Tensor h = xs[step].to(at::kBFloat16);
            for (std::size_t i = 0; i < 3; ++i) {
                h = precision::float8Linear(h, params[2 * i], params[2 * i + 1], states[i] ? &*states[i] : nullptr);
                if (i < 2)
                    h = torch::relu(h);
            }
            auto loss = (h.to(at::kFloat) - ys[step]).pow(2).mean();
            loss.backward();
            {
                torch::NoGradGuard noGrad;
                for (auto& p : params) {
                    p.sub_(p.grad() * 0.05);
                    p.mutable_grad().reset();
                }
            }
            losses.push_back(loss.detach());
        }
        VERIFY_EQUAL(torch::stack(losses), theirs.at("losses"), std::string("the 20 losses"));
        const char* names[] = {"w0", "b0", "w1", "b1", "w2", "b2"};
        for (std::size_t i = 0; i < 6; ++i)
            VERIFY_EQUAL(params[i].detach(), theirs.at(names[i]), std::string("final ") + names[i]);
        QVERIFY2(losses.back().item<double>() < losses.front().item<double>(), "it learns");
    }

    // Delayed scaling: the first call uses scale 1; then fp8_max / amax of the last call
    // (most_recent) or of the history's largest (max), over 2^margin, every `interval` calls.
    void delayedScaleFollowsTheHistory()
    {
        DelayedScalingOptions options;
        options.amaxHistoryLen = 2;
        options.amaxComputeMax = true;
        options.margin = 1;
        options.interval = 1;
        precision::DelayedScale scale(options, 448.0);
        QCOMPARE(scale.scale().item<float>(), 1.0f);
        scale.record(torch::tensor(4.0f));
        QCOMPARE(scale.scale().item<float>(), 448.0f / 4 / 2);
        scale.record(torch::tensor(2.0f)); // history {4, 2}: max 4
        QCOMPARE(scale.scale().item<float>(), 448.0f / 4 / 2);
        scale.record(torch::tensor(1.0f)); // history {2, 1}: the 4 fell out
        QCOMPARE(scale.scale().item<float>(), 448.0f / 2 / 2);
        scale.record(torch::tensor(0.0f)); // history {1, 0}: max 1
        QCOMPARE(scale.scale().item<float>(), 448.0f / 1 / 2);
        options.amaxComputeMax = false;
        precision::DelayedScale recent(options, 448.0);
        recent.record(torch::tensor(8.0f));
        recent.record(torch::tensor(0.0f)); // a zero amax keeps the scale
        QCOMPARE(recent.scale().item<float>(), 448.0f / 8 / 2);
        recent.record(torch::tensor(std::numeric_limits<float>::infinity())); // so does a non-finite one
        QCOMPARE(recent.scale().item<float>(), 448.0f / 8 / 2);
        QCOMPARE(recent.bytes(), std::int64_t{4 * (2 + 1)}); // the history and the scale, fp32
    }

    // What FSDP's fp8 all-gather hands a layer: the weight quantized in two parts (two ranks'
    // shards, split mid-row) with the scale of the whole weight's amax (the max of the parts').
    // The output and the gradients of input, weight and bias equal quantizing the whole weight in
    // the layer, bit for bit; a pre-quantized weight of another shape is refused.
    void preQuantizedWeightEqualsQuantizingInTheLayer()
    {
        torch::manual_seed(5);
        const auto weight = torch::randn({32, 48}).requires_grad_(true);
        const auto bias = torch::randn({32}).requires_grad_(true);
        const auto input = torch::randn({6, 48}).requires_grad_(true);
        const auto upstream = torch::randn({6, 32});
        auto run = [&](const precision::Float8Weight* quantized) {
            for (auto* t : {&weight, &bias, &input})
                t->mutable_grad() = at::Tensor();
            const auto out = precision::float8Linear(input, weight, bias, nullptr, quantized);
            out.backward(upstream);
            return std::vector<at::Tensor>{out.detach(), input.grad().clone(), weight.grad().clone(), bias.grad().clone()};
        };
        const auto whole = run(nullptr);
        const auto flat = weight.detach().reshape({-1});
        const auto first = flat.narrow(0, 0, 700), second = flat.narrow(0, 700, flat.numel() - 700);
        const auto amax = torch::maximum(first.abs().max(), second.abs().max());
        const auto scale = precision::scaleFromAmax(amax, precision::e4m3Max());
        const auto data =
            torch::cat({precision::quantizeE4m3(first, scale), precision::quantizeE4m3(second, scale)}).view({32, 48});
        const precision::Float8Weight gathered{data, scale};
        const auto parts = run(&gathered);
        const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
        for (std::size_t i = 0; i < whole.size(); ++i)
            VERIFY_EQUAL(parts[i], whole[i], names[i]);
        const precision::Float8Weight transposed{data.t().contiguous(), scale};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, precision::float8Linear(input, weight, bias, nullptr, &transposed));
    }

    // Which layers of each model family run in fp8: Accelerate's torchao filter (not the first or
    // last nn.Linear in module order, both dimensions divisible by 16), and the converted model
    // still runs forward and backward under bf16 autocast. The estimator counts the same layers.
    void conversionFollowsAccelerateFilter_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("converted");
        QTest::addColumn<QStringList>("kept");
        QTest::newRow("mlp") << "{type: mlp, input_dim: 8, hidden_dim: 32, depth: 3, output_dim: 1}"
                             << QStringList{"layers.1", "layers.2"} << QStringList{"layers.0 (first)", "layers.3 (last)"};
        QTest::newRow("mlp, dims not divisible by 16")
            << "{type: mlp, input_dim: 8, hidden_dim: 24, depth: 3, output_dim: 1}" << QStringList{}
            << QStringList{"layers.0 (first)", "layers.1 (24x24: not divisible by 16)", "layers.2 (24x24: not divisible by 16)",
                           "layers.3 (last)"};
        QTest::newRow("gpt") << "{type: gpt, n_layer: 1, n_embd: 32, n_head: 2, block_size: 8}"
                             << QStringList{"h.0.attn.c_proj", "h.0.c_fc"}
                             << QStringList{"h.0.attn.c_attn (first)", "h.0.c_proj (last)"};
        QTest::newRow("llama, untied: lm_head last")
            << "{type: llama, block_size: 8, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, "
               "num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 64, tie_word_embeddings: false}"
            << QStringList{"model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
                           "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj",
                           "model.layers.0.mlp.up_proj",      "model.layers.0.mlp.down_proj"}
            << QStringList{"model.layers.0.self_attn.q_proj (first)", "lm_head (last)"};
        QTest::newRow("llama, tied: down_proj last")
            << "{type: llama, block_size: 8, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, "
               "num_attention_heads: 2, num_key_value_heads: 1, vocab_size: 64, tie_word_embeddings: true}"
            << QStringList{"model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
                           "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"}
            << QStringList{"model.layers.0.self_attn.q_proj (first)", "model.layers.0.mlp.down_proj (last)"};
    }
    void conversionFollowsAccelerateFilter()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, converted);
        QFETCH(QStringList, kept);
        const QString data = model.contains("mlp") ? "synthetic_regression" : "text";
        auto recipe = config::parseRecipe(("model: " + model + "\ndata: {type: " + data + "}\n").toStdString(), "r.yaml");
        QVERIFY2(recipe, recipe ? "" : recipe.error().message.c_str());
        torch::manual_seed(0);
        auto built = models::buildModel(recipe->model);
        const auto conversion = models::convertToFloat8(*built, *recipe, config::Float8Options{});
        QStringList names, keptNames;
        for (const auto& n : conversion.converted)
            names << QString::fromStdString(n);
        for (const auto& n : conversion.kept)
            keptNames << QString::fromStdString(n);
        QCOMPARE(names, converted);
        QCOMPARE(keptNames, kept);
        QCOMPARE(config::modelShapeOf(*recipe).fp8Linears, std::int64_t(converted.size()));
        // The estimator's count (arithmetic) against the list, at more layers too.
        for (const std::int64_t layers : {2, 5}) {
            config::Recipe deeper = *recipe;
            deeper.model.nLayer = deeper.model.depth = layers;
            for (auto& [key, value] : deeper.model.architecture)
                if (key == "num_hidden_layers")
                    value = std::to_string(layers);
            std::int64_t listed = 0;
            for (const auto& layer : config::linearLayersOf(deeper))
                listed += layer.fp8 ? 1 : 0;
            QCOMPARE(config::fp8LinearCount(deeper), listed);
        }
        QCOMPARE(conversion.stateBytes, std::int64_t{0}); // tensorwise keeps no state
        const torch::Tensor input = recipe->model.type == "mlp" ? torch::randn({4, 8}) : torch::randint(0, 64, {2, 8});
        precision::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
        const torch::Tensor out = built->forward(input);
        out.to(at::kFloat).square().mean().backward();
        for (const auto& p : built->parameters())
            QVERIFY(p.grad().defined() && torch::isfinite(p.grad()).all().item<bool>());
    }
};

QTEST_GUILESS_MAIN(TestFloat8)
#include "tst_float8.moc"
