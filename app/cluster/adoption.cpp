#include "app/cluster/adoption.h"

#include "app/cluster/submission.h"
#include "app/runs/run_import.h"
#include "engine/accelerate/yaml_io.h"
#include "engine/common/run_layout.h"

#include <sys/stat.h>
#include <unistd.h>

namespace shardscope::cluster {

namespace fs = std::filesystem;

std::string runFileText(const fs::path& file)
{
    auto text = config::readTextFile(file.string());
    return text ? *text : std::string();
}

Result<std::int64_t> adoptFolder(storage::RunStore& store, const fs::path& runDir)
{
    auto submission = cluster::readSubmission(runDir);
    if (!submission)
        return submission.error();
    storage::NewRun run;
    run.name = submission->name;
    if (store.resolveRun(run.name))
        run.name += " (" + submission->job + ")";
    run.runDir = fs::absolute(runDir).lexically_normal().string();
    run.recipeText = runFileText(RunLayout(runDir).recipeFile());
    run.configText = runFileText(RunLayout(runDir).configFile());
    run.distributedType = submission->distributedType;
    run.mixedPrecision = submission->mixedPrecision;
    run.worldSize = submission->numProcesses;
    run.tags = submission->tags;
    if (submission->submittedAt > 0)
        run.createdAt = submission->submittedAt; // not when this history learned of it
    run.notes = "SLURM job " + submission->job.substr(6) + " (" + std::to_string(submission->numMachines)
                + " nodes), submitted by " + submission->user + " on " + submission->host + "; followed here";
    auto id = store.createRun(run);
    if (!id)
        return id.error();
    if (auto job = store.setJob(*id, submission->job); !job)
        return job.error();
    return *id;
}

Result<std::int64_t> followedRun(storage::RunStore& store, const fs::path& home, const std::string& reference, bool& adopted)
{
    std::error_code ec;
    if (!fs::is_directory(reference, ec))
        return store.resolveRun(reference);
    if (!fs::exists(RunLayout(reference).jobIdFile(), ec))
        return makeError(reference
                         + " is not a cluster run's folder (it has no slurm_job_id); `runs follow` follows runs "
                           "submitted with `launch --target slurm`");
    if (auto owner = runOwningFolder(store, home, reference))
        return owner->first;
    adopted = true;
    return adoptFolder(store, reference);
}

bool ownedByThisUser(const fs::path& runDir)
{
    struct stat info { };
    return ::stat(RunLayout(runDir).submissionFile().c_str(), &info) == 0 && info.st_uid == ::geteuid();
}

} // namespace shardscope::cluster
