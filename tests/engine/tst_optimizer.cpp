// The engine's AdamW (Note [fused AdamW]) against torch.optim.AdamW run by
// tests/tools/adamw_reference.py on the same torch wheel: fed the same parameters, gradients and
// per-step learning rates over two groups (weight decay off for "bias"), fp32 parameters end
// bit-identical to torch.optim.AdamW(fused=True) and within rounding of its unfused loop; the
// state stays torch::optim::AdamW's (what checkpoints save); parameters the kernel is not used
// for (bf16) step exactly as torch::optim::AdamW steps them.

#include "engine/checkpoint/safetensors.h"
#include "engine/train/optimizer_setup.h"

#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kReference = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/adamw_reference.py");
const std::vector<double> kLearningRates = {0.01, 0.01, 0.005, 0.02, 0.01, 0.001};

config::OptimizerRecipe recipe()
{
    config::OptimizerRecipe o;
    o.lr = kLearningRates.front();
    o.beta1 = 0.9;
    o.beta2 = 0.99;
    o.eps = 1e-8;
    o.weightDecay = 0.1;
    o.noWeightDecay = {"bias"};
    return o;
}

struct Problem {
    parallel::NamedTensors params;
    std::vector<std::vector<torch::Tensor>> grads; // [step][parameter]
};

// 37 x 5 and 5 elements: neither a multiple of the kernel's vector width, so its tails run too.
Problem problem(torch::ScalarType dtype)
{
    torch::manual_seed(3);
    Problem p;
    p.params = {{"bias", torch::randn({5}).to(dtype)}, {"weight", torch::randn({37, 5}).to(dtype)}};
    for (std::size_t step = 0; step < kLearningRates.size(); ++step) {
        std::vector<torch::Tensor> grads;
        for (const auto& [name, t] : p.params)
            grads.push_back((torch::randn(t.sizes()) * (step + 1) * 1e-2).to(dtype));
        p.grads.push_back(grads);
    }
    return p;
}

void runSteps(torch::optim::Optimizer& optimizer, const Problem& p)
{
    for (std::size_t step = 0; step < p.grads.size(); ++step) {
        train::setLearningRate(optimizer, kLearningRates[step]);
        for (std::size_t i = 0; i < p.params.size(); ++i)
            p.params[i].second.mutable_grad() = p.grads[step][i].clone();
        optimizer.step();
    }
}

// The parameters as torch.optim.AdamW(fused=`fused`) leaves them.
std::map<std::string, at::Tensor> reference(const Problem& p, bool fused, const QString& dir)
{
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto& [name, t] : p.params)
        tensors.emplace_back("param." + name, t.detach().clone());
    for (std::size_t step = 0; step < p.grads.size(); ++step)
        for (std::size_t i = 0; i < p.params.size(); ++i)
            tensors.emplace_back("grad." + std::to_string(step) + "." + p.params[i].first, p.grads[step][i]);
    const std::string in = (dir + "/in.safetensors").toStdString(), out = (dir + "/out.safetensors").toStdString();
    checkpoint::writeSafetensors(in, tensors);
    QString lrs;
    for (double lr : kLearningRates)
        lrs += (lrs.isEmpty() ? "" : ", ") + QString::number(lr);
    const QString spec = QStringLiteral(R"({"lr": [%1], "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1, "fused": %2})")
                             .arg(lrs, fused ? "true" : "false");
    QProcess python;
    python.start(kPython, {kReference, QString::fromStdString(in), QString::fromStdString(out), spec});
    if (!python.waitForFinished(120000) || python.exitCode() != 0)
        qFatal("adamw_reference.py failed: %s", python.readAllStandardError().constData());
    return checkpoint::readSafetensors(out);
}

parallel::NamedTensors leafCopies(const parallel::NamedTensors& params)
{
    parallel::NamedTensors out;
    for (const auto& [name, t] : params)
        out.emplace_back(name, t.detach().clone().requires_grad_(true));
    return out;
}

} // namespace

class TestOptimizer : public QObject {
    Q_OBJECT
private slots:
    void fp32StepsAsTorchsFusedAdamW()
    {
        QTemporaryDir dir;
        Problem p = problem(torch::kFloat);
        const auto fused = reference(p, /*fused=*/true, dir.path());
        const auto loop = reference(p, /*fused=*/false, dir.path());
        p.params = leafCopies(p.params);
        auto optimizer = train::makeOptimizer(recipe(), p.params);
        runSteps(*optimizer, p);
        for (const auto& [name, t] : p.params) {
            QVERIFY2(torch::equal(t.detach(), fused.at("param." + name)), name.c_str());
            const double fromLoop = (t.detach() - loop.at("param." + name)).abs().max().item<double>();
            QVERIFY2(fromLoop < 1e-6, (name + ": " + std::to_string(fromLoop)).c_str());
        }
        // The state checkpoints save: torch::optim::AdamW's, one step count per parameter.
        QCOMPARE(optimizer->state().size(), p.params.size());
        for (const auto& [key, state] : optimizer->state()) {
            auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get());
            QVERIFY(adamw);
            QCOMPARE(adamw->step(), static_cast<std::int64_t>(kLearningRates.size()));
        }
        QVERIFY(dynamic_cast<torch::optim::AdamW*>(optimizer.get()));
    }

    void otherDtypesStepAsTorchOptimAdamW()
    {
        Problem p = problem(torch::kBFloat16);
        Problem q = p;
        p.params = leafCopies(p.params);
        q.params = leafCopies(q.params);
        auto ours = train::makeOptimizer(recipe(), p.params);
        runSteps(*ours, p);
        const auto o = recipe();
        std::vector<torch::Tensor> decay = {q.params[1].second}, noDecay = {q.params[0].second};
        std::vector<torch::optim::OptimizerParamGroup> groups;
        groups.emplace_back(decay);
        auto options = std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(0));
        groups.emplace_back(noDecay, std::move(options));
        torch::optim::AdamW theirs(
            groups, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay));
        runSteps(theirs, q);
        for (std::size_t i = 0; i < p.params.size(); ++i)
            QVERIFY2(torch::equal(p.params[i].second, q.params[i].second), p.params[i].first.c_str());
    }
};

QTEST_APPLESS_MAIN(TestOptimizer)
#include "tst_optimizer.moc"
