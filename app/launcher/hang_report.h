#pragma once

// Where the ranks of a run wait, from their flight records (engine/protocol/flight_record.h):
// the collective some ranks wait in, the ranks that never entered it, each rank's last completed
// collective and what it does now. The launcher writes it into the run directory when it stops a
// hung run (hang_report.txt, stored with the run and shown on its page); `shardscope runs
// diagnose` prints it for a live run on request.

#include "engine/common/result.h"
#include "engine/protocol/flight_record.h"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

struct HangReport {
    // The collective ranks wait in (group, sequence number within it, kind, size); seq 0: none
    // is pending anywhere.
    std::string group;
    std::int64_t seq = 0;
    std::string kind;
    std::int64_t bytes = 0;
    std::string dtype;
    std::vector<int> waitingRanks; // have it pending
    std::vector<int> missingRanks; // have not issued it (the ones to look at)
    std::vector<int> silentRanks; // gave no flight record
    // Ranks that issued a different collective (kind, size or dtype) under the same number: the
    // ranks took different code paths.
    std::vector<int> mismatchedRanks;
    std::string text; // the whole report, one finding per line
};

// Where a rank is, from the steps it has done and its phase: inside a step (data, forward,
// backward, optimizer) the step it runs, "step 20's forward", not the one before it (the report
// said "after step 19" of a rank stuck in step 20); between steps "checkpoint after step 19".
std::string rankPosition(std::int64_t stepsDone, const std::string& phase);

// `records[r]`: rank r's flight record, none when it did not answer. `patience` is how long the
// ranks were given to answer; 0: the records were read from dumps (a rank without one left none).
HangReport analyseFlightRecords(const std::vector<std::optional<protocol::FlightRecord>>& records,
                                std::chrono::milliseconds patience);

// Asks each of `ranks` ranks for its flight record (flight/request in `flightDir`) and waits up to
// `patience` for every answer; a rank that does not answer in time has none.
std::vector<std::optional<protocol::FlightRecord>> gatherFlightRecords(const std::filesystem::path& flightDir, int ranks,
                                                                       std::chrono::milliseconds patience);

// The flight records of a folder of PyTorch's own Flight Recorder dumps (one file per rank, named
// <prefix><rank>, from any run: torch writes them on a collective timeout to TORCH_FR_DUMP_TEMP_FILE
// + the rank), read by `python` running `reader` (python/shardscope/flight_dumps.py): records[r] is
// rank r's, none for a rank without a file (up to the default group's size the dumps name). The
// folder's files that were not read go to `skipped`. An error when no file is such a dump.
Result<std::vector<std::optional<protocol::FlightRecord>>> readTorchFlightDumps(const std::filesystem::path& folder,
                                                                                const std::string& python,
                                                                                const std::string& reader,
                                                                                std::vector<std::string>* skipped = nullptr);

// The Python stacks script ranks wrote beside their flight records (flight/rank<N>.stacks.txt,
// python/shardscope/collectives.py) in answer to the same request, as a report section ("stacks of
// rank 1 (Python):" and every thread's stack, innermost call last); empty when none answered.
std::string scriptStacks(const std::filesystem::path& flightDir,
                         const std::vector<std::optional<protocol::FlightRecord>>& records);

// Every thread's native stack of each of `pids` (rank r is pids[r]), from gdb attached for a
// moment (the processes go on), all at once within `timeout`; a section like scriptStacks'.
// Without gdb, or where it may not attach, a line says so.
std::string nativeStacks(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

} // namespace shardscope
