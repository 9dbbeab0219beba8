#include "storage/store_paths.h"

#include <cstdlib>

namespace shardscope::storage {

Result<std::filesystem::path> shardscopeHome()
{
    auto env = [](const char* name) -> std::string {
        const char* value = std::getenv(name);
        return value ? value : "";
    };
    if (auto home = env("SHARDSCOPE_HOME"); !home.empty())
        return std::filesystem::path(home);
    // The XDG spec ignores relative paths in its variables.
    if (auto data = env("XDG_DATA_HOME"); !data.empty() && data.front() == '/')
        return std::filesystem::path(data) / "shardscope";
    if (auto home = env("HOME"); !home.empty())
        return std::filesystem::path(home) / ".local" / "share" / "shardscope";
    return makeError("cannot tell where to keep the run history: none of SHARDSCOPE_HOME, XDG_DATA_HOME and HOME "
                     "is set; set SHARDSCOPE_HOME to a folder");
}

} // namespace shardscope::storage
