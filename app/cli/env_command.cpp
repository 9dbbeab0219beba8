// `shardscope env`: the fields of `accelerate env` that apply to Shardscope, for bug reports.

#include "app/cli/commands.h"
#include "engine/plan/machine_probe.h"
#include "engine/accelerate/accelerate_config.h"

#include <CLI/CLI.hpp>

#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

namespace shardscope::cli {

namespace {

using namespace shardscope::config;

int runEnv(const std::string& configFile)
{
    utsname u{};
    uname(&u);
    struct sysinfo si { };
    sysinfo(&si);
    const double ramGb = static_cast<double>(si.totalram) * si.mem_unit / (1024.0 * 1024.0 * 1024.0);
    const auto gpus = probeGpuNames();
    char ram[32];
    std::snprintf(ram, sizeof ram, "%.2f", ramGb);
    std::cout << "\nCopy-and-paste the text below in your GitHub issue\n\n";
    std::cout << "- `Shardscope` version: " << SHARDSCOPE_VERSION << "\n";
    std::cout << "- Platform: " << u.sysname << "-" << u.release << "-" << u.machine << "\n";
    std::cout << "- PyTorch accelerator: " << (gpus.empty() ? "N/A" : "CUDA") << "\n";
    std::cout << "- System RAM: " << ram << " GB\n";
    if (!gpus.empty())
        std::cout << "- GPU type: " << gpus.front() << "\n";
    const std::string path = configFile.empty() ? defaultConfigFile() : configFile;
    std::cout << (configFile.empty() ? "- `Accelerate` default config:" : "- `Accelerate` config passed:") << "\n";
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        std::cout << "\tNot found\n";
        return configFile.empty() ? 0 : 1;
    }
    auto cfg = loadAccelerateConfig(path);
    if (!cfg) {
        std::cerr << "shardscope env: error: " << cfg.error().message << "\n";
        return 1;
    }
    // to_dict() in field order, printed with Python's str(), as accelerate env does.
    const Value dict = cfg->toDict();
    for (const auto& e : dict.asMap())
        std::cout << "\t- " << e.key.pyStr() << ": " << e.value.pyStr() << "\n";
    return 0;
}

} // namespace

void addEnvCommand(CLI::App& app, CommandContext& context)
{
    auto configFile = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("env", "Print the environment and config for bug reports (like `accelerate env`)");
    cmd->add_option("--config_file,--config-file", *configFile, "Config to print (default: the default config)");
    cmd->callback([configFile, &context] { context.exitCode = runEnv(*configFile); });
}

} // namespace shardscope::cli
