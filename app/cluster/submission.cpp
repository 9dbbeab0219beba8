#include "app/cluster/submission.h"

#include "engine/common/run_layout.h"
#include "engine/common/user_file.h"

#include <nlohmann/json.hpp>

#include <pwd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace shardscope::cluster {

namespace fs = std::filesystem;

namespace {

} // namespace

Result<void> writeSubmission(const fs::path& runDir, const Submission& s)
{
    nlohmann::json j;
    j["name"] = s.name;
    j["job"] = s.job;
    j["profile"] = s.profile;
    j["num_machines"] = s.numMachines;
    j["num_processes"] = s.numProcesses;
    j["distributed_type"] = s.distributedType;
    j["mixed_precision"] = s.mixedPrecision;
    j["tags"] = s.tags;
    j["user"] = s.user;
    j["host"] = s.host;
    j["submitted"] = s.submittedAt;
    const fs::path file = RunLayout(runDir).submissionFile();
    const fs::path partial = file.string() + ".partial";
    {
        std::ofstream out(partial, std::ios::trunc);
        out << j.dump(2) << "\n";
        if (!out.flush())
            return makeError("cannot write " + partial.string());
    }
    std::error_code ec;
    fs::rename(partial, file, ec);
    if (ec)
        return makeError("cannot write " + file.string() + ": " + ec.message());
    return {};
}

namespace {

bool hasControlCharacter(const std::string& text)
{
    return std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

} // namespace

Result<Submission> readSubmission(const fs::path& runDir)
{
    const fs::path file = RunLayout(runDir).submissionFile();
    std::error_code ec;
    const auto status = fs::status(file, ec);
    if (ec || !fs::exists(status))
        return makeError(file.string() + " does not exist: " + runDir.string()
                         + " is not a cluster run's folder, or was submitted by a Shardscope before run.json (`shardscope "
                           "runs import` records it once its job has ended)");
    // A run's files are its own: a link could make another user's file (or a FIFO, or a device)
    // this run's. A run.json is a few hundred bytes.
    if (fs::is_symlink(fs::symlink_status(file, ec)))
        return makeError(file.string() + " is not a regular file (a link); a run's run.json is written by its submission");
    auto content = readUserFile(file, {"a submission's run.json", 1u << 20, std::chrono::seconds(10)});
    if (!content)
        return content.error();
    const auto j = nlohmann::json::parse(*content, nullptr, false);
    if (!j.is_object())
        return makeError(file.string() + " is not a JSON object");
    Submission s;
    const auto text = [&](const char* key, std::string& out) -> Result<void> {
        if (!j.contains(key) || !j[key].is_string())
            return makeError(file.string() + ": " + key + " is " + (j.contains(key) ? j[key].dump() : "missing")
                             + ", not a string");
        out = j[key].get<std::string>();
        // Printed on a terminal by `runs follow`: no escape sequence, no line of its own.
        if (hasControlCharacter(out))
            return makeError(file.string() + ": " + key + " holds a control character (a terminal escape?); a run.json "
                             + "is written by its submission, not by hand");
        return {};
    };
    const auto count = [&](const char* key, int& out) -> Result<void> {
        if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<std::int64_t>() < 1
            || j[key].get<std::int64_t>() > 65536) // as many as a cluster has, not 2^31 folders to look for
            return makeError(file.string() + ": " + key + " is " + (j.contains(key) ? j[key].dump() : "missing")
                             + ", not a count");
        out = static_cast<int>(j[key].get<std::int64_t>());
        return {};
    };
    for (auto read : {text("name", s.name), text("job", s.job), text("distributed_type", s.distributedType),
                      text("mixed_precision", s.mixedPrecision), text("user", s.user), text("host", s.host),
                      count("num_machines", s.numMachines), count("num_processes", s.numProcesses)})
        if (!read)
            return read.error();
    if (s.job.rfind("slurm:", 0) != 0 || s.job.size() == 6 || s.job.size() > 6 + 18
        || s.job.find_first_not_of("0123456789", 6) != std::string::npos)
        return makeError(file.string() + ": job is \"" + s.job + "\", not a SLURM job (\"slurm:<id>\")");
    if (j.contains("tags")) {
        if (!j["tags"].is_array())
            return makeError(file.string() + ": tags is " + j["tags"].dump() + ", not a list");
        for (const auto& tag : j["tags"]) {
            if (!tag.is_string())
                return makeError(file.string() + ": a tag is " + tag.dump() + ", not a string");
            if (hasControlCharacter(tag.get<std::string>()))
                return makeError(file.string() + ": a tag holds a control character; a run.json is written by its submission");
            s.tags.push_back(tag.get<std::string>());
        }
    }
    if (j.contains("profile")) {
        if (!j["profile"].is_string())
            return makeError(file.string() + ": profile is " + j["profile"].dump() + ", not a string");
        s.profile = j["profile"].get<std::string>();
    }
    if (j.contains("submitted") && j["submitted"].is_number())
        s.submittedAt = j["submitted"].get<double>();
    return s;
}

std::string currentUser()
{
    if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_name)
        return pw->pw_name;
    return {};
}

} // namespace shardscope::cluster
