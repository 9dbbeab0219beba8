#pragma once

// What the Configure page shows of the config and the recipe on screen, computed without widgets
// (a test asks it directly): the plan `shardscope launch` would build on this machine, with the
// recipe (its files are left to the recipe editor: no disk on every edit); every problem, with the
// text the page lists; the one-click fix; and the per-rank memory estimate with its summary.

#include "engine/accelerate/accelerate_config.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/recipe.h"
#include "engine/plan/run_plan.h"
#include "engine/accelerate/validation.h"

#include <QString>
#include <QStringList>

#include <optional>
#include <string>
#include <vector>

namespace shardscope::ui {

struct ConfigureInputs {
    config::AccelerateConfig config;
    QString configPath; // empty: not saved
    config::MachineInfo machine;
    int physicalCores = 0;
    std::optional<config::Recipe> recipe; // none while the recipe's text has an error
    std::string recipeSource;
    QString recipeError;
    // A script run: its problems and their texts (ui/script_panel.h) instead of the plan's.
    bool script = false;
    std::vector<config::Diagnostic> scriptProblems;
    QStringList scriptTexts;
    // What the recipe's data files say (config::checkRecipeInputs, read off the GUI thread by the
    // page): a missing text file, one too short for the model's blocks; empty: nothing wrong, or
    // not read yet.
    QString dataProblem;
    // A cluster target (SLURM): the batch script gives each node's launcher its machine rank and
    // the head node's address and port, so the config need not (the CLI plans it so too).
    bool clusterTarget = false;
};

struct ConfigureCheck {
    config::PlanResult plan; // of the engine run, also in script mode (the chart's estimate reads it)
    std::vector<config::Diagnostic> problems; // what the page lists, errors and warnings
    QStringList texts; // each problem as the page shows it
    std::optional<config::ConfigFix> fix; // of the first problem that has one
    std::optional<config::MemoryEstimate> estimate; // none while the recipe or the config cannot be read
    QString memorySummary; // rich text above the chart
    int errors() const;
};

ConfigureCheck checkConfigure(const ConfigureInputs& in);

} // namespace shardscope::ui
