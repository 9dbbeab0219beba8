#pragma once

// The distributed environment a rank is started with: torchrun's variables, which our launcher
// sets exactly as torchrun and `accelerate launch` do, so a rank cannot tell them apart.

#include "engine/common/result.h"

#include <string>
#include <vector>

namespace shardscope {

struct DistEnv {
    int rank = 0; // global rank, 0 .. worldSize-1           (RANK)
    int localRank = 0; // rank on this machine                     (LOCAL_RANK)
    int worldSize = 1; // ranks in the job                         (WORLD_SIZE)
    int localWorldSize = 1; // ranks on this machine                    (LOCAL_WORLD_SIZE)
    int groupRank = 0; // this machine's index in the job          (GROUP_RANK)
    std::string masterAddr = "127.0.0.1"; // rendezvous host              (MASTER_ADDR)
    int masterPort = 29500; // rendezvous TCPStore port                 (MASTER_PORT)
    // A listening socket the launcher bound for rank 0's TCPStore server, so that no other
    // process can take the port between the launcher choosing it and rank 0 listening on it;
    // -1 when none was passed (SHARDSCOPE_MASTER_LISTEN_FD).
    int masterListenFd = -1;

    // Reads and checks the variables above; a missing or malformed one is an error naming it.
    static Result<DistEnv> fromEnvironment();

    // The variables as NAME=VALUE strings, for a launcher to put into a rank's environment.
    std::vector<std::string> toEnvironment() const;
};

// Whether a rendezvous address stays on this machine (localhost, 127.x.y.z, ::1): the store has
// no authentication, so anything else is for jobs over several machines only.
inline bool isLoopbackHost(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

namespace env_names {
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kMasterListenFd = "SHARDSCOPE_MASTER_LISTEN_FD";
} // namespace env_names

} // namespace shardscope
