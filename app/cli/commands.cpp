#include "app/cli/commands.h"

#include "engine/common/number_text.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

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
    addTuneCommand(app, context);
}

std::string boundText(double value)
{
    char text[32];
    std::snprintf(text, sizeof text, value == std::floor(value) && std::fabs(value) < 1e15 ? "%.0f" : "%g", value);
    return text;
}

} // namespace

CLI::Validator numberIn(const NumberRule& rule)
{
    const std::string range = (rule.lowIncluded ? "from " + boundText(rule.low) : "above " + boundText(rule.low)) + " to "
                              + boundText(rule.high) + rule.unit;
    const NumberBounds bounds{rule.low, rule.lowIncluded, rule.high, rule.whole};
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            double value = 0;
            std::string problem = numberTextProblem(text, bounds, range, &value);
            if (problem.empty() && rule.whole)
                text = boundText(value); // "1e3" as CLI11's integer conversion reads it: 1000
            return problem;
        },
        std::string(rule.whole ? "a whole number " : "a number ") + range);
}

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
        if (argc > 1 && std::string(argv[1]) == "launch") {
            const std::vector<std::string> given(argv + 2, argv + argc);
            std::vector<std::string> prepared = prepareLaunchArguments(*app.get_subcommand("launch"), given, context);
            prepared.insert(prepared.begin(), "launch");
            std::reverse(prepared.begin(), prepared.end()); // CLI11 takes a vector last argument first
            app.parse(prepared);
        } else {
            app.parse(argc, argv);
        }
    } catch (const CLI::ParseError& e) {
        const int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    return context.exitCode;
}

} // namespace shardscope::cli
