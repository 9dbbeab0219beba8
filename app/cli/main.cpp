// shardscope: the workbench (no subcommand) and the command line (a subcommand), one binary.

#include "app/cli/commands.h"

#include <cstring>
#include <iostream>
#include <string_view>

#ifdef SHARDSCOPE_HAVE_GUI
#include "app/gui/workbench_main.h"
#endif

int main(int argc, char** argv)
{
    using namespace shardscope::cli;
    if (argc > 1 && isSubcommand(argv[1]))
        return runCommandLine(argc, argv);
    if (argc > 1 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h"))
        return runCommandLine(argc, argv);
#ifdef SHARDSCOPE_HAVE_GUI
    return shardscope::gui::runWorkbench(argc, argv);
#else
    std::cerr << "shardscope: this build has no workbench (configured with SHARDSCOPE_BUILD_GUI=OFF); "
                 "use a subcommand, see `shardscope --help`\n";
    return 2;
#endif
}
