#include "app/runs/tune_trials.h"

#include "app/launcher/program.h"
#include "engine/common/run_layout.h"
#include "engine/recipe/recipe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace shardscope::runs {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The launcher's first error line, else its first line: why a trial did not complete.
std::string launcherWordsOf(const std::string& output)
{
    std::string why, line;
    std::istringstream lines(output);
    while (std::getline(lines, line))
        if (!line.empty() && (why.empty() || (line.find("error") != std::string::npos && why.find("error") == std::string::npos)))
            why = line;
    return why;
}

} // namespace

LaunchTrialRunner::LaunchTrialRunner(std::string program, std::string runsDir, bool gpu)
    : m_program(std::move(program)), m_runsDir(std::move(runsDir)), m_gpu(gpu)
{
}

TrialResult LaunchTrialRunner::run(const Trial& trial)
{
    const fs::path folder = fs::path(m_runsDir) / (trial.tag + "-files");
    std::error_code ec;
    fs::create_directories(folder, ec);
    const fs::path config = folder / (trial.runName + "-accelerate.yaml");
    std::ofstream(config) << config::toYamlText(trial.candidate.config);
    const fs::path recipe = folder / (trial.runName + ".yaml");
    std::ofstream(recipe) << config::recipeToYaml(trial.recipe);
    auto result = runProgram(m_program,
                             {"launch", "--config_file", config.string(), "--recipe", recipe.string(), "--runs_dir", m_runsDir,
                              "--run_name", trial.runName, "--tag", trial.tag},
                             std::chrono::milliseconds(static_cast<std::int64_t>(trial.secondsLeft * 1000)),
                             std::chrono::seconds(5)); // then a stop, which the launcher records as cancelled
    if (result && result->timedOut) {
        TrialResult cut;
        cut.timedOut = true;
        return cut;
    }
    TrialResult measured = readTrialRun(fs::path(m_runsDir) / trial.runName, trial.candidate.choice.layout, m_gpu);
    if (measured.outcome != "completed")
        measured.launcherWords = launcherWordsOf(result ? result->output : result.error().message);
    return measured;
}

TrialResult readTrialRun(const fs::path& runDir, config::DataParallelLayout layout, bool gpu)
{
    const RunLayout files(runDir);
    TrialResult r;
    std::ifstream outcome(files.outcomeFile());
    const json o = json::parse(outcome, nullptr, false);
    r.outcome = o.is_object() ? o.value("status", std::string("unknown")) : std::string("no outcome");
    if (o.is_object() && !o.value("error", std::string()).empty())
        r.outcome += ": " + o.value("error", std::string());
    std::ifstream events(files.eventsFile());
    std::vector<double> speeds;
    TrialMeasure& m = r.measured;
    for (std::string line; std::getline(events, line);) {
        const json e = json::parse(line, nullptr, false);
        if (!e.is_object() || e.value("type", "") != "step")
            continue;
        const json& mem = e.value("mem", json::object());
        const double peak = gpu ? mem.value("peak_allocated", 0.0)
                                : mem.value("peak_params", 0.0) + mem.value("peak_grads", 0.0) + mem.value("optimizer", 0.0);
        m.peak = std::max(m.peak, peak);
        // SHARD_GRAD_OP's estimate books the full parameters it holds from forward to backward as
        // parameters (docs/MEMORY_ESTIMATE.md): its field is the peak's.
        m.params = std::max(m.params,
                            mem.value(layout == config::DataParallelLayout::FsdpShardGradOp ? "peak_params" : "params", 0.0));
        m.grads = std::max(m.grads, mem.value("grads", 0.0));
        m.optimizer = std::max(m.optimizer, mem.value("optimizer", 0.0));
        if (e.value("rank", -1) == 0 && e.value("step", 0) > 2)
            speeds.push_back(e.value("tokens_per_s", 0.0));
    }
    double sum = 0;
    for (double s : speeds)
        sum += s;
    m.tokensPerS = speeds.empty() ? 0 : sum / static_cast<double>(speeds.size());
    return r;
}

std::optional<double> smallestGpuMemory()
{
    const auto smi = findOnPath("nvidia-smi");
    if (!smi)
        return std::nullopt;
    auto result = runProgram(*smi, {"--query-gpu=memory.total", "--format=csv,noheader,nounits"}, std::chrono::seconds(20));
    if (!result || result->status != 0)
        return std::nullopt;
    std::optional<double> smallest;
    std::istringstream lines(result->output);
    for (std::string line; std::getline(lines, line);) {
        char* end = nullptr;
        const double mebibytes = std::strtod(line.c_str(), &end);
        if (end != line.c_str() && mebibytes > 0)
            smallest = std::min(smallest.value_or(mebibytes * 1048576.0), mebibytes * 1048576.0);
    }
    return smallest;
}

} // namespace shardscope::runs
