// `shardscope config`: Accelerate's questionnaire on the terminal (`config`), a basic config
// without questions (`config default`), and checking a file (`config validate F`).

#include "app/cli/commands.h"
#include "engine/plan/machine_probe.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/questionnaire_terminal.h"
#include "engine/accelerate/validation.h"
#include "engine/accelerate/yaml_io.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

namespace shardscope::cli {

namespace {

using namespace shardscope::config;

int runQuestionnaire(const std::string& configFile)
{
    auto cfg = runTerminalQuestionnaire(std::cin, std::cout, probeHardware());
    if (!cfg) {
        std::cerr << "shardscope config: error: " << cfg.error().message << "\n";
        return 1;
    }
    std::string path = configFile;
    if (path.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(defaultConfigDir(), ec); // only the default location is created
        path = defaultConfigFile();
    }
    if (auto ok = saveAccelerateConfig(*cfg, path); !ok) {
        std::cerr << "shardscope config: error: " << ok.error().message << "\n";
        return 1;
    }
    std::cout << "accelerate configuration saved at " << path << "\n";
    return 0;
}

// accelerate config default: probe the devices; always written with the JSON writer.
int runDefault(const std::string& configFile, std::string mixedPrecision)
{
    const std::string path = configFile.empty() ? defaultConfigFile() : configFile;
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
        std::cout << "Configuration already exists at " << path
                  << ", will not override. Run `shardscope config` manually or pass a different `--config_file`.\n";
        return 0;
    }
    std::transform(mixedPrecision.begin(), mixedPrecision.end(), mixedPrecision.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (mixedPrecision != "no" && mixedPrecision != "fp16" && mixedPrecision != "bf16" && mixedPrecision != "fp8") {
        std::cerr << "shardscope config default: error: `mixed_precision` should be one of 'no', 'fp16', 'bf16', or "
                     "'fp8'. Received "
                  << mixedPrecision << "\n";
        return 1;
    }
    const MachineInfo machine = probeMachine();
    Value f = Value::emptyMap();
    f.set("compute_environment", Value("LOCAL_MACHINE"));
    f.set("mixed_precision", Value(mixedPrecision));
    if (machine.gpuCount > 0) {
        f.set("num_processes", Value(machine.gpuCount));
        f.set("use_cpu", Value(false));
        f.set("distributed_type", Value(machine.gpuCount > 1 ? "MULTI_GPU" : "NO"));
    } else {
        f.set("use_cpu", Value(true));
        f.set("num_processes", Value(1));
        f.set("distributed_type", Value("NO"));
    }
    f.set("debug", Value(false));
    f.set("enable_cpu_affinity", Value(false));
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (auto ok = writeTextFile(path, toJsonText(AccelerateConfig(ConfigKind::Cluster, f))); !ok) {
        std::cerr << "shardscope config default: error: " << ok.error().message << "\n";
        return 1;
    }
    std::cout << "accelerate configuration saved at " << path << "\n";
    return 0;
}

int runValidate(const std::string& file, bool forLaunch)
{
    auto cfg = loadAccelerateConfig(file);
    if (!cfg) {
        std::cerr << "error: " << cfg.error().message << "\n";
        return 1;
    }
    ValidationOptions options;
    options.forLaunch = forLaunch;
    options.machine = probeMachine();
    std::error_code ec;
    options.baseDir = std::filesystem::current_path(ec).string();
    const auto diagnostics = validateConfig(*cfg, options);
    for (const auto& d : diagnostics)
        std::cerr << formatDiagnostic(*cfg, d) << "\n";
    if (hasErrors(diagnostics))
        return 1;
    std::cout << toYamlText(*cfg);
    return 0;
}

} // namespace

void addConfigCommand(CLI::App& app, CommandContext& context)
{
    auto configFile = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("config", "Create an Accelerate config file by answering `accelerate config`'s "
                                             "questions (one answer per line on stdin)");
    cmd->add_option("--config_file,--config-file", *configFile,
                    "Where to save it (default: $HF_HOME/accelerate/default_config.yaml)");
    cmd->callback([configFile, cmd, &context] {
        if (cmd->get_subcommands().empty())
            context.exitCode = runQuestionnaire(*configFile);
    });

    auto defaultFile = std::make_shared<std::string>();
    auto mixed = std::make_shared<std::string>("no");
    auto* def = cmd->add_subcommand("default", "Write a basic config for this machine without questions");
    def->add_option("--config_file,--config-file", *defaultFile, "Where to save it");
    def->add_option("--mixed_precision,--mixed-precision", *mixed, "no, fp16, bf16 or fp8")->capture_default_str();
    def->callback([defaultFile, mixed, &context] { context.exitCode = runDefault(*defaultFile, *mixed); });

    auto validateFile = std::make_shared<std::string>();
    auto forLaunch = std::make_shared<bool>(false);
    auto* val = cmd->add_subcommand("validate", "Check a config file: print the normalised config, or every error (exit 1)");
    val->add_option("file", *validateFile, "The config file")->required();
    val->add_flag("--for_launch,--for-launch", *forLaunch, "Treat what this machine cannot run as errors");
    val->callback([validateFile, forLaunch, &context] { context.exitCode = runValidate(*validateFile, *forLaunch); });
}

} // namespace shardscope::cli
