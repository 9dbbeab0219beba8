#pragma once

// Where the run history lives: $SHARDSCOPE_HOME, else $XDG_DATA_HOME/shardscope, else
// ~/.local/share/shardscope (the XDG default). The database is <home>/history.sqlite and the run
// directories are <home>/runs/<id>/; machine-peaks.json keeps what each machine's MFU is against.

#include "engine/common/result.h"

#include <filesystem>

namespace shardscope::storage {

Result<std::filesystem::path> shardscopeHome();
inline std::filesystem::path historyFile(const std::filesystem::path& home) { return home / "history.sqlite"; }
inline std::filesystem::path runsFolder(const std::filesystem::path& home) { return home / "runs"; }
// The matmul peaks MFU is against, measured once per machine (engine/train/mfu.h).
inline std::filesystem::path machinePeaksFile(const std::filesystem::path& home) { return home / "machine-peaks.json"; }

} // namespace shardscope::storage
