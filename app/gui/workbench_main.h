#pragma once

namespace shardscope::gui {

// Opens the workbench window and runs the Qt event loop; returns the exit code.
int runWorkbench(int argc, char** argv);

} // namespace shardscope::gui
