#include "app/cli/commands.h"

#include <CLI/CLI.hpp>

namespace shardscope::cli {

namespace {

void addAllCommands(CLI::App& app, CommandContext& context)
{
    addLaunchCommand(app, context);
    addRunsCommand(app, context);
    addConfigCommand(app, context);
    addEnvCommand(app, context);
    addEstimateMemoryCommand(app, context);
    addDataCommand(app, context);
    addClustersCommand(app, context);
}

} // namespace

bool isSubcommand(const char* word)
{
    CLI::App app;
    CommandContext context;
    addAllCommands(app, context);
    for (const auto* sub : app.get_subcommands({}))
        if (sub->get_name() == word)
            return true;
    return false;
}

int runCommandLine(int argc, char** argv)
{
    CLI::App app{"Shardscope: configure, launch and inspect distributed training runs.\n"
                 "Without a subcommand, shardscope opens the workbench."};
    app.require_subcommand(1);
    CommandContext context;
    context.programPath = argv[0];
    addAllCommands(app, context);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    return context.exitCode;
}

} // namespace shardscope::cli
