// `shardscope clusters`: the cluster profiles this machine has (the file `launch --target
// slurm:NAME` and the workbench's target choice read) and, where SLURM's client is installed, the
// partitions `sinfo` offers. One line per profile starting "[name]" (the workbench reads the names
// from it), then one line of partitions (per login node). `--json` for the workbench's profile
// editor, `--save NAME` / `--remove NAME` to change one profile of the file.

#include "app/cli/commands.h"
#include "app/cluster/slurm.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

namespace shardscope::cli {

namespace {

std::string orDefault(const std::string& value, const char* fallback) { return value.empty() ? fallback : value; }

nlohmann::json profileJson(const cluster::ClusterProfile& p)
{
    std::string options;
    for (const auto& option : p.sshOptions)
        options += (options.empty() ? "" : " ") + option;
    return {{"name", p.name},
            {"partition", p.partition},
            {"time", p.timeLimit},
            {"warning_seconds", p.warningSeconds},
            {"account", p.account},
            {"qos", p.qos},
            {"cpus_per_task", p.cpusPerTask},
            {"sbatch", p.extraSbatch},
            {"shared_folder", p.sharedFolder},
            {"login", p.login},
            {"ssh_options", options}};
}

// A profile as `clusters --json` writes it (and the workbench sends back to --save). A field of the
// wrong type is an error naming it.
Result<cluster::ClusterProfile> profileFromJson(const nlohmann::json& j)
{
    if (!j.is_object())
        return makeError("a profile is a JSON object");
    cluster::ClusterProfile p;
    const auto text = [&](const char* key, std::string& out) -> Result<void> {
        if (!j.contains(key))
            return {};
        if (!j[key].is_string())
            return makeError(std::string(key) + " is " + j[key].dump() + ", not a string");
        out = j[key].get<std::string>();
        return {};
    };
    const auto number = [&](const char* key, int& out) -> Result<void> {
        if (!j.contains(key))
            return {};
        if (!j[key].is_number_integer())
            return makeError(std::string(key) + " is " + j[key].dump() + ", not a whole number");
        out = static_cast<int>(j[key].get<std::int64_t>());
        return {};
    };
    std::string options;
    for (auto read :
         {text("name", p.name), text("partition", p.partition), text("time", p.timeLimit), text("account", p.account),
          text("qos", p.qos), text("shared_folder", p.sharedFolder), text("login", p.login), text("ssh_options", options),
          number("warning_seconds", p.warningSeconds), number("cpus_per_task", p.cpusPerTask)})
        if (!read)
            return read.error();
    std::istringstream words(options);
    for (std::string word; words >> word;)
        p.sshOptions.push_back(word);
    if (j.contains("sbatch")) {
        if (!j["sbatch"].is_array())
            return makeError("sbatch is " + j["sbatch"].dump() + ", not a list of lines");
        for (const auto& line : j["sbatch"]) {
            if (!line.is_string())
                return makeError("an sbatch line is " + line.dump() + ", not text");
            if (!line.get<std::string>().empty())
                p.extraSbatch.push_back(line.get<std::string>());
        }
    }
    return p;
}

// SLURM's partitions as `profile`'s place (this machine, or its login node) sees them.
Result<std::vector<cluster::Partition>> partitionsOf(const cluster::ClusterProfile& profile)
{
    const cluster::SlurmClient slurm(profile);
    if (auto client = slurm.available(); !client)
        return client.error();
    return slurm.partitions();
}

// `clusters --json`: the file, every profile, and each profile's partitions (or why none).
int printJson(const std::filesystem::path& file, const std::map<std::string, cluster::ClusterProfile>& profiles)
{
    nlohmann::json out{{"file", file.string()}, {"profiles", nlohmann::json::array()}};
    std::map<std::string, nlohmann::json> byLogin; // asked once per place
    for (const auto& [name, p] : profiles) {
        auto entry = profileJson(p);
        if (!byLogin.count(p.login)) {
            auto partitions = partitionsOf(p);
            nlohmann::json names = nlohmann::json::array();
            if (partitions)
                for (const auto& partition : *partitions)
                    names.push_back(partition.name);
            byLogin[p.login] = partitions ? nlohmann::json{{"partitions", names}}
                                          : nlohmann::json{{"partitions_error", partitions.error().message}};
        }
        entry.update(byLogin[p.login]);
        out["profiles"].push_back(entry);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
}

int runClusters(const std::string& given, bool json)
{
    const auto file = cluster::profilesFile(given);
    std::error_code ec;
    if (json && !std::filesystem::exists(file, ec))
        return printJson(file, {}); // none yet: the workbench offers to make one
    auto profiles = cluster::loadProfiles(file);
    if (!profiles) {
        std::cerr << "shardscope clusters: " << profiles.error().message << "\n";
        return 1;
    }
    if (json)
        return printJson(file, *profiles);
    std::cout << "# profiles of " << file.string() << "\n";
    for (const auto& [name, p] : *profiles)
        std::cout << "[" << name << "] partition " << orDefault(p.partition, "(the cluster's default)") << ", time "
                  << orDefault(p.timeLimit, "(the partition's)") << ", shared folder "
                  << orDefault(p.sharedFolder, "(none: set shared_folder)")
                  << (p.login.empty() ? "" : ", SLURM on " + p.login + " over SSH") << "\n";
    // SLURM's partitions as each place that runs its commands sees them: this machine, and each
    // login node a profile names (over SSH).
    std::map<std::string, cluster::ClusterProfile> places;
    for (const auto& [name, p] : *profiles)
        places.emplace(p.login, p);
    if (places.empty())
        places.emplace("", cluster::ClusterProfile{});
    for (const auto& [login, profile] : places) {
        const std::string on = login.empty() ? "" : " on " + cluster::SlurmClient(profile).where();
        auto partitions = partitionsOf(profile);
        if (!partitions) {
            std::cout << "# partitions" << on << ": " << partitions.error().message << "\n";
            continue;
        }
        std::cout << "# partitions (sinfo" << on << "):";
        for (const auto& p : *partitions)
            std::cout << " " << p.name << (p.isDefault ? " (default)" : "") << " " << (p.up ? "up" : "down") << " " << p.nodes
                      << (p.nodes == 1 ? " node" : " nodes") << ";";
        std::cout << "\n";
    }
    return 0;
}

// `clusters --save NAME` (the profile's JSON on stdin) and `--remove NAME`.
int changeProfile(const std::string& given, const std::string& name, bool remove)
{
    const auto file = cluster::profilesFile(given);
    cluster::ClusterProfile profile;
    if (!remove) {
        const auto j = nlohmann::json::parse(std::cin, nullptr, false);
        auto parsed = profileFromJson(j);
        if (!parsed) {
            std::cerr << "shardscope clusters: the profile on standard input: " << parsed.error().message << "\n";
            return 2;
        }
        profile = *parsed;
    }
    profile.name = name;
    if (auto saved = cluster::saveProfile(file, profile, remove); !saved) {
        std::cerr << "shardscope clusters: " << saved.error().message << "\n";
        return 1;
    }
    std::cout << "shardscope clusters: " << (remove ? "removed [" : "saved [") << name << "] in " << file.string()
              << " (the file before: " << file.string() << ".previous)\n";
    return 0;
}

} // namespace

void addClustersCommand(CLI::App& app, CommandContext& context)
{
    struct Args {
        std::string file, save, remove;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("clusters", "List the cluster profiles (for launch --target slurm:NAME) and SLURM's "
                                               "partitions; save or remove one");
    cmd->add_option("--cluster_profiles,--cluster-profiles", args->file, "Profiles file (default $SHARDSCOPE_HOME/clusters.ini)");
    cmd->add_flag("--json", args->json, "Print the profiles and each one's partitions as JSON");
    cmd->add_option("--save", args->save,
                    "Save profile NAME from the JSON object on standard input (the keys --json prints); the rest of the "
                    "file stays as it was");
    cmd->add_option("--remove", args->remove, "Remove profile NAME from the file");
    cmd->callback([args, &context] {
        if (!args->save.empty() && !args->remove.empty()) {
            std::cerr << "shardscope clusters: --save or --remove, one of them\n";
            context.exitCode = 2;
        } else if (!args->save.empty() || !args->remove.empty()) {
            context.exitCode = changeProfile(args->file, args->save.empty() ? args->remove : args->save, args->save.empty());
        } else {
            context.exitCode = runClusters(args->file, args->json);
        }
    });
}

} // namespace shardscope::cli
