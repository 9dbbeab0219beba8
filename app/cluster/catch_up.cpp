#include "app/cluster/catch_up.h"

#include "app/cluster/adoption.h"
#include "app/cluster/slurm.h"
#include "app/cluster/submission.h"
#include "app/launcher/program.h"
#include "app/launcher/spawn.h"
#include "app/runs/run_import.h"
#include "engine/common/run_layout.h"
#include "engine/common/wall_clock.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <set>
#include <sstream>

namespace shardscope::cluster {

namespace {

namespace fs = std::filesystem;

// A follower of its own for `reference`, in the background: its own session (a closed terminal or
// workbench does not end it), its output appended to `log`. Its pid.
Result<pid_t> startFollower(const std::string& programPath, const std::string& reference, const fs::path& profilesFile,
                            const fs::path& log)
{
    std::error_code ec;
    fs::create_directories(log.parent_path(), ec);
    const std::string program = thisExecutable(programPath).string();
    auto follower = spawnDetached(program, {program, "runs", "follow", reference, "--cluster_profiles", profilesFile.string()},
                                  log.string());
    if (!follower)
        return makeError("cannot start a follower of " + reference + ": " + follower.error().message);
    return *follower;
}

// `runs follow --all` catches up with the user's runs submitted within this window, starting at
// most this many followers at a time (each asks SLURM every few seconds).
constexpr std::chrono::seconds kCatchUpWindow{7 * 24 * 3600};
constexpr int kMostFollowers = 16;

enum class CatchUp { Follow, Skip, OtherUsers, Old };

// What `--all` does with a folder of a shared folder's runs/: follow it (`reference`: this
// history's run id, or the folder), or not: no cluster run, ended or followed, another user's, or
// submitted before the catch-up window.
CatchUp judgeForCatchUp(storage::RunStore& store, const fs::path& home, const fs::path& runDir, std::string& reference)
{
    std::error_code ec;
    if (!fs::exists(RunLayout(runDir).jobIdFile(), ec))
        return CatchUp::Skip;
    if (auto owner = runOwningFolder(store, home, runDir)) {
        auto details = store.run(owner->first);
        if (!details || storage::isTerminal(details->summary.status)
            || storage::checkLiveness(details->launcher) != storage::Liveness::Gone)
            return CatchUp::Skip; // ended, or followed (here, or by a machine this one cannot ask)
        reference = std::to_string(owner->first);
        return CatchUp::Follow;
    }
    if (!ownedByThisUser(runDir))
        return CatchUp::OtherUsers;
    auto submission = cluster::readSubmission(runDir);
    if (!submission) {
        std::cerr << "shardscope runs follow: warning: " << submission.error().message << "\n";
        return CatchUp::Skip;
    }
    if (submission->submittedAt < unixSeconds() - static_cast<double>(kCatchUpWindow.count()))
        return CatchUp::Old; // long ended, most likely: `runs follow DIR` (or `runs import`) takes one
    reference = runDir.string();
    return CatchUp::Follow;
}

} // namespace

int catchUpClusterRuns(const fs::path& profilesFileGiven, const std::string& programPath, bool json)
{
    const char* who = "shardscope runs follow";
    std::ostringstream said; // what it says, as lines (--json: the document's "said")
    nlohmann::json followers = nlohmann::json::array();
    const auto answer = [&] {
        if (json)
            std::cout << nlohmann::json{{"started", followers}, {"said", said.str()}}.dump() << "\n";
        else
            std::cout << said.str();
        return 0;
    };
    const fs::path profilesFile = cluster::profilesFile(profilesFileGiven);
    std::error_code ec;
    if (!fs::exists(profilesFile, ec)) {
        said << who << ": no cluster profiles (" << profilesFile.string() << "): no cluster run to follow\n";
        return answer();
    }
    auto profiles = cluster::loadProfiles(profilesFile);
    auto home = storage::shardscopeHome();
    storage::StoreOptions options;
    options.markInterrupted = false;
    auto store = home && profiles ? storage::RunStore::open(storage::historyFile(*home), options)
                                  : Result<storage::RunStore>(home ? profiles.error() : home.error());
    if (!store) {
        std::cerr << who << ": " << store.error().message << "\n";
        return 1;
    }
    std::set<fs::path> folders;
    for (const auto& [name, profile] : *profiles)
        if (!profile.sharedFolder.empty())
            folders.insert(fs::weakly_canonical(fs::path(profile.sharedFolder) / "runs", ec));
    int started = 0, othersLeft = 0, oldLeft = 0, overCap = 0;
    for (const auto& folder : folders) {
        for (fs::directory_iterator it(folder, ec), last; !ec && it != last; it.increment(ec)) {
            const fs::path runDir = it->path();
            std::string reference;
            switch (judgeForCatchUp(*store, *home, runDir, reference)) {
            case CatchUp::Skip:
                continue;
            case CatchUp::OtherUsers:
                ++othersLeft;
                continue;
            case CatchUp::Old:
                ++oldLeft;
                continue;
            case CatchUp::Follow:
                break;
            }
            if (started >= kMostFollowers) {
                ++overCap;
                continue;
            }
            const fs::path log = *home / "followers" / (runDir.filename().string() + ".log");
            auto pid = startFollower(programPath, reference, profilesFile, log);
            if (!pid) {
                std::cerr << who << ": " << pid.error().message << "\n";
                continue;
            }
            ++started;
            said << who << ": following " << runDir.filename().string() << " in the background (pid " << *pid
                 << "; its output in " << log.string() << ")\n";
            followers.push_back({{"run", runDir.filename().string()}, {"pid", *pid}, {"log", log.string()}});
        }
    }
    if (started == 0)
        said << who << ": every cluster run of " << profilesFile.string() << "'s shared folders is followed or has ended\n";
    if (othersLeft > 0)
        said << who << ": " << othersLeft << " run" << (othersLeft == 1 ? "" : "s")
             << " of other users left alone (`shardscope runs follow DIR` follows one)\n";
    if (oldLeft > 0)
        said << who << ": " << oldLeft << " of your runs submitted over a week ago left alone (`shardscope runs "
             << "follow DIR` takes one)\n";
    if (overCap > 0)
        said << who << ": " << overCap << " more of your runs not followed yet: at most " << kMostFollowers
             << " followers start at once; the next `runs follow --all` starts theirs\n";
    return answer();
}

} // namespace shardscope::cluster
