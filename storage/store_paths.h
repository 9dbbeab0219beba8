#pragma once

// Where the run history lives: $SHARDSCOPE_HOME, else $XDG_DATA_HOME/shardscope, else
// ~/.local/share/shardscope (the XDG default). The database is <home>/history.sqlite and the run
// directories are <home>/runs/<id>/.

#include "engine/common/result.h"

#include <filesystem>

namespace shardscope::storage {

Result<std::filesystem::path> shardscopeHome();
inline std::filesystem::path historyFile(const std::filesystem::path& home) { return home / "history.sqlite"; }
inline std::filesystem::path runsFolder(const std::filesystem::path& home) { return home / "runs"; }

} // namespace shardscope::storage
