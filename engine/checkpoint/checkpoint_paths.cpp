#include "engine/checkpoint/checkpoint_paths.h"

#include "engine/common/run_layout.h"
#include "engine/recipe/recipe.h"

#include <algorithm>
#include <regex>

namespace shardscope::checkpoint {

namespace fs = std::filesystem;

std::optional<std::int64_t> stepOf(const fs::path& dir)
{
    static const std::regex pattern("step_([0-9]+)");
    std::smatch match;
    const std::string name = dir.filename().string();
    if (std::regex_match(name, match, pattern))
        return std::stoll(match[1]);
    return std::nullopt;
}

bool isComplete(const fs::path& dir) { return stepOf(dir) && fs::exists(dir / "manifest.json"); }

std::vector<fs::path> completeCheckpoints(const fs::path& dir)
{
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.is_directory() && isComplete(entry.path()))
            found.push_back(entry.path());
    std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) { return *stepOf(a) > *stepOf(b); });
    return found;
}

namespace {

// Whether `path`, with every link resolved, lies inside `root` (also resolved).
bool inside(const fs::path& path, const fs::path& root)
{
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (ec)
        return false;
    const fs::path base = fs::canonical(root, ec);
    if (ec)
        return false;
    auto [rootEnd, unused] = std::mismatch(base.begin(), base.end(), real.begin(), real.end());
    return rootEnd == base.end();
}

} // namespace

Result<std::string> resolveCheckpoint(const std::string& reference, const std::string& runsDir, const std::string& recipeName)
{
    if (reference == "latest") {
        std::optional<fs::path> best;
        std::error_code ec;
        for (const auto& run : fs::directory_iterator(runsDir, ec)) {
            // A run folder that is a link (or a checkpoint folder linked elsewhere) leads out of
            // the runs folder: `latest` means a run of this history, never a file elsewhere.
            if (run.is_symlink() || !inside(run.path(), runsDir))
                continue;
            const RunLayout layout(run.path());
            auto recipe = config::loadRecipe(layout.recipeFile().string());
            if (!recipe || recipe->name != recipeName)
                continue;
            auto found = completeCheckpoints(layout.checkpointsDir());
            std::erase_if(found, [&](const fs::path& p) { return !inside(p, runsDir); });
            if (found.empty())
                continue;
            const auto candidate = found.front();
            if (!best || fs::last_write_time(candidate, ec) > fs::last_write_time(*best, ec))
                best = candidate;
        }
        if (!best)
            return makeError("--resume_from_checkpoint latest: no complete checkpoint of a run of recipe '" + recipeName
                             + "' under " + runsDir + "; give a step_<N> folder instead, or start without resuming");
        return best->string();
    }
    const fs::path path(reference);
    if (!fs::exists(path))
        return makeError("--resume_from_checkpoint: " + reference
                         + " does not exist; give a step_<N> folder, a run's "
                           "folder, or latest");
    if (stepOf(path)) {
        if (!isComplete(path))
            return makeError("checkpoint " + reference + " is incomplete (no manifest.json: its writing was interrupted)");
        return path.string();
    }
    for (const auto& dir : {path, RunLayout(path).checkpointsDir()}) {
        auto found = completeCheckpoints(dir);
        if (!found.empty())
            return found.front().string();
    }
    return makeError("no complete checkpoint (step_<N>/ with a manifest.json) in " + reference);
}

} // namespace shardscope::checkpoint
