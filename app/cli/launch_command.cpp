// `shardscope launch`: start N local ranks of shardscope-worker and supervise them.

#include "app/cli/commands.h"
#include "app/launcher/launcher.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>

namespace shardscope::cli {

namespace {

struct LaunchArgs {
    int numProcesses = 1;
    std::string mainProcessIp = "127.0.0.1";
    int mainProcessPort = 0;
    std::string worker;
    std::vector<std::string> workerArgs;
};

// shardscope-worker lives next to shardscope; SHARDSCOPE_WORKER overrides that.
std::string defaultWorkerPath(const std::string& programPath)
{
    if (const char* fromEnv = std::getenv("SHARDSCOPE_WORKER"); fromEnv && *fromEnv)
        return fromEnv;
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec)
        self = std::filesystem::absolute(programPath, ec);
    return (self.parent_path() / "shardscope-worker").string();
}

int runLaunchCommand(const LaunchArgs& args, const std::string& programPath)
{
    LaunchOptions options;
    options.numProcesses = args.numProcesses;
    options.masterAddr = args.mainProcessIp;
    options.masterPort = args.mainProcessPort;
    options.workerPath = args.worker.empty() ? defaultWorkerPath(programPath) : args.worker;
    options.workerArgs = args.workerArgs;

    auto outcome = runLaunch(options);
    if (!outcome) {
        std::cerr << "shardscope launch: error: " << outcome.error().message << "\n";
        return 1;
    }
    if (outcome->exitCode != 0) {
        std::cerr << "shardscope launch: " << outcome->failureSummary();
        return outcome->exitCode;
    }
    double longest = 0;
    for (const auto& r : outcome->ranks)
        longest = std::max(longest, r.seconds);
    std::cout << "shardscope launch: " << options.numProcesses << " ranks finished successfully in " << longest
              << " s (rendezvous on " << options.masterAddr << ":" << outcome->masterPort << ")\n";
    return 0;
}

} // namespace

void addLaunchCommand(CLI::App& app, CommandContext& context)
{
    auto args = std::make_shared<LaunchArgs>();
    auto* cmd = app.add_subcommand("launch", "Start N local ranks of the engine and supervise them "
                                             "(arguments after -- go to every rank)");
    cmd->add_option("--num_processes", args->numProcesses, "Number of ranks to start on this machine")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    cmd->add_option("--main_process_ip", args->mainProcessIp, "Rendezvous address")->capture_default_str();
    cmd->add_option("--main_process_port", args->mainProcessPort, "Rendezvous port (0 or unset: a free port)")
        ->check(CLI::Range(0, 65535));
    cmd->add_option("--worker", args->worker, "Worker executable (default: shardscope-worker next to shardscope)");
    cmd->add_option("worker_args", args->workerArgs, "Arguments for each rank, after --");
    cmd->callback([args, &context] { context.exitCode = runLaunchCommand(*args, context.programPath); });
}

} // namespace shardscope::cli
