// What the Configure page shows, computed without a widget (ui/configure_check.h): the plan is
// built with the recipe, so a config x recipe error is listed before launch; the estimate is the
// planned run's own (estimateRun, the function a rank's report uses) and, while the plan is
// refused, the config's alone; a script run lists its own problems; the one-click fix.

#include "engine/estimate/memory_estimate.h"
#include "tests/common/config_text.h"
#include "ui/configure_check.h"

#include <QtTest>

using namespace shardscope;
using shardscope::testing::parseConfig;

namespace {

config::Recipe loraRecipe()
{
    auto recipe = config::parseRecipe("name: lora\nmodel:\n  type: llama\n  vocab_size: 256\n  hidden_size: 64\n"
                                      "  intermediate_size: 128\n  num_hidden_layers: 2\n  num_attention_heads: 4\n"
                                      "  num_key_value_heads: 2\n  block_size: 32\n  lora: {r: 4}\n",
                                      "lora.yaml");
    if (!recipe)
        qFatal("%s", recipe.error().message.c_str());
    return *recipe;
}

ui::ConfigureInputs inputsOf(const std::string& yaml, std::optional<config::Recipe> recipe)
{
    ui::ConfigureInputs in;
    in.config = parseConfig(yaml);
    in.recipe = std::move(recipe);
    in.recipeSource = "lora.yaml";
    return in;
}

bool lists(const ui::ConfigureCheck& check, const std::string& keyPath, const QString& words)
{
    for (int i = 0; i < static_cast<int>(check.problems.size()); ++i)
        if (check.problems[i].keyPath == keyPath && check.texts.value(i).contains(words))
            return true;
    return false;
}

} // namespace

class TestConfigureCheck : public QObject {
    Q_OBJECT

private slots:
    void configTimesRecipeErrorIsListed()
    {
        const auto check = checkConfigure(
            inputsOf("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n", loraRecipe()));
        QVERIFY(!check.plan.ok());
        QVERIFY(check.errors() >= 1);
        QVERIFY2(lists(check, "recipe", QStringLiteral("fp8 with model.lora")), qPrintable(check.texts.join('\n')));
        // Refused, the chart still has the config's own estimate.
        QVERIFY(check.estimate);
        QVERIFY(check.memorySummary.contains(QStringLiteral("fp8")));
        const auto fine = checkConfigure(
            inputsOf("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: bf16\n", loraRecipe()));
        QVERIFY(fine.plan.ok());
        QCOMPARE(fine.errors(), 0);
    }

    void plannedEstimateIsTheRanks()
    {
        const auto check = checkConfigure(inputsOf("distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n"
                                                   "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: true\n",
                                                   loraRecipe()));
        QVERIFY(check.plan.ok());
        QVERIFY(check.estimate);
        const auto ranks = config::estimateRun(*check.plan.plan);
        QCOMPARE(check.estimate->parameters, ranks.parameters);
        QCOMPARE(check.estimate->hostOptimizer, ranks.hostOptimizer);
        // SHARD_GRAD_OP keeps the full parameters on the device; its shards go to the host.
        QCOMPARE(check.estimate->hostParameters, ranks.hostParameters);
        QVERIFY(check.estimate->hostParameters > 0);
        QCOMPARE(check.estimate->hostParameters * 2, check.estimate->parameters);
        QVERIFY(check.memorySummary.contains(QStringLiteral("FSDP1 SHARD_GRAD_OP + CPU offload")));
    }

    void recipeErrorAndScriptProblems()
    {
        auto in = inputsOf("distributed_type: MULTI_CPU\nnum_processes: 2\n", std::nullopt);
        in.recipeError = QStringLiteral("recipe.yaml:3: unknown key n_layr");
        const auto check = checkConfigure(in);
        QVERIFY(lists(check, "recipe", QStringLiteral("n_layr")));
        QVERIFY(!check.estimate);
        QVERIFY(check.memorySummary.contains(QStringLiteral("recipe has an error")));
        in.script = true;
        in.scriptProblems = {{config::Severity::Warning, "--script", "a warning of the script's"}};
        in.scriptTexts = {QStringLiteral("warning: a warning of the script's")};
        const auto script = checkConfigure(in);
        QCOMPARE(script.problems.size(), std::size_t{1}); // the recipe is not the script run's
        QCOMPARE(script.errors(), 0);
    }

    void gpuConfigOnACpuMachineOffersAFix()
    {
        const auto check = checkConfigure(inputsOf("distributed_type: MULTI_GPU\nnum_processes: 2\n", loraRecipe()));
        QVERIFY(check.errors() >= 1);
        QVERIFY(check.fix);
    }
};

QTEST_GUILESS_MAIN(TestConfigureCheck)
#include "tst_configure_check.moc"
