#include "engine/common/dist_env.h"

#include <charconv>
#include <cstdlib>

namespace shardscope {

namespace {

Result<int> readInt(const char* name, bool required, int fallback, int minimum)
{
    const char* raw = std::getenv(name);
    if (!raw || !*raw) {
        if (required)
            return makeError(std::string(name) + " is not set; ranks must be started by `shardscope launch` (or torchrun)");
        return fallback;
    }
    int value = 0;
    const std::string text(raw);
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
        return makeError(std::string(name) + "='" + text + "' is not an integer");
    if (value < minimum)
        return makeError(std::string(name) + "=" + text + " must be at least " + std::to_string(minimum));
    return value;
}

} // namespace

Result<DistEnv> DistEnv::fromEnvironment()
{
    using namespace env_names;
    DistEnv env;
    auto rank = readInt(kRank, true, 0, 0);
    if (!rank)
        return rank.error();
    auto world = readInt(kWorldSize, true, 1, 1);
    if (!world)
        return world.error();
    auto localRank = readInt(kLocalRank, false, *rank, 0);
    if (!localRank)
        return localRank.error();
    auto localWorld = readInt(kLocalWorldSize, false, *world, 1);
    if (!localWorld)
        return localWorld.error();
    auto groupRank = readInt(kGroupRank, false, 0, 0);
    if (!groupRank)
        return groupRank.error();
    auto port = readInt(kMasterPort, true, 0, 1);
    if (!port)
        return port.error();
    auto listenFd = readInt(kMasterListenFd, false, -1, -1);
    if (!listenFd)
        return listenFd.error();

    if (*rank >= *world)
        return makeError("RANK=" + std::to_string(*rank) + " is not below WORLD_SIZE=" + std::to_string(*world));
    if (*localRank >= *localWorld)
        return makeError("LOCAL_RANK=" + std::to_string(*localRank)
                         + " is not below LOCAL_WORLD_SIZE=" + std::to_string(*localWorld));
    if (*port > 65535)
        return makeError("MASTER_PORT=" + std::to_string(*port) + " is not a TCP port (1..65535)");

    env.rank = *rank;
    env.worldSize = *world;
    env.localRank = *localRank;
    env.localWorldSize = *localWorld;
    env.groupRank = *groupRank;
    env.masterPort = *port;
    env.masterListenFd = *listenFd;
    if (const char* addr = std::getenv(kMasterAddr); addr && *addr)
        env.masterAddr = addr;
    return env;
}

std::vector<std::string> DistEnv::toEnvironment() const
{
    using namespace env_names;
    auto var = [](const char* name, const std::string& value) { return std::string(name) + "=" + value; };
    std::vector<std::string> out = {
        var(kRank, std::to_string(rank)),
        var(kLocalRank, std::to_string(localRank)),
        var(kWorldSize, std::to_string(worldSize)),
        var(kLocalWorldSize, std::to_string(localWorldSize)),
        var(kGroupRank, std::to_string(groupRank)),
        var(kMasterAddr, masterAddr),
        var(kMasterPort, std::to_string(masterPort)),
    };
    if (masterListenFd >= 0)
        out.push_back(var(kMasterListenFd, std::to_string(masterListenFd)));
    return out;
}

} // namespace shardscope
