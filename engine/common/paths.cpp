#include "engine/common/paths.h"

#include <cstdlib>

namespace shardscope {

std::string shardscopeHome()
{
    if (const char* home = std::getenv("SHARDSCOPE_HOME"); home && *home)
        return home;
    if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg)
        return std::string(xdg) + "/shardscope";
    const char* user = std::getenv("HOME");
    return std::string(user && *user ? user : ".") + "/.local/share/shardscope";
}

std::string defaultRunsDirectory()
{
    return shardscopeHome() + "/runs";
}

} // namespace shardscope
