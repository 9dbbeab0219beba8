#include "app/runs/request_file.h"

#include "engine/accelerate/yaml_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace shardscope::runs {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "shardscope-launch-request";
constexpr int kVersion = 1;

// Reads the request's keys one by one, each with the type it must have; the first that is wrong
// is the error, named with the file.
class Fields {
public:
    Fields(const json& object, std::string where) : m_object(object), m_where(std::move(where)) { }

    template <typename T>
    void read(const char* key, T& into)
    {
        m_known.insert(key);
        const auto found = m_object.find(key);
        if (found == m_object.end() || !m_error.empty())
            return;
        try {
            into = found->template get<T>();
        } catch (const json::exception&) {
            m_error = m_where + ": \"" + key + "\" is " + found->dump() + ", not " + expected<T>();
        }
    }
    // Keys this version does not know: a file of another Shardscope, which this one must not half-run.
    std::string unknownKey() const
    {
        for (const auto& [key, value] : m_object.items())
            if (!m_known.count(key))
                return key;
        return {};
    }
    const std::string& error() const { return m_error; }

private:
    template <typename T>
    static const char* expected()
    {
        if constexpr (std::is_same_v<T, std::string>)
            return "a string";
        else if constexpr (std::is_same_v<T, bool>)
            return "true or false";
        else if constexpr (std::is_arithmetic_v<T>)
            return "a number";
        else
            return "a list of strings";
    }

    const json& m_object;
    std::string m_where;
    std::set<std::string> m_known;
    std::string m_error;
};

} // namespace

std::string requestToJson(const LaunchRequest& r)
{
    json flags = json::array();
    for (const auto& flag : r.accelerateFlags)
        flags.push_back({{"name", flag.name}, {"value", flag.value ? json(*flag.value) : json(nullptr)}});
    const json out = {{"format", kFormat},
                      {"version", kVersion},
                      {"recipe", r.recipe},
                      {"script", r.script},
                      {"python", r.python},
                      {"worker", r.worker},
                      {"worker_args", r.workerArgs},
                      {"config_file", r.configFile},
                      {"accelerate_flags", flags},
                      {"num_processes", r.numProcesses},
                      {"num_machines", r.numMachines},
                      {"max_steps", r.maxSteps},
                      {"mixed_precision", r.mixedPrecision},
                      {"profile", r.profile},
                      {"tags", r.tags},
                      {"heartbeat_timeout", r.heartbeatTimeout},
                      {"max_nonfinite_steps", r.maxNonfiniteSteps},
                      {"straggler_threshold", r.stragglers.threshold},
                      {"straggler_window", r.stragglers.window},
                      {"loss_spike_factor", r.lossSpikes.factor},
                      {"loss_spike_window", r.lossSpikes.window},
                      {"rendezvous_timeout", r.rendezvousTimeout}};
    return out.dump(2) + "\n";
}

Result<LaunchRequest> requestFromJson(const std::string& text, const std::string& where)
{
    const json object = json::parse(text, nullptr, false);
    if (object.is_discarded() || !object.is_object())
        return makeError(where
                         + " is not a launch request (not a JSON object); a cluster run's request.json is written "
                           "by `shardscope launch --target slurm`");
    if (object.value("format", json()) != kFormat || object.value("version", json()) != kVersion)
        return makeError(where + " is not a launch request of this Shardscope (\"format\": \"" + kFormat
                         + "\", \"version\": " + std::to_string(kVersion) + "); submit the run again with this Shardscope");
    LaunchRequest r;
    Fields fields(object, where);
    std::string format;
    int version = 0;
    fields.read("format", format);
    fields.read("version", version);
    fields.read("recipe", r.recipe);
    fields.read("script", r.script);
    fields.read("python", r.python);
    fields.read("worker", r.worker);
    fields.read("worker_args", r.workerArgs);
    fields.read("config_file", r.configFile);
    fields.read("num_processes", r.numProcesses);
    fields.read("num_machines", r.numMachines);
    fields.read("max_steps", r.maxSteps);
    fields.read("mixed_precision", r.mixedPrecision);
    fields.read("profile", r.profile);
    fields.read("tags", r.tags);
    fields.read("heartbeat_timeout", r.heartbeatTimeout);
    fields.read("max_nonfinite_steps", r.maxNonfiniteSteps);
    fields.read("straggler_threshold", r.stragglers.threshold);
    fields.read("straggler_window", r.stragglers.window);
    fields.read("loss_spike_factor", r.lossSpikes.factor);
    fields.read("loss_spike_window", r.lossSpikes.window);
    fields.read("rendezvous_timeout", r.rendezvousTimeout);
    json flags = json::array();
    fields.read("accelerate_flags", flags);
    if (!fields.error().empty())
        return makeError(fields.error());
    if (const std::string unknown = fields.unknownKey(); !unknown.empty())
        return makeError(where + ": unknown key \"" + unknown + "\" (written by another Shardscope?); submit the run again");
    if (!flags.is_array())
        return makeError(where + ": \"accelerate_flags\" is " + flags.dump() + ", not a list");
    for (const json& flag : flags) {
        const auto name = flag.is_object() ? flag.find("name") : flag.end();
        const auto value = flag.is_object() ? flag.find("value") : flag.end();
        if (name == flag.end() || !name->is_string() || (value != flag.end() && !value->is_string() && !value->is_null()))
            return makeError(where + ": an accelerate flag is " + flag.dump() + ", not {\"name\": ..., \"value\": ... or null}");
        r.accelerateFlags.push_back({name->get<std::string>(), value != flag.end() && value->is_string()
                                                                   ? std::optional<std::string>(value->get<std::string>())
                                                                   : std::nullopt});
    }
    return r;
}

Result<void> writeRequestFile(const LaunchRequest& request, const std::filesystem::path& file)
{
    return config::writeTextFile(file.string(), requestToJson(request));
}

Result<LaunchRequest> readRequestFile(const std::filesystem::path& file)
{
    auto text = config::readTextFile(file.string());
    if (!text)
        return text.error();
    return requestFromJson(*text, file.string());
}

const std::vector<std::string>& nodePlaceOptions()
{
    static const std::vector<std::string> options = {
        "--request",  "--num_processes", "--num_machines", "--machine_rank",    "--main_process_ip",       "--main_process_port",
        "--runs_dir", "--run_name",      "--no_history",   "--checkpoints_dir", "--resume_from_checkpoint"};
    return options;
}

LaunchRequest placedAsGiven(LaunchRequest fromFile, const LaunchRequest& commandLine)
{
    if (commandLine.givenNumProcesses)
        fromFile.numProcesses = commandLine.numProcesses;
    if (commandLine.givenNumMachines)
        fromFile.numMachines = commandLine.numMachines;
    fromFile.machineRank = commandLine.machineRank;
    fromFile.mainProcessIp = commandLine.mainProcessIp;
    fromFile.mainProcessPort = commandLine.mainProcessPort;
    // The file's counts were given to the launch that wrote it (Accelerate's flags win over a config).
    fromFile.givenNumProcesses = true;
    fromFile.givenNumMachines = true;
    fromFile.givenMachineRank = commandLine.givenMachineRank;
    fromFile.givenIp = commandLine.givenIp;
    fromFile.givenPort = commandLine.givenPort;
    fromFile.runName = commandLine.runName;
    fromFile.runsDir = commandLine.runsDir;
    fromFile.noHistory = commandLine.noHistory;
    fromFile.checkpointsDir = commandLine.checkpointsDir;
    fromFile.resumeFrom = commandLine.resumeFrom;
    return fromFile;
}

} // namespace shardscope::runs
