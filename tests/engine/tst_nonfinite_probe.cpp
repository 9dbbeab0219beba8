// #22 where a NaN began: the probe on a real model (the engine's GPT, three blocks) names the
// first module whose output was non-finite in forward, or, when forward was finite, the first
// whose output gradient was non-finite in backward; a finite step names nothing, and the checks
// are forgotten at the next step.

#include "engine/models/models.h"
#include "engine/models/pretrained.h"
#include "engine/train/nonfinite_probe.h"

#include <torch/torch.h>

#include <QtTest>

#include <limits>

using namespace shardscope;

namespace {

config::ModelRecipe tinyGpt()
{
    config::ModelRecipe recipe;
    recipe.type = "gpt";
    recipe.nLayer = 3;
    recipe.nEmbd = 16;
    recipe.nHead = 2;
    recipe.blockSize = 8;
    return recipe;
}

models::ForwardHooks& hooksOf(models::TrainableModel& model, const std::string& name)
{
    for (auto& m : model.wrappableModules())
        if (m.name == name)
            return *m.hooks;
    throw std::runtime_error("no module " + name);
}

double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// One forward and backward of a batch.
void step(models::TrainableModel& model, train::NonfiniteProbe& probe)
{
    probe.beginStep();
    torch::manual_seed(0);
    auto tokens = torch::randint(0, 256, {2, 8}, torch::kLong);
    model.loss(model.forward(tokens), tokens).backward();
}

} // namespace

class TestNonfiniteProbe : public QObject {
    Q_OBJECT
private slots:
    void finiteStepNamesNothing()
    {
        auto model = models::buildModel(tinyGpt());
        train::NonfiniteProbe probe;
        probe.attach(*model);
        step(*model, probe);
        QVERIFY(!probe.firstNonfinite());
        QVERIFY(probe.describe(true).find("every module's output and output gradient was finite") != std::string::npos);
    }

    void nanInABlockOutputNamesThatBlock()
    {
        auto model = models::buildModel(tinyGpt());
        bool spoil = true;
        // The fault before the probe, as the trainer orders them.
        hooksOf(*model, "h.1").addPostHook([&](const at::Tensor& out) {
            if (!spoil)
                return out;
            auto bad = torch::zeros_like(out);
            bad.view({-1})[0] = nan();
            return out + bad;
        });
        train::NonfiniteProbe probe;
        probe.attach(*model);
        step(*model, probe);
        auto origin = probe.firstNonfinite();
        QVERIFY(origin);
        QCOMPARE(origin->module, std::string("h.1")); // not h.2 or the output, which follow it
        QCOMPARE(origin->pass, std::string("forward"));
        QCOMPARE(probe.describe(false), std::string("the first non-finite output on this rank was h.1's, in forward"));
        spoil = false;
        step(*model, probe); // the next step starts clean
        QVERIFY(!probe.firstNonfinite());
    }

    void nanInAGradientNamesWhereBackwardMetIt()
    {
        auto model = models::buildModel(tinyGpt());
        // The gradient into h.1's output becomes NaN (h.0's follows from it in backward).
        hooksOf(*model, "h.1").addPostHook([](const at::Tensor& out) {
            out.register_hook([](const at::Tensor& grad) { return grad * nan(); });
            return out;
        });
        train::NonfiniteProbe probe;
        probe.attach(*model);
        step(*model, probe);
        auto origin = probe.firstNonfinite();
        QVERIFY(origin);
        QCOMPARE(origin->module, std::string("h.1"));
        QCOMPARE(origin->pass, std::string("backward"));
        QVERIFY(probe.describe(true).find("the first non-finite gradient was the one into h.1's output") != std::string::npos);
    }

    void nanFromTheLossFunctionIsSaid()
    {
        auto model = models::buildModel(tinyGpt());
        train::NonfiniteProbe probe;
        probe.attach(*model);
        probe.beginStep();
        auto tokens = torch::randint(0, 256, {2, 8}, torch::kLong);
        model->forward(tokens); // finite; the loss (not computed here) was not
        QVERIFY(!probe.firstNonfinite());
        QVERIFY(probe.describe(false).find("the loss function made the non-finite value") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestNonfiniteProbe)
#include "tst_nonfinite_probe.moc"
