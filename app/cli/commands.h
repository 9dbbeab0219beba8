#pragma once

// The command-line front end: `shardscope <subcommand> ...`. Each subcommand lives in its own
// file (launch_command.cpp, ...) and registers itself on the CLI11 app in commands.cpp.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Validator;
} // namespace CLI

namespace shardscope::cli {

// Shared by the subcommands: where to put the process's exit code, and argv[0].
struct CommandContext {
    int exitCode = 0;
    std::string programPath;
    // `shardscope launch`: accelerate launch's flags taken out before CLI11 parses (name, value).
    std::vector<std::pair<std::string, std::optional<std::string>>> accelerateLaunchFlags;
};

// `shardscope launch`'s arguments (those after the subcommand's name), made ready for CLI11 so
// that an `accelerate launch` command line works with the program name swapped: accelerate
// launch's flags that are not shardscope launch's own go to `context.accelerateLaunchFlags` with
// their values, and the training script (the first positional argument) with its arguments
// becomes `--script SCRIPT -- ARGS...`. `launch` is the registered subcommand.
std::vector<std::string> prepareLaunchArguments(const CLI::App& launch, const std::vector<std::string>& arguments,
                                                CommandContext& context);

// What a numeric option takes: a finite number (whole, for counts) between two bounds, the lower
// one included or not. Checked on the option's text before CLI11 converts it, which let NaN
// through, printed DBL_MAX (309 digits) as a bound, saturated 99999999999999999999999 to INT64_MAX,
// and said "Could not convert" of 2.5 and "not in range" of "abc".
struct NumberRule {
    double low = 0;
    bool lowIncluded = true;
    double high = 0;
    bool whole = false;
    const char* unit = ""; // after the range: " (seconds; ...)"
};
// "'2.5' is not a whole number; give one from 1 to 1024". Add it with ->transform: it writes
// a whole number as CLI11 reads one ("1e3": 1000).
CLI::Validator numberIn(const NumberRule& rule);

bool isSubcommand(const char* word);
int runCommandLine(int argc, char** argv);

void addLaunchCommand(CLI::App& app, CommandContext& context);
void addConfigCommand(CLI::App& app, CommandContext& context);
void addEnvCommand(CLI::App& app, CommandContext& context);
void addEstimateMemoryCommand(CLI::App& app, CommandContext& context);
void addRunsCommand(CLI::App& app, CommandContext& context);
void addDataCommand(CLI::App& app, CommandContext& context);
void addClustersCommand(CLI::App& app, CommandContext& context);
void addTuneCommand(CLI::App& app, CommandContext& context);

} // namespace shardscope::cli
