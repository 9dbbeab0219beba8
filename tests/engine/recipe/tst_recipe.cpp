// The recipe file: defaults, every section read, YAML written back reads the same, and each bad
// input is an error with file:line:column, the key path and the fix.

#include "engine/recipe/recipe.h"

#include <QtTest>

using namespace shardscope::config;
using shardscope::ErrorKind;

class TestRecipe : public QObject {
    Q_OBJECT
private slots:
    void readsEverySection()
    {
        const std::string text = "name: demo\n"
                                 "seed: 7\n"
                                 "model: {type: gpt, n_layer: 3, n_embd: 48, n_head: 6, block_size: 32}\n"
                                 "data: {type: text, shuffle: false, even_batches: false}\n"
                                 "optimizer: {type: sgd, lr: 0.1, momentum: 0.9}\n"
                                 "schedule: {type: cosine, warmup_steps: 5}\n"
                                 "ddp: {bucket_cap_mb: 2.5, overlap: false}\n"
                                 "training: {per_device_batch_size: 8, gradient_accumulation_steps: 4, max_steps: 20,"
                                 " max_grad_norm: 1.0, eval_every: 10}\n"
                                 "profile: {start_step: 3, steps: 2}\n"
                                 "loss_scaler: {init_scale: 1024, growth_interval: 10}\n";
        auto r = parseRecipe(text, "demo.yaml");
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QCOMPARE(r->name, std::string("demo"));
        QCOMPARE(r->seed, std::uint64_t(7));
        QCOMPARE(r->model.nLayer, 3);
        QCOMPARE(r->model.nHead, 6);
        QCOMPARE(r->data.shuffle, false);
        QCOMPARE(r->data.evenBatches, false);
        QCOMPARE(r->optimizer.type, std::string("sgd"));
        QCOMPARE(r->optimizer.momentum, 0.9);
        QCOMPARE(r->schedule.type, std::string("cosine"));
        QCOMPARE(r->ddp.bucketCapMb, 2.5);
        QCOMPARE(r->ddp.overlap, false);
        QCOMPARE(r->gradientAccumulationSteps, 4);
        QCOMPARE(r->maxGradNorm, 1.0);
        QCOMPARE(r->profileStartStep, 3);
        QCOMPARE(r->lossScaler.initScale, 1024.0);
        QCOMPARE(r->lossScaler.growthInterval, 10);
        QCOMPARE(r->lossScaler.backoffFactor, 0.5);

        auto again = parseRecipe(recipeToYaml(*r), "written.yaml");
        QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
        QCOMPARE(recipeToYaml(*again), recipeToYaml(*r));
    }

    void errors_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("typo suggests") << "training:\n  max_step: 3\n"
                                       << "r.yaml:2:3: unknown key 'training.max_step'; did you mean 'max_steps'?";
        QTest::newRow("unknown section") << "modle: {}\n"
                                         << "r.yaml:1:1: unknown key 'modle'; did you mean 'model'?";
        QTest::newRow("wrong type") << "training:\n  max_steps: many\n"
                                    << "r.yaml:2:14: 'training.max_steps' should be an integer, not 'many'";
        QTest::newRow("out of range") << "training: {per_device_batch_size: 0}\n"
                                      << "'training.per_device_batch_size' is 0; it must be at least 1";
        QTest::newRow("bad choice") << "optimizer: {type: adam}\n"
                                    << "'optimizer.type' is 'adam'; choose one of: adamw, sgd";
        QTest::newRow("heads") << "model: {n_embd: 10, n_head: 3}\n"
                               << "must be divisible by 'model.n_head'";
        QTest::newRow("model/data") << "model: {type: mlp}\n"
                                    << "the mlp model trains on data.type 'synthetic_regression'";
        QTest::newRow("yaml syntax") << "model: {type: gpt\n"
                                     << "r.yaml:2:1: not valid YAML";
        QTest::newRow("section not a map") << "model: 3\n"
                                           << "'model' should be a mapping";
    }
    void errors()
    {
        QFETCH(QString, text);
        QFETCH(QString, expected);
        auto r = parseRecipe(text.toStdString(), "r.yaml");
        QVERIFY(!r.ok());
        QVERIFY2(r.error().message.find(expected.toStdString()) != std::string::npos, r.error().message.c_str());
    }

    // The place of an error comes as fields too, so an editor points at it without reading text.
    void errorsCarryTheirPlace()
    {
        auto r = parseRecipe("name: x\ntraining:\n  max_steps: many\n", "r.yaml");
        QVERIFY(!r.ok());
        QCOMPARE(r.error().file, std::string("r.yaml"));
        QCOMPARE(r.error().line, 3);
        QCOMPARE(r.error().column, 14);
        QCOMPARE(r.error().keyPath, std::string("training.max_steps"));
        QVERIFY(r.error().kind == ErrorKind::BadValue);
        auto syntax = parseRecipe("model: {type: gpt\n", "r.yaml");
        QVERIFY(!syntax.ok());
        QCOMPARE(syntax.error().line, 2);
        QCOMPARE(syntax.error().column, 1);
        QVERIFY(syntax.error().kind == ErrorKind::Syntax);
        auto unknown = parseRecipe("modle: {}\n", "r.yaml");
        QCOMPARE(unknown.error().keyPath, std::string("modle"));
        QCOMPARE(unknown.error().line, 1);
        QVERIFY(unknown.error().kind == ErrorKind::UnknownKey);
    }

    // The folder picker's edit: the value set where it is, added where it is not, nothing else
    // changed (comments and layout kept); an inline model section is refused.
    // A checkpoint's model fingerprint is the typed model: the same model written in another key
    // order or style has the same one, `pretrained` is left out, and any field that changes the
    // model changes it.
    void modelFingerprintIsTheTypedModel()
    {
        auto a = parseRecipe("model: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4}\n", "a.yaml");
        auto b = parseRecipe("model:\n  n_head: 4\n  n_embd: 32\n  type: gpt\n  n_layer: 2\n  pretrained: /elsewhere\n",
                             "b.yaml");
        auto c = parseRecipe("model: {type: gpt, n_layer: 3, n_embd: 32, n_head: 4}\n", "c.yaml");
        QVERIFY(a.ok() && b.ok() && c.ok());
        QCOMPARE(modelFingerprint(a->model), modelFingerprint(b->model));
        QVERIFY(modelFingerprint(a->model) != modelFingerprint(c->model));
        QVERIFY(QString::fromStdString(modelFingerprint(c->model)).contains(QStringLiteral("n_layer=3\n")));
        auto lora = parseRecipe("model: {type: llama, vocab_size: 256, hidden_size: 64, num_hidden_layers: 2, "
                                "num_attention_heads: 4, lora: {r: 4}}\n",
                                "l.yaml");
        QVERIFY(lora.ok());
        QVERIFY(QString::fromStdString(modelFingerprint(lora->model)).contains(QStringLiteral("lora.r=4\n")));
    }

    void pretrainedFolderIsSetInTheText()
    {
        const std::string block = "name: r  # mine\nmodel:\n  # the model\n    type: llama\n    pretrained: /old\n"
                                  "data: {type: text}\n";
        auto replaced = withPretrainedFolder(block, "/new/it's here");
        QVERIFY(replaced);
        QCOMPARE(*replaced, std::string("name: r  # mine\nmodel:\n  # the model\n    type: llama\n"
                                        "    pretrained: '/new/it''s here'\ndata: {type: text}\n"));
        QCOMPARE(parseRecipe(*replaced, "r.yaml")->model.pretrained, std::string("/new/it's here"));

        auto added = withPretrainedFolder("model:\n  type: gpt\ntraining: {max_steps: 3}\n", "/m");
        QVERIFY(added);
        QCOMPARE(*added, std::string("model:\n  pretrained: '/m'\n  type: gpt\ntraining: {max_steps: 3}\n"));
        auto fresh = withPretrainedFolder("name: r\n", "/m");
        QVERIFY(fresh);
        QCOMPARE(*fresh, std::string("name: r\nmodel:\n  pretrained: '/m'\n"));
        auto parsed = parseRecipe(*fresh, "r.yaml");
        QVERIFY(parsed);
        QCOMPARE(parsed->model.type, std::string("auto")); // the folder's config.json decides

        auto inline_ = withPretrainedFolder("model: {type: gpt}\n", "/m");
        QVERIFY(!inline_);
        QVERIFY(inline_.error().message.find("inline") != std::string::npos);
    }

    // The recipe editor's data pickers: data.type tokens, the files and the tokenizer set in the
    // text, the rest kept; one file is a scalar, several a list.
    void tokenDataIsSetInTheText()
    {
        const std::string text = "model:\n  type: gpt\n  vocab_size: 600\ndata:\n  type: text  # bytes\n  eval_fraction: 0.2\n";
        auto edited = withTokenData(text, {"/c/a.jsonl", "/c/b's.tokens"}, "/tok");
        QVERIFY(edited);
        QCOMPARE(*edited, std::string("model:\n  type: gpt\n  vocab_size: 600\ndata:\n  tokenizer: '/tok'\n  path: "
                                      "['/c/a.jsonl', '/c/b''s.tokens']\n  type: tokens\n  eval_fraction: 0.2\n"));
        auto parsed = parseRecipe(*edited, "r.yaml");
        QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
        QCOMPARE(parsed->data.paths, (std::vector<std::string>{"/c/a.jsonl", "/c/b's.tokens"}));
        QCOMPARE(parsed->data.evalFraction, 0.2);
        auto one = withTokenData(*edited, {"/c/only.bin"}, "");
        QVERIFY(one);
        QCOMPARE(parseRecipe(*one, "r.yaml")->data.paths, std::vector<std::string>{"/c/only.bin"});
        QCOMPARE(parseRecipe(*one, "r.yaml")->data.tokenizer, std::string("/tok")); // kept
        QVERIFY(!withTokenData("data: {type: text}\n", {"/a.bin"}, ""));
    }

    // Bytes that are not UTF-8 (a Latin-1 file, a cut character) are refused where they are,
    // instead of reaching the run plan's JSON (where they ended the launcher).
    void textThatIsNotUtf8IsRefused()
    {
        auto refused = parseRecipe("name: ok\nmodel: {type: mlp}\n# caf\xe9\n", "latin1.yaml");
        QVERIFY(!refused);
        QVERIFY2(refused.error().message.find("latin1.yaml:3:6") != std::string::npos, refused.error().message.c_str());
        QVERIFY2(refused.error().message.find("not UTF-8") != std::string::npos, refused.error().message.c_str());
        QVERIFY(parseRecipe("name: caf\xc3\xa9\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n", "utf8.yaml"));
    }

    void shippedRecipesLoad()
    {
        for (const char* name : {"demo-gpt.yaml", "demo-mlp.yaml", "demo-llama.yaml"}) {
            auto r = loadRecipe(std::string(SHARDSCOPE_SOURCE_DIR "/resources/recipes/") + name);
            QVERIFY2(r.ok(), r.ok() ? name : r.error().message.c_str());
        }
        // The Llama demo's relative paths are its file's; its data and tokenizer are shipped and fit.
        auto llama = loadRecipe(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-llama.yaml");
        QVERIFY(llama);
        QCOMPARE(llama->data.paths, std::vector<std::string>{SHARDSCOPE_SOURCE_DIR "/resources/data/demo.jsonl"});
        QCOMPARE(llama->data.tokenizer, std::string(SHARDSCOPE_SOURCE_DIR "/resources/tokenizers/demo"));
        llama->model.vocabSize = 2048; // what the architecture resolves to (the recipe's vocab_size key)
        auto inputs = checkRecipeInputs(*llama);
        QVERIFY2(inputs, inputs ? "" : inputs.error().message.c_str());
        llama->model.vocabSize = 2000;
        QVERIFY(!checkRecipeInputs(*llama)); // the tokenizer's 2048 ids do not fit
    }
};

QTEST_APPLESS_MAIN(TestRecipe)
#include "tst_recipe.moc"
