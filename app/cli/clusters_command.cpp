// `shardscope clusters`: the cluster profiles this machine has (the file `launch --target
// slurm:NAME` and the workbench's target choice read) and, where SLURM's client is installed, the
// partitions `sinfo` offers. One line per profile starting "[name]" (the workbench reads the names
// from it), then one line of partitions.

#include "app/cli/commands.h"
#include "app/cluster/slurm.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <memory>

namespace shardscope::cli {

namespace {

std::string orDefault(const std::string& value, const char* fallback) { return value.empty() ? fallback : value; }

int runClusters(const std::string& given)
{
    const auto file = cluster::profilesFile(given);
    auto profiles = cluster::loadProfiles(file);
    if (!profiles) {
        std::cerr << "shardscope clusters: " << profiles.error().message << "\n";
        return 1;
    }
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
        const cluster::SlurmClient slurm(profile);
        const std::string on = login.empty() ? "" : " on " + slurm.where();
        if (auto client = slurm.available(); !client) {
            std::cout << "# partitions" << on << ": " << client.error().message << "\n";
            continue;
        }
        auto partitions = slurm.partitions();
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

} // namespace

void addClustersCommand(CLI::App& app, CommandContext& context)
{
    auto file = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("clusters", "List the cluster profiles (for launch --target slurm:NAME) and SLURM's "
                                               "partitions");
    cmd->add_option("--cluster_profiles,--cluster-profiles", *file, "Profiles file (default $SHARDSCOPE_HOME/clusters.ini)");
    cmd->callback([file, &context] { context.exitCode = runClusters(*file); });
}

} // namespace shardscope::cli
