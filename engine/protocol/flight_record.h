#pragma once

// A rank's flight record: the last collectives it issued (engine/dist/flight_recorder.h keeps
// them), with what the rank was doing, written on request to runs/<id>/flight/rank<N>.json so that
// the launcher (on a hang) or `shardscope runs diagnose` (any time) can say where the ranks wait
// and who never came (app/launcher/hang_report.h). Torch-free: both sides read it.
//
// Asking: a client writes a request number into flight/request; each rank's heartbeat thread,
// which runs whatever its training thread does (a wait in a collective included), answers a number
// larger than the last it answered by writing its record with that number.

#include "engine/common/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::protocol {

struct CollectiveRecord {
    std::string group; // the process group's name: "default_pg", or a subgroup's
    std::int64_t seq = 0; // within the group, from 1, in the order this rank issued them
    std::string kind; // "all_reduce", "all_gather", "reduce_scatter", "broadcast", "scatter", "barrier"
    std::int64_t bytes = 0; // of this rank's input
    std::string dtype; // "float32", "bfloat16", ...
    std::int64_t step = 0; // optimizer steps done when it was issued
    std::string phase; // what the rank was doing then: "forward", "backward", "optimizer", "eval", ...
    double issuedAt = 0; // seconds since the Unix epoch
    // When this rank saw it complete (its wait returned, or a poll found it done); none: pending.
    std::optional<double> completedAt;
};

struct FlightRecord {
    int rank = 0;
    std::int64_t request = 0; // the request it answers
    double time = 0; // when it was written, seconds since the Unix epoch
    std::int64_t step = 0; // what the rank does now
    std::string phase;
    std::map<std::string, std::int64_t> issued; // per group: the last sequence number issued
    std::vector<CollectiveRecord> collectives; // oldest first; the ring's capacity at most
};

std::string flightRecordJson(const FlightRecord& record);
Result<FlightRecord> parseFlightRecord(std::string_view text, const std::string& where);

// The files, inside a run directory's flight/ folder.
std::filesystem::path flightRequestFile(const std::filesystem::path& flightDir);
std::filesystem::path flightRecordFile(const std::filesystem::path& flightDir, int rank);

} // namespace shardscope::protocol
