#include "app/launcher/run_directory.h"

#include <ctime>
#include <filesystem>

namespace shardscope {

namespace fs = std::filesystem;

Result<std::string> sanitizeRunId(const std::string& name)
{
    std::string id;
    for (unsigned char c : name)
        id.push_back(std::isalnum(c) || c == '-' || c == '_' || c == '.' ? static_cast<char>(c) : '-');
    if (id.find_first_not_of('.') == std::string::npos)
        return makeError("run name '" + name + "' cannot be used as a run id; use letters, digits, '-', '_' or '.'");
    return id;
}

std::string timestampedRunId(const std::string& name)
{
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    return name + "-" + stamp;
}

Result<RunDirectory> createRunDirectory(const std::string& runsDir, const std::string& rawId)
{
    auto id = sanitizeRunId(rawId);
    if (!id)
        return id.error();
    std::error_code ec;
    fs::create_directories(runsDir, ec);
    if (ec)
        return makeError("cannot create the runs directory " + runsDir + ": " + ec.message()
                         + " (set SHARDSCOPE_HOME to a writable folder)");
    const fs::path root = fs::weakly_canonical(runsDir, ec);
    const fs::path path = root / *id;
    if (path.parent_path() != root)
        return makeError("run id '" + *id + "' would leave the runs directory " + root.string());
    if (!fs::create_directory(path, ec)) {
        if (ec)
            return makeError("cannot create the run directory " + path.string() + ": " + ec.message());
        return makeError("the run directory " + path.string()
                         + " already exists; choose another --run_name, or delete that run first");
    }
    fs::create_directory(RunLayout(path).logsDir(), ec);
    if (ec)
        return makeError("cannot create " + RunLayout(path).logsDir().string() + ": " + ec.message());
    return RunDirectory{*id, path.string()};
}

} // namespace shardscope
