#pragma once

// The command-line front end: `shardscope <subcommand> ...`. Each subcommand lives in its own
// file (launch_command.cpp, ...) and registers itself on the CLI11 app in commands.cpp.

#include <string>

namespace CLI {
class App;
}

namespace shardscope::cli {

// Shared by the subcommands: where to put the process's exit code, and argv[0].
struct CommandContext {
    int exitCode = 0;
    std::string programPath;
};

bool isSubcommand(const char* word);
int runCommandLine(int argc, char** argv);

void addLaunchCommand(CLI::App& app, CommandContext& context);
void addConfigCommand(CLI::App& app, CommandContext& context);
void addEnvCommand(CLI::App& app, CommandContext& context);
void addEstimateMemoryCommand(CLI::App& app, CommandContext& context);
void addRunsCommand(CLI::App& app, CommandContext& context);
void addDataCommand(CLI::App& app, CommandContext& context);
void addClustersCommand(CLI::App& app, CommandContext& context);

} // namespace shardscope::cli
