// The Hugging Face decoder families against transformers itself: tests/tools/hf_decoder_reference.py
// (the project venv's transformers, no downloads) makes tiny random Llama (GQA; tied with llama3
// RoPE, explicit head_dim, biases and a padding token), Qwen2 (q/k/v biases) and Mistral (linear
// RoPE) models, saves them, and records fp32 logits, loss and every parameter's gradient on fixed
// inputs. The engine loads each folder through a recipe (model.pretrained) and must agree within
// 1e-5. Also: sharded checkpoints, every bad folder refused with the file or key named, recipes
// that write config.json's keys themselves, refusals before launch, and the export read back by
// transformers' from_pretrained.

#include "engine/checkpoint/hf_export.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/model_architecture.h"
#include "engine/recipe/recipe.h"
#include "engine/models/decoder.h"
#include "engine/models/lora.h"
#include "engine/models/pretrained.h"

#include <torch/torch.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kReference = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/hf_decoder_reference.py");
constexpr double kTolerance = 1e-5;

// Runs the reference script; returns its JSON output (empty on failure, with the reason in `why`).
QJsonDocument runReference(const QStringList& args, QString& why)
{
    QProcess python;
    python.start(kPython, QStringList{kReference} + args);
    if (!python.waitForFinished(300000) || python.exitCode() != 0) {
        why = "hf_decoder_reference.py failed: " + QString::fromUtf8(python.readAllStandardError().right(3000));
        return {};
    }
    return QJsonDocument::fromJson(python.readAllStandardOutput());
}

config::ModelRecipe pretrainedRecipe(const std::string& dir, int blockSize = 16)
{
    config::ModelRecipe model;
    model.type = "auto";
    model.pretrained = dir;
    model.blockSize = blockSize;
    return model;
}

double maxDifference(const at::Tensor& a, const at::Tensor& b)
{
    return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>();
}

std::shared_ptr<models::TrainableModel> loadModel(const std::string& dir)
{
    const auto recipe = pretrainedRecipe(dir);
    auto model = models::buildModel(recipe);
    models::loadPretrained(*model, recipe, dir);
    return model;
}

// Expects `run` to throw, with every one of `needles` in the message.
template <typename Fn>
void expectRefusal(Fn run, const QStringList& needles)
{
    try {
        run();
        QFAIL("expected an error");
    } catch (const std::exception& e) {
        const QString message = QString::fromUtf8(e.what());
        for (const auto& needle : needles)
            QVERIFY2(message.contains(needle), qPrintable("'" + needle + "' not in: " + message));
    }
}

} // namespace

class TestDecoderModels : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QJsonArray m_cases;

    std::string caseDir(const QString& name) const { return (m_dir.path() + "/" + name).toStdString(); }
    // A copy of a reference folder to damage.
    std::string copyOf(const QString& name, const QString& as)
    {
        const fs::path to = (m_dir.path() + "/" + as).toStdString();
        fs::remove_all(to);
        fs::copy(caseDir(name), to, fs::copy_options::recursive);
        return to.string();
    }

private slots:
    void initTestCase()
    {
        if (!QFile::exists(kPython))
            QSKIP("no project Python environment (.venv); run ./scripts/setup.sh");
        QVERIFY(m_dir.isValid());
        QString why;
        const auto out = runReference({"--out", m_dir.path()}, why);
        QVERIFY2(out.isArray(), qPrintable(why));
        m_cases = out.array();
        QCOMPARE(m_cases.size(), 4);
        // The same models again, saved in shards of 20 KB with an index.
        const auto sharded = runReference({"--out", m_dir.path() + "/sharded", "--max-shard-size", "20KB", "--case", "llama_gqa"},
                                          why);
        QVERIFY2(sharded.isArray(), qPrintable(why));
    }

    void logitsLossAndGradientsEqualTransformers_data()
    {
        QTest::addColumn<QString>("name");
        for (const auto& c : m_cases)
            QTest::newRow(qPrintable(c.toObject()["case"].toString())) << c.toObject()["case"].toString();
    }

    void logitsLossAndGradientsEqualTransformers()
    {
        QFETCH(QString, name);
        const std::string dir = caseDir(name);
        auto model = loadModel(dir);
        model->train();
        const auto reference = checkpoint::readSafetensors(dir + "/reference.safetensors");
        const at::Tensor logits = model->forward(reference.at("input_ids"));
        QCOMPARE(logits.sizes(), reference.at("logits").sizes());
        const double logitDiff = maxDifference(logits, reference.at("logits"));
        QVERIFY2(logitDiff <= kTolerance, qPrintable(QString("logits differ by %1").arg(logitDiff)));
        // Not trivially equal: the logits spread over several units.
        QVERIFY(reference.at("logits").std().item<double>() > 0.1);

        const at::Tensor loss = model->loss(logits, reference.at("targets"));
        const double lossDiff = std::abs(loss.item<double>() - reference.at("loss").item<double>());
        QVERIFY2(lossDiff <= kTolerance, qPrintable(QString("loss differs by %1").arg(lossDiff)));
        loss.backward();
        int compared = 0;
        for (const auto& item : model->named_parameters()) {
            const auto it = reference.find("grad." + item.key());
            QVERIFY2(it != reference.end(), qPrintable("transformers has no parameter " + QString::fromStdString(item.key())));
            const double gradDiff = maxDifference(item.value().grad(), it->second);
            QVERIFY2(gradDiff <= kTolerance,
                     qPrintable(QString("%1's gradient differs by %2").arg(QString::fromStdString(item.key())).arg(gradDiff)));
            ++compared;
        }
        // Every parameter of transformers' model is one of ours (tied heads have none of their own).
        int referenceGrads = 0;
        for (const auto& [key, tensor] : reference)
            referenceGrads += key.rfind("grad.", 0) == 0;
        QCOMPARE(compared, referenceGrads);

        // The memory estimate's parameter count is the model's (biases, GQA, tied or untied head).
        config::Recipe recipe;
        recipe.model = pretrainedRecipe(dir);
        std::int64_t count = 0;
        for (const auto& p : model->parameters())
            count += p.numel();
        QCOMPARE(config::modelShapeOf(recipe).parameters, count);
    }

    void shardedCheckpointLoads()
    {
        const std::string dir = (m_dir.path() + "/sharded/llama_gqa").toStdString();
        QVERIFY(fs::exists(dir + "/model.safetensors.index.json"));
        QVERIFY(!fs::exists(dir + "/model.safetensors"));
        auto model = loadModel(dir);
        const auto reference = checkpoint::readSafetensors(dir + "/reference.safetensors");
        torch::NoGradGuard noGrad;
        QVERIFY(maxDifference(model->forward(reference.at("input_ids")), reference.at("logits")) <= kTolerance);
    }

    void badFoldersAreRefusedByName()
    {
        const std::string empty = (m_dir.path() + "/empty").toStdString();
        fs::create_directories(empty);
        expectRefusal([&] { loadModel(empty); }, {"config.json"});

        const std::string falcon = copyOf("llama_gqa", "falcon");
        {
            std::ifstream in(falcon + "/config.json");
            std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            text.replace(text.find("\"llama\""), 7, "\"falcon\"");
            std::ofstream(falcon + "/config.json") << text;
        }
        expectRefusal([&] { loadModel(falcon); }, {"falcon"});

        const std::string missingShard = (m_dir.path() + "/missing_shard").toStdString();
        fs::remove_all(missingShard);
        fs::copy((m_dir.path() + "/sharded/llama_gqa").toStdString(), missingShard, fs::copy_options::recursive);
        QFile index(QString::fromStdString(missingShard + "/model.safetensors.index.json"));
        QVERIFY(index.open(QIODevice::ReadOnly));
        const QString shard = QJsonDocument::fromJson(index.readAll())["weight_map"]["model.norm.weight"].toString();
        QVERIFY2(shard.startsWith("model-0"), qPrintable(shard));
        fs::remove(missingShard + "/" + shard.toStdString());
        expectRefusal([&] { loadModel(missingShard); }, {shard, "missing"});

        const std::string truncated = copyOf("qwen2_bias", "truncated");
        fs::resize_file(truncated + "/model.safetensors", fs::file_size(truncated + "/model.safetensors") - 100);
        expectRefusal([&] { loadModel(truncated); }, {"model.safetensors", "truncated"});

        // A tensor of the wrong shape, and one missing.
        auto tensors = checkpoint::readSafetensors(caseDir("mistral_linear") + "/model.safetensors");
        const std::string misshapen = copyOf("mistral_linear", "misshapen");
        auto withShape = tensors;
        withShape["model.layers.1.mlp.up_proj.weight"] = at::zeros({95, 64});
        checkpoint::writeSafetensors(misshapen + "/model.safetensors", {withShape.begin(), withShape.end()});
        expectRefusal([&] { loadModel(misshapen); }, {"model.layers.1.mlp.up_proj.weight", "[95, 64]", "[96, 64]"});
        const std::string missingKey = copyOf("mistral_linear", "missing_key");
        auto without = tensors;
        without.erase("model.norm.weight");
        checkpoint::writeSafetensors(missingKey + "/model.safetensors", {without.begin(), without.end()});
        expectRefusal([&] { loadModel(missingKey); }, {"model.norm.weight"});
    }

    void recipeWritesConfigKeys()
    {
        const std::string yaml = "model:\n"
                                 "  type: llama\n"
                                 "  block_size: 32\n"
                                 "  hidden_size: 48\n"
                                 "  intermediate_size: 80\n"
                                 "  num_hidden_layers: 3\n"
                                 "  num_attention_heads: 6\n"
                                 "  num_key_value_heads: 2\n"
                                 "  vocab_size: 256\n"
                                 "  tie_word_embeddings: true\n"
                                 "  initializer_range: 0.05\n"
                                 "  rope_scaling: {rope_type: linear, factor: 2.0}\n";
        auto recipe = config::parseRecipe(yaml, "r.yaml");
        QVERIFY2(recipe, recipe ? "" : recipe.error().message.c_str());
        auto architecture = config::resolveArchitecture(recipe->model, "r.yaml");
        QVERIFY2(architecture, architecture ? "" : architecture.error().message.c_str());
        QCOMPARE(architecture->numKeyValueHeads, std::int64_t{2});
        QCOMPARE(architecture->headDim, std::int64_t{8});
        QCOMPARE(architecture->rope.type, std::string("linear"));
        QCOMPARE(*architecture->rope.factor, 2.0);
        QVERIFY(architecture->tieWordEmbeddings);

        // The recipe survives its own YAML (the plan carries it that way to every rank).
        auto again = config::parseRecipe(config::recipeToYaml(*recipe), "again.yaml");
        QVERIFY2(again, again ? "" : again.error().message.c_str());
        QCOMPARE(again->model.architecture.size(), recipe->model.architecture.size());
        QCOMPARE(config::resolveArchitecture(again->model, "again.yaml")->headDim, std::int64_t{8});

        // Built as transformers builds LlamaForCausalLM: parameter count and initialisation.
        torch::manual_seed(0);
        auto model = models::buildModel(recipe->model);
        std::int64_t count = 0;
        for (const auto& p : model->parameters())
            count += p.numel();
        const std::int64_t h = 48, kv = 2 * 8, inter = 80, layers = 3, vocab = 256;
        const std::int64_t perLayer = h * h + 2 * h * kv + h * h + 3 * h * inter + 2 * h;
        QCOMPARE(count, vocab * h + layers * perLayer + h); // tied: no separate head
        // The memory estimate counts the same parameters (config::modelShapeOf).
        QCOMPARE(config::modelShapeOf(*recipe).parameters, count);
        QCOMPARE(config::modelShapeOf(*recipe).vocab, vocab);
        const auto named = model->named_parameters();
        QVERIFY(std::abs(named["model.layers.0.mlp.up_proj.weight"].std().item<double>() - 0.05) < 0.005);
        QCOMPARE(named["model.norm.weight"].min().item<double>(), 1.0);
        QCOMPARE(model->wrappableModules().front().className, std::string("LlamaDecoderLayer"));
        QCOMPARE(model->wrappableModules().back().name, std::string("model.layers.2"));
    }

    void recipeMistakesAreNamed()
    {
        auto typo = config::parseRecipe("model:\n  type: qwen2\n  hiden_size: 64\n", "r.yaml");
        QVERIFY(!typo);
        QVERIFY2(typo.error().message.find("did you mean 'hidden_size'") != std::string::npos, typo.error().message.c_str());
        auto gptKey = config::parseRecipe("model:\n  type: llama\n  n_embd: 64\n", "r.yaml");
        QVERIFY(!gptKey);
        QCOMPARE(gptKey.error().keyPath, std::string("model.n_embd"));
        auto both = config::parseRecipe("model:\n  pretrained: /x\n  hidden_size: 64\n", "r.yaml");
        QVERIFY(!both);
        QVERIFY2(both.error().message.find("/x/config.json") != std::string::npos, both.error().message.c_str());
        auto autoAlone = config::parseRecipe("model:\n  type: auto\n", "r.yaml");
        QVERIFY(!autoAlone);
        QVERIFY(autoAlone.error().message.find("model.pretrained") != std::string::npos);
        auto wrongType = config::parseRecipe("model:\n  type: llama\n  hidden_size: big\n", "r.yaml");
        QVERIFY(wrongType); // the recipe keeps config.json's keys as written ...
        auto resolved = config::resolveArchitecture(wrongType->model, "r.yaml");
        QVERIFY(!resolved); // ... and transformers' types are checked when the architecture resolves
        QVERIFY2(resolved.error().message.find("hidden_size") != std::string::npos, resolved.error().message.c_str());

        // A pretrained folder of another family than the recipe names.
        config::ModelRecipe mismatch = pretrainedRecipe(caseDir("qwen2_bias"));
        mismatch.type = "llama";
        auto family = config::resolveArchitecture(mismatch, "r.yaml");
        QVERIFY(!family);
        QVERIFY2(family.error().message.find("model_type is qwen2") != std::string::npos, family.error().message.c_str());
    }

    void unsupportedFeaturesAreRefusedBeforeLaunch()
    {
        config::Recipe recipe;
        recipe.model = pretrainedRecipe(caseDir("mistral_linear"), 128); // its window is 64 tokens
        auto checked = config::checkArchitecture(recipe, "r.yaml");
        QVERIFY(!checked);
        QVERIFY2(checked.error().message.find("sliding window of 64 tokens") != std::string::npos,
                 checked.error().message.c_str());
        recipe.model.blockSize = 64;
        checked = config::checkArchitecture(recipe, "r.yaml");
        QVERIFY2(checked, checked ? "" : checked.error().message.c_str());

        // Byte-level text needs 256 tokens; a vocabulary of 200 cannot embed the demo text.
        auto small = config::parseRecipe("model:\n  type: llama\n  vocab_size: 100\n  hidden_size: 32\n"
                                         "  intermediate_size: 32\n  num_hidden_layers: 1\n  num_attention_heads: 2\n",
                                         "r.yaml");
        QVERIFY(small);
        checked = config::checkArchitecture(*small, "r.yaml");
        QVERIFY(!checked);
        QVERIFY2(checked.error().message.find("vocab_size is 100") != std::string::npos, checked.error().message.c_str());
    }

    void exportLoadsInTransformers_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("tied llama3") << "llama3_tied";
        QTest::newRow("qwen2") << "qwen2_bias";
    }

    void exportLoadsInTransformers()
    {
        QFETCH(QString, name);
        const std::string dir = caseDir(name);
        auto model = loadModel(dir);
        std::vector<std::pair<std::string, at::Tensor>> parameters;
        for (const auto& item : model->named_parameters())
            parameters.emplace_back(item.key(), item.value().detach());
        checkpoint::ExportOptions options;
        options.maxShardBytes = 30000; // several shards and an index
        const std::string out = (m_dir.path() + "/export_" + name).toStdString();
        checkpoint::exportModel(out, parameters, pretrainedRecipe(dir), options);
        QVERIFY(fs::exists(out + "/model.safetensors.index.json"));
        QString why;
        const auto report = runReference({"--check-export", QString::fromStdString(out), "--reference",
                                          QString::fromStdString(dir + "/reference.safetensors")},
                                         why);
        QVERIFY2(report.isObject(), qPrintable(why));
        const double diff = report.object()["max_logit_difference"].toDouble(1.0);
        QVERIFY2(diff <= kTolerance, qPrintable(QString("transformers' logits of the export differ by %1").arg(diff)));
        QCOMPARE(report.object()["class"].toString(), name.startsWith("qwen2") ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    }

    // LoRA on a loaded model: starts as the base model, trains only what PEFT trains, merges to
    // the same function, and its adapter loads in PEFT with the engine's logits.
    void loraAdapterLoadsInPeft_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("bias");
        QTest::addColumn<QStringList>("targets");
        QTest::newRow("llama, PEFT's default targets") << "llama_gqa"
                                                       << "none" << QStringList{};
        QTest::newRow("qwen2, lora_only biases") << "qwen2_bias"
                                                 << "lora_only" << QStringList{"q_proj", "o_proj", "down_proj"};
        QTest::newRow("qwen2, all biases, all-linear") << "qwen2_bias"
                                                       << "all" << QStringList{"all-linear"};
    }

    void loraAdapterLoadsInPeft()
    {
        QFETCH(QString, name);
        QFETCH(QString, bias);
        QFETCH(QStringList, targets);
        const std::string dir = caseDir(name);
        config::ModelRecipe recipe = pretrainedRecipe(dir);
        recipe.lora.enabled = true;
        recipe.lora.r = 4;
        recipe.lora.alpha = 12;
        recipe.lora.bias = bias.toStdString();
        for (const auto& t : targets)
            recipe.lora.targetModules.push_back(t.toStdString());
        auto model = loadModel(dir);
        const auto reference = checkpoint::readSafetensors(dir + "/reference.safetensors");
        const at::Tensor ids = reference.at("input_ids");
        torch::NoGradGuard noGrad;
        model->eval();
        const at::Tensor base = model->forward(ids);
        torch::manual_seed(3);
        const auto summary = models::applyLora(*model, recipe);
        QVERIFY(summary.adaptedModules > 0);
        QVERIFY(summary.trainable > 0 && summary.trainable < summary.total / 2);
        QCOMPARE(maxDifference(model->forward(ids), base), 0.0); // lora_B starts at zero
        // The memory estimate counts the trainable parameters apart (gradients and optimizer state).
        config::Recipe estimated;
        estimated.model = recipe;
        QCOMPARE(config::modelShapeOf(estimated).trainable, summary.trainable);
        QCOMPARE(config::modelShapeOf(estimated).parameters, summary.total);

        // What trains is what PEFT trains: the adapters, and the biases model.lora.bias names.
        std::int64_t adapterParameters = 0;
        for (auto& item : model->named_parameters()) {
            const bool adapter = item.key().find(".lora_") != std::string::npos;
            if (!adapter && item.key().size() > 5 && item.key().substr(item.key().size() - 5) == ".bias") {
                QVERIFY2(item.value().requires_grad() == (bias != "none") || bias == "lora_only", item.key().c_str());
                if (item.value().requires_grad())
                    item.value().add_(0.05); // trained biases, as an optimizer would leave them
            } else {
                QCOMPARE(item.value().requires_grad(), adapter);
            }
            if (adapter) {
                adapterParameters += item.value().numel();
                item.value().normal_(0.0, 0.1); // trained adapters
            }
        }
        if (targets.isEmpty()) // PEFT's default for Llama: q_proj and v_proj of every layer
            QCOMPARE(adapterParameters, std::int64_t{2 * (4 * 64 + 4 * 64 + 4 * 64 + 32 * 4)});
        const at::Tensor adapted = model->forward(ids);
        QVERIFY(maxDifference(adapted, base) > 1e-2);

        std::vector<std::pair<std::string, at::Tensor>> parameters;
        for (const auto& item : model->named_parameters())
            parameters.emplace_back(item.key(), item.value().detach().clone());
        // Merged weights compute the same function (PEFT's merge_and_unload), up to fp32 rounding:
        // W + BA sums in another order than Wx + B(Ax), and the difference grows through the layers.
        auto merged = loadModel(dir);
        merged->eval();
        for (auto& item : merged->named_parameters())
            for (const auto& [key, value] : models::mergeLora(parameters, recipe))
                if (key == item.key())
                    item.value().copy_(value);
        const double mergedDiff = maxDifference(merged->forward(ids), adapted);
        QVERIFY2(mergedDiff <= 1e-4, qPrintable(QString("the merged model differs by %1 (logits up to %2)")
                                                    .arg(mergedDiff)
                                                    .arg(adapted.abs().max().item<double>())));

        const std::string adapterDir =
            (m_dir.path() + "/adapter_" + QString(QTest::currentDataTag()).replace(' ', '_')).toStdString();
        models::saveLoraAdapter(adapterDir, parameters, recipe);
        const std::string logitsPath = adapterDir + "-logits.safetensors";
        checkpoint::writeSafetensors(logitsPath, {{"input_ids", ids}, {"logits", adapted.contiguous()}});
        QString why;
        const auto report = runReference({"--check-adapter", QString::fromStdString(adapterDir), "--base",
                                          QString::fromStdString(dir), "--engine-logits", QString::fromStdString(logitsPath)},
                                         why);
        QVERIFY2(report.isObject(), qPrintable(why));
        QVERIFY2(report["keys_missing"].toArray().isEmpty() && report["keys_extra"].toArray().isEmpty(),
                 qPrintable(QJsonDocument(report.object()).toJson()));
        const double diff = report["max_logit_difference"].toDouble(1.0);
        QVERIFY2(diff <= kTolerance, qPrintable(QString("PEFT's logits with our adapter differ by %1").arg(diff)));
    }

    // A LoRA projection in fp32 without dropout takes the fused node (Note [fused LoRA projection]):
    // its output and every gradient equal PEFT's formula base(x) + lora_B(lora_A(x)) * scaling run
    // through autograd, with and without a (trained) bias, with a frozen and a trainable base weight,
    // on a [batch, seq, in] input.
    void fusedLoraProjectionEqualsPeftsFormula_data()
    {
        QTest::addColumn<bool>("withBias");
        QTest::addColumn<bool>("trainBase");
        QTest::newRow("no bias, frozen base") << false << false;
        QTest::newRow("bias, frozen weight") << true << false;
        QTest::newRow("bias, trainable base") << true << true;
    }
    void fusedLoraProjectionEqualsPeftsFormula()
    {
        QFETCH(bool, withBias);
        QFETCH(bool, trainBase);
        torch::manual_seed(5);
        models::Projection projection(12, 10, withBias);
        {
            torch::NoGradGuard noGrad;
            projection->weight.normal_(0.0, 0.2);
            if (withBias)
                projection->bias.normal_(0.0, 0.2);
        }
        projection->addLora(3, 7.0, 0.0);
        {
            torch::NoGradGuard noGrad;
            projection->lora_B->weight.normal_(0.0, 0.2); // PEFT starts B at zero: no product to check
        }
        projection->weight.set_requires_grad(trainBase);
        if (withBias)
            projection->bias.set_requires_grad(true); // bias "all" or "lora_only" trains it
        const torch::Tensor x = torch::randn({2, 5, 12}).requires_grad_(true);
        const torch::Tensor upstream = torch::randn({2, 5, 10});

        std::vector<torch::Tensor> leaves{x, projection->lora_A->weight, projection->lora_B->weight};
        if (trainBase)
            leaves.push_back(projection->weight);
        if (withBias)
            leaves.push_back(projection->bias);
        const torch::Tensor fused = projection->forward(x);
        QVERIFY2(fused.grad_fn() && fused.grad_fn()->name().find("LoraProjectionFunction") != std::string::npos,
                 fused.grad_fn() ? fused.grad_fn()->name().c_str() : "no grad_fn");
        const auto fusedGrads = torch::autograd::grad({fused}, leaves, {upstream});
        const torch::Tensor peft = torch::nn::functional::linear(x, projection->weight,
                                                                 withBias ? projection->bias : torch::Tensor())
                                   + projection->lora_B->forward(projection->lora_A->forward(x)) * projection->loraScaling;
        const auto peftGrads = torch::autograd::grad({peft}, leaves, {upstream});
        QVERIFY2(torch::allclose(fused, peft, 1e-6, 1e-6), "outputs differ");
        for (size_t i = 0; i < leaves.size(); ++i)
            QVERIFY2(torch::allclose(fusedGrads[i], peftGrads[i], 1e-6, 1e-6),
                     qPrintable(QStringLiteral("gradient %1 differs by %2")
                                    .arg(i)
                                    .arg((fusedGrads[i] - peftGrads[i]).abs().max().item<double>())));
    }

    // Note [fused rotary embedding]: the one-node rotation equals transformers' formula
    // x * cos + rotate_half(x) * sin run through autograd, output and input gradient, on a
    // transposed [B, heads, T, head_dim] view as the attention makes it, in fp32 and bf16; with
    // tables of another dtype (autocast) it is that formula itself.
    void fusedRotaryEmbeddingEqualsTransformersFormula_data()
    {
        QTest::addColumn<bool>("bf16");
        QTest::newRow("fp32") << false;
        QTest::newRow("bf16") << true;
    }
    void fusedRotaryEmbeddingEqualsTransformersFormula()
    {
        QFETCH(bool, bf16);
        const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
        torch::manual_seed(9);
        const torch::Tensor x = torch::randn({2, 6, 3, 8}).to(dtype).transpose(1, 2).requires_grad_(true); // [B, heads, T, D]
        config::HfModelConfig c;
        c.headDim = 8;
        const torch::Tensor freqs = torch::arange(6, torch::kFloat).unsqueeze(-1)
                                    * models::ropeInverseFrequencies(c).unsqueeze(0);
        const torch::Tensor table = torch::cat({freqs, freqs}, -1).unsqueeze(0).unsqueeze(1); // [1, 1, T, D]
        const torch::Tensor cos = table.cos().to(dtype), sin = table.sin().to(dtype);
        const torch::Tensor upstream = torch::randn({2, 3, 6, 8}).to(dtype);

        const torch::Tensor fused = models::applyRotaryEmbedding(x, cos, sin);
        QVERIFY2(fused.grad_fn() && fused.grad_fn()->name().find("RotaryEmbeddingFunction") != std::string::npos,
                 fused.grad_fn() ? fused.grad_fn()->name().c_str() : "no grad_fn");
        const auto half = x.size(-1) / 2;
        const torch::Tensor reference = x * cos + torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * sin;
        QVERIFY2(torch::equal(fused, reference), qPrintable(QString::number((fused - reference).abs().max().item<double>())));
        const auto fusedGrad = torch::autograd::grad({fused}, {x}, {upstream})[0];
        const auto referenceGrad = torch::autograd::grad({reference}, {x}, {upstream})[0];
        QVERIFY2(torch::equal(fusedGrad, referenceGrad),
                 qPrintable(QString::number((fusedGrad - referenceGrad).abs().max().item<double>())));

        const torch::Tensor promoted = models::applyRotaryEmbedding(x, cos.to(torch::kDouble), sin.to(torch::kDouble));
        QCOMPARE(promoted.scalar_type(), torch::kDouble);
    }

    void loraTargetThatMatchesNothingIsNamed()
    {
        config::Recipe recipe;
        recipe.model = pretrainedRecipe(caseDir("llama_gqa"));
        recipe.model.lora.enabled = true;
        recipe.model.lora.targetModules = {"q_proj", "qkv_proj"};
        auto checked = config::checkArchitecture(recipe, "r.yaml");
        QVERIFY(!checked);
        QVERIFY2(checked.error().message.find("'qkv_proj' matches no module") != std::string::npos,
                 checked.error().message.c_str());
        auto model = loadModel(caseDir("llama_gqa"));
        expectRefusal([&] { models::applyLora(*model, recipe.model); }, {"qkv_proj"});
        auto gpt = config::parseRecipe("model: {type: gpt, lora: {r: 4}}\n", "r.yaml");
        QVERIFY(!gpt);
        QVERIFY2(gpt.error().message.find("model.lora") != std::string::npos, gpt.error().message.c_str());
        auto typo = config::parseRecipe("model: {type: llama, lora: {rank: 4}}\n", "r.yaml");
        QVERIFY(!typo);
        QCOMPARE(typo.error().keyPath, std::string("model.lora.rank"));
    }
};

QTEST_GUILESS_MAIN(TestDecoderModels)
#include "tst_decoder_models.moc"
