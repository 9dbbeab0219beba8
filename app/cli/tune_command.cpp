// `shardscope tune`: the fastest setup of a recipe that fits a memory budget per rank. Candidates
// are the data-parallel layouts (DDP, FSDP FULL_SHARD / SHARD_GRAD_OP, ZeRO 1-3), activation
// checkpointing and offload where the layout has them, and micro-batch sizes with gradient
// accumulation keeping the recipe's batch per rank and step. The memory estimate rules out what
// cannot fit (times the largest measured / estimated ratio of the trials so far); the rest run as
// short trials, one at a time, each a run in the history tagged with the session, and the slower
// half is dropped after each round (successive halving) until one is left or the time budget is
// spent. The winner's Accelerate config and recipe are written as new files.

#include "app/cli/commands.h"
#include "app/launcher/program.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/plan/machine_probe.h"
#include "engine/recipe/recipe.h"
#include "storage/store_paths.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace shardscope::cli {

namespace {

using namespace shardscope::config;
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct TuneArgs {
    std::string recipe;
    int numProcesses = 2;
    std::string memoryBudget; // "300MB", bytes; empty: the GPU's memory
    double timeBudget = 600; // seconds for all trials
    int trialSteps = 6; // the first round's steps per trial (2 of them warm-up)
    std::string runsDir;
    std::string outDir; // where the chosen files go (default: the recipe's folder)
    std::string mixedPrecision = "no";
    std::vector<std::string> layouts; // empty: all
    bool json = false;
};

// One setup to try.
struct Candidate {
    std::string layout; // "DDP", "FSDP FULL_SHARD", "ZeRO-2", ...
    std::int64_t microBatch = 1;
    std::int64_t accumulation = 1;
    bool checkpointing = false;
    bool offload = false;
    std::string config; // the Accelerate config's text
    double estimate = 0; // bytes per rank the budget is held to
    MemoryEstimate fields; // the estimate's parts
    std::string dropped; // why it was not run (or stopped), empty while in the race
    // Measured, the latest round's.
    int rounds = 0;
    int steps = 0; // of its latest trial
    double tokensPerS = 0;
    double peak = 0; // bytes per rank, as `estimate` counts them
    // The step events' largest kept model states of a rank (mem.params, mem.grads, mem.optimizer):
    // what the estimate's fields are held to.
    double params = 0, grads = 0, optimizer = 0;
    std::string run; // its run's name
    std::string outcome; // the run's status ("completed", "failed: ...")

    std::string label() const
    {
        std::string text = layout + ", micro-batch " + std::to_string(microBatch) + " x " + std::to_string(accumulation);
        if (checkpointing)
            text += ", activation checkpointing";
        if (offload)
            text += ", offload";
        return text;
    }
};

std::optional<double> parseBytes(const std::string& text)
{
    double value = 0;
    char unit[8] = {0};
    if (std::sscanf(text.c_str(), "%lf%7s", &value, unit) < 1 || !std::isfinite(value) || value <= 0)
        return std::nullopt;
    std::string u(unit);
    std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    const std::map<std::string, double> units{{"", 1},
                                              {"B", 1},
                                              {"KB", 1024},
                                              {"KIB", 1024},
                                              {"MB", 1 << 20},
                                              {"MIB", 1 << 20},
                                              {"GB", 1024.0 * (1 << 20)},
                                              {"GIB", 1024.0 * (1 << 20)}};
    const auto it = units.find(u);
    if (it == units.end())
        return std::nullopt;
    return value * it->second;
}

// The smallest GPU's memory in bytes, as nvidia-smi reports it: the default budget on a GPU machine.
std::optional<double> deviceMemory(bool gpu)
{
    const auto smi = findOnPath("nvidia-smi");
    if (!gpu || !smi)
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

// The Accelerate config of a candidate on this machine (the CPU engine where there is no GPU).
std::string configText(const Candidate& c, int processes, bool gpu, const std::string& precision)
{
    std::ostringstream out;
    out << "compute_environment: LOCAL_MACHINE\nnum_processes: " << processes << "\nmixed_precision: '" << precision << "'\n";
    if (!gpu)
        out << "use_cpu: true\n";
    if (c.layout == "DDP") {
        out << "distributed_type: " << (gpu ? "MULTI_GPU" : "MULTI_CPU") << "\n";
    } else if (c.layout.rfind("FSDP", 0) == 0) {
        out << "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
            << "  fsdp_reshard_after_forward: " << (c.layout == "FSDP FULL_SHARD" ? "true" : "false") << "\n"
            << "  fsdp_activation_checkpointing: " << (c.checkpointing ? "true" : "false") << "\n"
            << "  fsdp_offload_params: " << (c.offload ? "true" : "false") << "\n"
            << "  fsdp_state_dict_type: FULL_STATE_DICT\n";
    } else { // ZeRO-N
        out << "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: " << c.layout.back() << "\n"
            << "  offload_optimizer_device: " << (c.offload ? "cpu" : "none") << "\n  offload_param_device: none\n";
    }
    return out.str();
}

// "FULL_SHARD" or "FSDP FULL_SHARD" for the layout "FSDP FULL_SHARD"; "zero-3" for "ZeRO-3".
bool namesLayout(const std::string& given, const std::string& layout)
{
    auto upper = [](std::string t) {
        std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
        return t;
    };
    const std::string g = upper(given), l = upper(layout);
    return g == l
           || (l.size() > g.size() && l.compare(l.size() - g.size(), g.size(), g) == 0 && l[l.size() - g.size() - 1] == ' ');
}

// Every candidate of the recipe, with its estimate (model states on the CPU, where the engine
// measures those and host and device memory are one; the device's whole use on a GPU).
Result<std::vector<Candidate>> candidatesOf(const Recipe& recipe, const TuneArgs& a, bool gpu)
{
    const std::int64_t perRank = recipe.perDeviceBatchSize * recipe.gradientAccumulationSteps;
    std::vector<std::int64_t> microBatches;
    for (std::int64_t b = perRank; b >= 1 && microBatches.size() < 3; b /= 2)
        if (perRank % b == 0)
            microBatches.push_back(b);
    struct Layout {
        const char* name;
        bool checkpointing, offload;
    };
    const std::vector<Layout> layouts{
        {"DDP", false, false},    {"FSDP FULL_SHARD", true, true}, {"FSDP SHARD_GRAD_OP", true, true},
        {"ZeRO-1", false, false}, {"ZeRO-2", false, true},         {"ZeRO-3", false, true}};
    for (const std::string& given : a.layouts)
        if (std::none_of(layouts.begin(), layouts.end(), [&](const Layout& l) { return namesLayout(given, l.name); }))
            return makeError("--layouts: '" + given
                             + "' is not a layout; choose among DDP, FULL_SHARD, SHARD_GRAD_OP, ZeRO-1, ZeRO-2, ZeRO-3");
    std::vector<Candidate> out;
    for (const Layout& layout : layouts)
        for (bool checkpointing : {false, true})
            for (bool offload : {false, true}) {
                // On the CPU the host is the device: offloading moves nothing out of the budget.
                if ((checkpointing && !layout.checkpointing) || (offload && (!layout.offload || !gpu)))
                    continue;
                if (!a.layouts.empty() && std::none_of(a.layouts.begin(), a.layouts.end(), [&](const std::string& given) {
                        return namesLayout(given, layout.name);
                    }))
                    continue;
                for (std::int64_t b : microBatches) {
                    Candidate c;
                    c.layout = layout.name;
                    c.microBatch = b;
                    c.accumulation = perRank / b;
                    c.checkpointing = checkpointing;
                    c.offload = offload;
                    c.config = configText(c, a.numProcesses, gpu, a.mixedPrecision);
                    auto parsed = parseAccelerateConfig(c.config, "tune", FileFormat::Yaml);
                    if (!parsed)
                        return parsed.error();
                    auto setup = memorySetupFromConfig(*parsed);
                    if (!setup)
                        return setup.error();
                    Recipe variant = recipe;
                    variant.perDeviceBatchSize = b;
                    const MemoryEstimate e = estimateMemory(modelShapeOf(variant), setup->precision, setup->sharding,
                                                            optimizerKindOf(recipe));
                    c.estimate = gpu ? e.deviceTotal() : e.modelStates() + e.hostTotal();
                    c.fields = e;
                    out.push_back(std::move(c));
                }
            }
    return out;
}

// What a finished trial measured: tokens/s of all ranks over its steps after the first two, and
// the largest per-rank memory of any rank and step (model states on the CPU, the allocator's
// peak on a GPU).
void measure(Candidate& c, const fs::path& runDir, bool gpu)
{
    std::ifstream outcome(runDir / "outcome.json");
    const json o = json::parse(outcome, nullptr, false);
    c.outcome = o.is_object() ? o.value("status", std::string("unknown")) : std::string("no outcome");
    if (o.is_object() && !o.value("error", std::string()).empty())
        c.outcome += ": " + o.value("error", std::string());
    std::ifstream events(runDir / "events.jsonl");
    std::vector<double> speeds;
    c.peak = c.params = c.grads = c.optimizer = 0;
    for (std::string line; std::getline(events, line);) {
        const json e = json::parse(line, nullptr, false);
        if (!e.is_object() || e.value("type", "") != "step")
            continue;
        const json& m = e.value("mem", json::object());
        const double peak = gpu ? m.value("peak_allocated", 0.0)
                                : m.value("peak_params", 0.0) + m.value("peak_grads", 0.0) + m.value("optimizer", 0.0);
        c.peak = std::max(c.peak, peak);
        // SHARD_GRAD_OP's estimate books the full parameters it holds from forward to backward as
        // parameters (docs/MEMORY_ESTIMATE.md): its field is the peak's.
        c.params = std::max(c.params, m.value(c.layout == "FSDP SHARD_GRAD_OP" ? "peak_params" : "params", 0.0));
        c.grads = std::max(c.grads, m.value("grads", 0.0));
        c.optimizer = std::max(c.optimizer, m.value("optimizer", 0.0));
        if (e.value("rank", -1) == 0 && e.value("step", 0) > 2)
            speeds.push_back(e.value("tokens_per_s", 0.0));
    }
    c.tokensPerS = speeds.empty() ? 0 : [&] {
        double sum = 0;
        for (double s : speeds)
            sum += s;
        return sum / static_cast<double>(speeds.size());
    }();
}

std::string bytes(double b) { return formatBytes(b); }

// A new file beside `wanted` when it exists (name-2.yaml, name-3.yaml, ...): nothing of the
// user's is overwritten.
fs::path freshPath(const fs::path& wanted)
{
    fs::path path = wanted;
    for (int n = 2; fs::exists(path); ++n)
        path = wanted.parent_path() / (wanted.stem().string() + "-" + std::to_string(n) + wanted.extension().string());
    return path;
}

struct Session {
    TuneArgs args;
    std::string programPath;
    std::string id; // the tag and the trials' name prefix
    bool gpu = false;
    double budget = 0;
    Clock::time_point start = Clock::now();
    // Per layout, the largest measured / estimated ratio of its trials so far: what the estimate
    // misses (FSDP's gathered units, a ZeRO stage's buffers) differs between layouts.
    std::map<std::string, double> margins;
    double marginOf(const std::string& layout) const
    {
        const auto it = margins.find(layout);
        return it == margins.end() ? 1.0 : std::max(1.0, it->second);
    }
    int trials = 0;
    bool outOfTime = false;
    double secondsPerStep = 0; // the last completed trial's, launch included

    double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

// Runs one trial to its end (a run in the history); false when the time budget ran out first.
bool runTrial(Session& s, Candidate& c, const fs::path& recipeFile, int steps)
{
    const double left = s.args.timeBudget - s.elapsed();
    // A trial the time left cannot hold is not started (as long as the last one took per step).
    if (left <= 1 || (c.rounds > 0 && s.secondsPerStep * steps > left)) {
        s.outOfTime = true;
        return false;
    }
    const fs::path folder = fs::path(s.args.runsDir) / (s.id + "-files");
    fs::create_directories(folder);
    c.run = s.id + "-" + std::to_string(++s.trials);
    const fs::path config = folder / (c.run + "-accelerate.yaml");
    std::ofstream(config) << c.config;
    auto recipe = loadRecipe(recipeFile.string());
    Recipe variant = *recipe;
    variant.perDeviceBatchSize = c.microBatch;
    variant.gradientAccumulationSteps = c.accumulation;
    variant.maxSteps = steps;
    // A trial measures speed and memory: a warm-up longer than it is shortened, nothing is exported.
    variant.schedule.warmupSteps = std::min<std::int64_t>(variant.schedule.warmupSteps, steps - 1);
    variant.exportModel.enabled = false;
    const fs::path recipePath = folder / (c.run + ".yaml");
    std::ofstream(recipePath) << recipeToYaml(variant);
    const auto trialStart = Clock::now();
    auto result = runProgram(s.programPath,
                             {"launch", "--config_file", config.string(), "--recipe", recipePath.string(), "--runs_dir",
                              s.args.runsDir, "--run_name", c.run, "--tag", s.id},
                             std::chrono::milliseconds(static_cast<std::int64_t>(left * 1000)),
                             std::chrono::seconds(5)); // then a stop, which the launcher records as cancelled
    if (result && result->timedOut) {
        s.outOfTime = true;
        // What an earlier round measured stands; a first trial cut short measured nothing.
        if (c.rounds == 0)
            c.dropped = "stopped: the time budget ran out during its trial";
        return false;
    }
    Candidate measured = c;
    measure(measured, fs::path(s.args.runsDir) / c.run, s.gpu);
    if (measured.outcome != "completed" && c.rounds > 0) {
        // A longer trial of a setup an earlier round measured failed: it is out of the race, and
        // says why beside the numbers it had.
        c.outcome = measured.outcome;
        c.dropped = "its round " + std::to_string(c.rounds + 1) + " trial did not complete (" + measured.outcome + ")";
        return true;
    }
    c = measured;
    ++c.rounds;
    c.steps = steps;
    s.secondsPerStep = std::chrono::duration<double>(Clock::now() - trialStart).count() / steps;
    if (c.outcome != "completed") {
        // A trial that fails (out of memory, say) is a result: the launcher's last word says why.
        std::string why = result ? result->output : result.error().message, line;
        std::istringstream lines(why);
        for (why.clear(); std::getline(lines, line);)
            if (!line.empty()
                && (why.empty() || (line.find("error") != std::string::npos && why.find("error") == std::string::npos)))
                why = line; // the first error, else the first line
        c.dropped = "its trial did not complete (" + c.outcome + (why.empty() ? "" : "; " + why) + ")";
        return true;
    }
    if (c.estimate > 0)
        s.margins[c.layout] = std::max(s.margins[c.layout], c.peak / c.estimate);
    if (c.peak > s.budget)
        c.dropped = "measured " + bytes(c.peak) + " per rank, over the budget " + bytes(s.budget);
    return true;
}

// Drops what the estimate times the margin its layout's trials taught says cannot fit.
void prune(Session& s, std::vector<Candidate>& all)
{
    for (Candidate& c : all) {
        const double margin = s.marginOf(c.layout);
        if (!c.dropped.empty() || c.rounds > 0 || c.estimate * margin <= s.budget)
            continue;
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2f", margin);
        c.dropped = "estimate " + bytes(c.estimate)
                    + (margin > 1.0 ? std::string(" x ") + ratio + " (what its layout's trials measured over their estimate)"
                                    : "")
                    + " exceeds the budget " + bytes(s.budget);
    }
}

void printTable(const std::vector<Candidate>& all, const Candidate* best)
{
    std::vector<std::vector<std::string>> rows;
    for (const Candidate& c : all) {
        char speed[32];
        std::snprintf(speed, sizeof speed, "%.0f", c.tokensPerS);
        rows.push_back({(&c == best ? "* " : "") + c.label(), bytes(c.estimate), c.rounds ? bytes(c.peak) : "-",
                        c.rounds ? speed : "-", c.rounds ? c.run : "-",
                        &c == best          ? "best"
                        : c.dropped.empty() ? "in the race"
                                            : c.dropped});
    }
    std::cout << renderTable("shardscope tune", {"setup", "estimate", "measured", "tokens/s", "run", "result"}, rows);
}

json toJson(const Session& s, const std::vector<Candidate>& all, const Candidate* best, const std::string& configOut,
            const std::string& recipeOut)
{
    json trials = json::array();
    for (const Candidate& c : all)
        trials.push_back({{"setup", c.label()},
                          {"layout", c.layout},
                          {"micro_batch", c.microBatch},
                          {"accumulation", c.accumulation},
                          {"activation_checkpointing", c.checkpointing},
                          {"offload", c.offload},
                          {"estimate_bytes", c.estimate},
                          {"measured_bytes", c.rounds ? json(c.peak) : json(nullptr)},
                          {"tokens_per_s", c.rounds ? json(c.tokensPerS) : json(nullptr)},
                          {"estimate_fields",
                           {{"params", c.fields.parameters + c.fields.hostParameters},
                            {"grads", c.fields.gradients + c.fields.hostGradients},
                            {"optimizer", c.fields.optimizer + c.fields.hostOptimizer}}},
                          {"measured_fields",
                           c.rounds ? json{{"params", c.params}, {"grads", c.grads}, {"optimizer", c.optimizer}} : json(nullptr)},
                          {"rounds", c.rounds},
                          {"steps", c.steps},
                          {"run", c.run},
                          {"dropped", c.dropped}});
    return {{"session", s.id},
            {"budget_bytes", s.budget},
            {"trials_run", s.trials},
            {"seconds", s.elapsed()},
            {"out_of_time", s.outOfTime},
            {"best", best ? json(best->label()) : json(nullptr)},
            {"best_run", best ? json(best->run) : json(nullptr)},
            {"best_steps", best ? json(best->steps) : json(nullptr)},
            {"config", configOut},
            {"recipe", recipeOut},
            {"candidates", trials}};
}

// Writes the winner as new files: its Accelerate config, and the recipe with its micro-batch and
// accumulation (the user's text kept, only those two values changed).
Result<std::pair<std::string, std::string>> writeChoice(const Session& s, const Candidate& best)
{
    const fs::path recipe = fs::absolute(s.args.recipe);
    const fs::path folder = s.args.outDir.empty() ? recipe.parent_path() : fs::absolute(s.args.outDir);
    Result<std::string> edited = makeError("unread");
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (fs::equivalent(folder, fs::absolute(recipe).parent_path(), ec)) {
        // Beside the user's: their text, comments and relative paths kept, two values changed.
        std::ifstream in(recipe);
        std::stringstream text;
        text << in.rdbuf();
        edited = withRecipeValue(text.str(), "training.per_device_batch_size", std::to_string(best.microBatch));
        if (edited)
            edited = withRecipeValue(*edited, "training.gradient_accumulation_steps", std::to_string(best.accumulation));
    } else {
        // Elsewhere, relative paths would point nowhere: the recipe as read, its paths absolute.
        auto read = loadRecipe(recipe.string());
        if (!read)
            return read.error();
        read->perDeviceBatchSize = best.microBatch;
        read->gradientAccumulationSteps = best.accumulation;
        edited = "# " + recipe.filename().string()
                 + " with the micro-batch and accumulation shardscope tune chose, its "
                   "paths made absolute\n"
                 + recipeToYaml(*read);
    }
    if (!edited)
        return edited.error();
    const fs::path configPath = freshPath(folder / (recipe.stem().string() + ".tuned-accelerate.yaml"));
    const fs::path recipePath = freshPath(folder / (recipe.stem().string() + ".tuned.yaml"));
    std::ofstream(configPath) << "# shardscope tune " << s.id << ": " << best.label() << "\n" << best.config;
    std::ofstream(recipePath) << *edited;
    if (!fs::exists(configPath) || !fs::exists(recipePath))
        return makeError("cannot write the chosen setup into " + folder.string());
    return std::pair{configPath.string(), recipePath.string()};
}

// The race: every candidate left runs a round; the faster half goes on with twice the steps.
void race(Session& s, std::vector<Candidate>& all)
{
    int steps = s.args.trialSteps;
    for (int round = 0; !s.outOfTime; ++round, steps *= 2) {
        const auto alive = std::count_if(all.begin(), all.end(), [](const Candidate& c) { return c.dropped.empty(); });
        if (round > 0 && alive <= 1)
            return; // one left: it won
        std::vector<Candidate*> running;
        // Cheapest estimates first: what they measure teaches the margin before the larger ones run.
        std::vector<Candidate*> order;
        for (Candidate& c : all)
            if (c.dropped.empty())
                order.push_back(&c);
        std::stable_sort(order.begin(), order.end(),
                         [](const Candidate* a, const Candidate* b) { return a->estimate < b->estimate; });
        for (Candidate* c : order) {
            if (!c->dropped.empty())
                continue; // pruned by what an earlier trial of this round taught
            if (!runTrial(s, *c, s.args.recipe, steps))
                break;
            prune(s, all);
            if (c->dropped.empty())
                running.push_back(c);
        }
        if (s.outOfTime || running.size() <= 1)
            return;
        std::sort(running.begin(), running.end(),
                  [](const Candidate* a, const Candidate* b) { return a->tokensPerS > b->tokensPerS; });
        for (std::size_t i = (running.size() + 1) / 2; i < running.size(); ++i)
            running[i]->dropped = "slower than half of round " + std::to_string(round + 1) + "'s trials";
    }
}

int tune(const TuneArgs& args, const std::string& programPath)
{
    Session s;
    s.args = args;
    s.programPath = thisExecutable(programPath).string();
    s.gpu = probeMachine().gpuCount > 0;
    auto budget = args.memoryBudget.empty() ? deviceMemory(s.gpu) : parseBytes(args.memoryBudget);
    if (!budget) {
        std::cerr << "shardscope tune: "
                  << (args.memoryBudget.empty()
                          ? std::string(s.gpu ? "nvidia-smi did not say how much memory this machine's GPUs have"
                                              : "this machine has no GPU whose memory would be the budget")
                                + "; give --memory_budget (bytes per rank, e.g. 300MB)"
                          : "--memory_budget '" + args.memoryBudget
                                + "' is not a size; write e.g. 300MB, 40GB or a number of bytes")
                  << "\n";
        return 2;
    }
    s.budget = *budget;
    auto recipe = loadRecipe(args.recipe);
    if (!recipe) {
        std::cerr << "shardscope tune: " << recipe.error().message << "\n";
        return 2;
    }
    auto candidates = candidatesOf(*recipe, args, s.gpu);
    if (!candidates) {
        std::cerr << "shardscope tune: " << candidates.error().message << "\n";
        return 2;
    }
    std::vector<Candidate>& all = *candidates;
    prune(s, all);
    if (std::none_of(all.begin(), all.end(), [](const Candidate& c) { return c.dropped.empty(); })) {
        const auto smallest = std::min_element(all.begin(), all.end(),
                                               [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
        std::cerr << "shardscope tune: the budget " << bytes(s.budget) << " per rank is below every candidate's estimate; the "
                  << "smallest is " << bytes(smallest->estimate) << " (" << smallest->label() << "). A budget of at least "
                  << bytes(smallest->estimate) << " would fit it; more processes shard the states further\n";
        return 2;
    }
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    s.id = "tune-" + fs::path(args.recipe).stem().string() + "-" + stamp;
    if (s.args.runsDir.empty()) { // where `shardscope launch` puts runs by default, beside the history
        auto home = storage::shardscopeHome();
        if (!home) {
            std::cerr << "shardscope tune: " << home.error().message << "\n";
            return 2;
        }
        s.args.runsDir = storage::runsFolder(*home).string();
    }
    race(s, all);

    const Candidate* best = nullptr;
    for (const Candidate& c : all)
        if (c.rounds > 0 && c.dropped.empty()
            && (!best || c.rounds > best->rounds || (c.rounds == best->rounds && c.tokensPerS > best->tokensPerS)))
            best = &c;
    std::string configOut, recipeOut;
    if (best) {
        auto written = writeChoice(s, *best);
        if (!written) {
            std::cerr << "shardscope tune: " << written.error().message << "\n";
            return 1;
        }
        std::tie(configOut, recipeOut) = *written;
    }
    if (args.json) {
        std::cout << toJson(s, all, best, configOut, recipeOut).dump(1) << "\n";
    } else {
        printTable(all, best);
        std::printf("%d trials in %.0f s%s (tag %s)\n", s.trials, s.elapsed(), s.outOfTime ? ", stopped by the time budget" : "",
                    s.id.c_str());
        if (best)
            std::cout << "best: " << best->label() << "\nwrote " << configOut << " and " << recipeOut << "\n\n" << best->config;
    }
    if (!best) {
        std::cerr << "shardscope tune: no trial finished within the budget of " << args.timeBudget << " s; raise --time_budget\n";
        return 1;
    }
    return 0;
}

} // namespace

void addTuneCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<TuneArgs>();
    auto* cmd = app.add_subcommand("tune", "Find the fastest sharding, micro-batch, checkpointing and offload that fit a "
                                           "memory budget per rank (short trials, one at a time)");
    cmd->add_option("--recipe", args->recipe, "Recipe YAML to tune")->required()->check(CLI::ExistingFile);
    cmd->add_option("--num_processes", args->numProcesses, "Ranks of every trial")
        ->transform(numberIn({1, true, 1024, true}))
        ->capture_default_str();
    cmd->add_option("--memory_budget", args->memoryBudget,
                    "Bytes per rank a setup may use (e.g. 300MB, 40GB): model states on CPU ranks, the device's peak on GPUs "
                    "(default there: the smallest GPU's memory)");
    cmd->add_option("--time_budget", args->timeBudget, "Seconds for all trials together")
        ->transform(numberIn({1, true, 7 * 24 * 3600.0, false, " seconds"}))
        ->capture_default_str();
    cmd->add_option("--trial_steps", args->trialSteps, "Steps of each first-round trial (the first 2 are warm-up)")
        ->transform(numberIn({3, true, 100000, true}))
        ->capture_default_str();
    cmd->add_option("--mixed_precision", args->mixedPrecision, "The precision every trial keeps (no, bf16, ...)")
        ->capture_default_str();
    cmd->add_option("--runs_dir", args->runsDir, "Where the trials' runs go (default: $SHARDSCOPE_HOME/runs)");
    cmd->add_option("--out", args->outDir, "Folder for the chosen config and recipe (default: the recipe's; never overwritten)");
    cmd->add_option("--layouts", args->layouts,
                    "Only these layouts (comma-separated): DDP, FSDP FULL_SHARD, FSDP SHARD_GRAD_OP, ZeRO-1, ZeRO-2, ZeRO-3")
        ->delimiter(',');
    cmd->add_flag("--json", args->json, "Print the result as JSON");
    cmd->callback([args, &context] { context.exitCode = tune(*args, context.programPath); });
}

} // namespace shardscope::cli
