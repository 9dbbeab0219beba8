#pragma once

// Where Shardscope keeps its data: $SHARDSCOPE_HOME, else $XDG_DATA_HOME/shardscope, else
// ~/.local/share/shardscope. The run history (runs.db) and the run directories (runs/<id>/) live
// there, so the GUI, the CLI and every launcher find the same runs.

#include <string>

namespace shardscope {

std::string shardscopeHome();
std::string defaultRunsDirectory(); // <home>/runs

} // namespace shardscope
