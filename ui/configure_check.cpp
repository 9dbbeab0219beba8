#include "ui/configure_check.h"

#include "ui/diagnostic_model.h"
#include "ui/format.h"

#include <QCoreApplication>
#include <QFileInfo>

#include <algorithm>

namespace shardscope::ui {

namespace {

QString tr(const char* text) { return QCoreApplication::translate("ConfigurePage", text); }

std::string folderOf(const QString& path)
{
    return path.isEmpty() ? std::string() : QFileInfo(path).absolutePath().toStdString();
}

// The planned run's own estimate (the one its ranks report against); while the plan is refused,
// the same reading of the config (interpretParallelism) through the config alone.
void estimateMemory(const ConfigureInputs& in, ConfigureCheck& check)
{
    const auto& plan = check.plan.plan;
    auto setup = plan ? Result<config::MemorySetup>(config::memorySetupOf(*plan))
                      : config::memorySetupFromConfig(in.config, folderOf(in.configPath));
    if (!in.recipe) {
        check.memorySummary = tr("Per-rank memory: no estimate while the recipe has an error.");
        return;
    }
    if (!setup) {
        check.memorySummary = tr("Per-rank memory: %1").arg(qs(setup.error().message));
        return;
    }
    const auto shape = config::modelShapeOf(plan ? plan->recipe : *in.recipe);
    check.estimate = plan ? config::estimateRun(*plan)
                          : config::estimateMemory(shape, setup->precision, setup->sharding, config::optimizerKindOf(*in.recipe),
                                                   setup->fp8);
    QString summary = tr("Per-rank memory of %1 (%2 parameters): %3, %4 — device %5")
                          .arg(qs(in.recipe->name))
                          .arg(shape.parameters)
                          .arg(qs(setup->sharding.label), qs(config::estimatePrecisionLabel(setup->precision)),
                               formatBytes(check.estimate->deviceTotal())); // IEC units, as the chart's axis
    if (check.estimate->hostTotal() > 0)
        summary += tr(", host %1").arg(formatBytes(check.estimate->hostTotal()));
    for (const auto& note : setup->notes)
        summary += QStringLiteral("<br><small>%1</small>").arg(qs(note).toHtmlEscaped());
    check.memorySummary = summary;
}

} // namespace

int ConfigureCheck::errors() const
{
    return static_cast<int>(std::count_if(problems.begin(), problems.end(),
                                          [](const config::Diagnostic& d) { return d.severity == config::Severity::Error; }));
}

ConfigureCheck checkConfigure(const ConfigureInputs& in)
{
    ConfigureCheck check;
    // Checked as `shardscope launch` will check it on this machine: what the launcher would refuse
    // (FSDP without GPUs and without use_cpu, fp8 without an fp8 GPU, fp8 with LoRA, ...) is an
    // error here, instead of a launch that reports success and never starts.
    config::PlanInputs inputs;
    inputs.config = in.config;
    if (in.clusterTarget && inputs.config) // planned as node 0 will plan it, with a stand-in rendezvous (cli/slurm_launch.cpp)
        for (const auto& [key, standIn] : {std::pair{"main_process_ip", config::Value("127.0.0.1")},
                                           {"main_process_port", config::Value(std::int64_t{29500})},
                                           {"machine_rank", config::Value(std::int64_t{0})}})
            inputs.config->setField(key, standIn);
    inputs.configBaseDir = folderOf(in.configPath);
    inputs.machine = in.machine;
    inputs.environment.physicalCores = in.physicalCores;
    inputs.recipe = in.recipe;
    inputs.recipeSource = in.recipeSource;
    inputs.readRecipeFiles = false;
    check.plan = config::buildRunPlan(inputs);
    if (in.script) {
        check.problems = in.scriptProblems;
        check.texts = in.scriptTexts;
    } else {
        check.problems = check.plan.problems;
        for (const auto& d : check.problems)
            check.texts << qs(config::formatDiagnostic(in.config, d));
        if (!in.recipeError.isEmpty()) {
            check.problems.push_back({config::Severity::Error, DiagnosticModel::kRecipeKeyPath, in.recipeError.toStdString()});
            check.texts << tr("recipe: error: %1").arg(in.recipeError);
        } else if (!in.dataProblem.isEmpty()) {
            check.problems.push_back({config::Severity::Error, DiagnosticModel::kRecipeKeyPath, in.dataProblem.toStdString()});
            check.texts << tr("recipe: error: %1").arg(in.dataProblem);
        }
    }
    // The one-click fix of the first problem that has one (a GPU distribution on a CPU machine).
    for (const auto& d : check.problems)
        if (!check.fix)
            check.fix = config::fixFor(d, in.config, in.machine);
    estimateMemory(in, check);
    return check;
}

} // namespace shardscope::ui
