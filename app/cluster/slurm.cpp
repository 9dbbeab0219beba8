#include "app/cluster/slurm.h"

#include "engine/common/user_file.h"

#include "app/launcher/program.h"
#include "engine/common/run_layout.h"
#include "engine/plan/script_plan.h"
#include "storage/store_paths.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

namespace shardscope::cluster {

namespace {

std::string trim(std::string s)
{
    s.erase(0, s.find_first_not_of(" \t\r\n"));
    s.erase(s.find_last_not_of(" \t\r\n") + 1);
    return s;
}

std::vector<std::string> lines(const std::string& text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!trim(line).empty())
            out.push_back(trim(line));
    return out;
}

std::vector<std::string> split(const std::string& text, char separator)
{
    std::vector<std::string> out;
    std::string field;
    std::istringstream in(text);
    while (std::getline(in, field, separator))
        out.push_back(field);
    if (!text.empty() && text.back() == separator)
        out.emplace_back();
    return out;
}

bool endedState(const std::string& state)
{
    static const std::set<std::string> kEnded = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",      "PREEMPTED",
                                                 "NODE_FAIL", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
    return kEnded.count(state.substr(0, state.find(' '))) > 0;
}

} // namespace

Result<std::optional<long>> timeLimitSeconds(const std::string& text)
{
    if (text.empty() || text == "UNLIMITED" || text == "INFINITE")
        return std::optional<long>();
    const auto bad = [&] {
        return makeError("time '" + text + "' is not a SLURM time limit (minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S)");
    };
    long days = 0;
    std::string rest = text;
    if (const auto dash = text.find('-'); dash != std::string::npos) {
        char* end = nullptr;
        days = std::strtol(text.c_str(), &end, 10);
        if (end != text.c_str() + dash || days < 0)
            return bad();
        rest = text.substr(dash + 1);
    }
    std::vector<long> parts;
    for (const auto& part : split(rest, ':')) {
        char* end = nullptr;
        const long value = std::strtol(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || value < 0)
            return bad();
        parts.push_back(value);
    }
    if (parts.empty() || parts.size() > 3)
        return bad();
    long seconds = 0;
    if (text.find('-') != std::string::npos) // D-H, D-H:M, D-H:M:S
        seconds = parts[0] * 3600 + (parts.size() > 1 ? parts[1] * 60 : 0) + (parts.size() > 2 ? parts[2] : 0);
    else if (parts.size() == 1) // M
        seconds = parts[0] * 60;
    else if (parts.size() == 2) // M:S
        seconds = parts[0] * 60 + parts[1];
    else // H:M:S
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
    return std::optional<long>(days * 86400 + seconds);
}

Result<void> checkWarningFits(const ClusterProfile& profile)
{
    auto limit = timeLimitSeconds(profile.timeLimit);
    if (!limit)
        return makeError("profile [" + profile.name + "]: " + limit.error().message);
    if (!*limit)
        return {};
    if (**limit <= profile.warningSeconds + 30)
        return makeError("profile [" + profile.name + "]: time " + profile.timeLimit + " leaves no room before its warning ("
                         + std::to_string(profile.warningSeconds)
                         + " s, which SLURM sends up to 30 s earlier still): every attempt would be told to stop as it "
                           "starts, save a checkpoint after one step and requeue; give a longer time, or a warning_seconds "
                           "under "
                         + std::to_string(std::max(1L, **limit - 30)));
    return {};
}

int gpusPerNode(const ClusterProfile& profile)
{
    int gpus = 0;
    for (const auto& line : profile.extraSbatch) {
        std::string option = line;
        for (const char* prefix : {"--gres=gpu", "--gpus-per-node="}) {
            if (option.rfind(prefix, 0) != 0)
                continue;
            const auto digits = option.find_last_of(":=");
            gpus = std::max(gpus, std::atoi(option.substr(digits + 1).c_str()));
        }
    }
    return gpus;
}

namespace {

// A line of the file as an error quotes it: a long one cut (the error is read on a terminal).
std::string quoted(const std::string& text)
{
    constexpr std::size_t kShown = 80;
    if (text.size() <= kShown)
        return "'" + text + "'";
    return "'" + text.substr(0, kShown) + "...' (" + std::to_string(text.size()) + " characters)";
}

} // namespace

Result<std::map<std::string, ClusterProfile>> parseProfiles(const std::string& text, const std::string& source)
{
    std::map<std::string, ClusterProfile> profiles;
    ClusterProfile* current = nullptr;
    int number = 0;
    std::istringstream in(text);
    for (std::string raw; std::getline(in, raw);) {
        ++number;
        const std::string line = trim(raw);
        const std::string where = source + ":" + std::to_string(number) + ": ";
        if (line.empty() || line[0] == '#' || line[0] == ';')
            continue;
        if (line.front() == '[') {
            if (line.back() != ']' || line.size() < 3)
                return makeError(where + quoted(line) + " is not a [profile] heading");
            const std::string name = trim(line.substr(1, line.size() - 2));
            current = &profiles[name];
            current->name = name;
            continue;
        }
        const auto eq = line.find('=');
        if (eq == std::string::npos)
            return makeError(where + quoted(line) + " is not key = value");
        if (!current)
            return makeError(where + "a key before the first [profile] heading; start the file with [default]");
        const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
        if (key == "partition")
            current->partition = value;
        else if (key == "time")
            current->timeLimit = value;
        else if (key == "account")
            current->account = value;
        else if (key == "qos")
            current->qos = value;
        else if (key == "shared_folder")
            current->sharedFolder = value;
        else if (key == "sbatch")
            current->extraSbatch.push_back(value);
        else if (key == "login") {
            if (value.empty() || value.front() == '-' || value.find_first_of(" \t'\"") != std::string::npos)
                return makeError(where + "login '" + value + "' is not an SSH destination (user@host or host)");
            current->login = value;
        } else if (key == "ssh_options") {
            std::istringstream words(value);
            for (std::string word; words >> word;)
                current->sshOptions.push_back(word);
        } else if (key == "warning_seconds") {
            char* end = nullptr;
            const long seconds = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || seconds < 1 || seconds > 86400)
                return makeError(where + "warning_seconds '" + value
                                 + "' is not a number of seconds (1 to 86400) before the time limit");
            current->warningSeconds = static_cast<int>(seconds);
        } else if (key == "cpus_per_task") {
            char* end = nullptr;
            const long cpus = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || cpus < 1 || cpus > 100000)
                return makeError(where + "cpus_per_task '" + value + "' is not a number of CPUs (1 or more)");
            current->cpusPerTask = static_cast<int>(cpus);
        } else {
            return makeError(where + "unknown key '" + key
                             + "'; a profile has partition, cpus_per_task, time, warning_seconds, account, qos, "
                               "shared_folder, sbatch, login and ssh_options");
        }
    }
    return profiles;
}

// The profiles file: a few profiles of a few lines each.
const UserFileKind kProfilesFile{"the cluster profiles file", 1u << 20, std::chrono::seconds(10)};

Result<std::map<std::string, ClusterProfile>> loadProfiles(const std::filesystem::path& file)
{
    std::error_code ec;
    if (!std::filesystem::exists(file, ec))
        return makeError("no cluster profiles at " + file.string()
                         + "; write one, e.g.\n  [default]\n  partition = gpu\n"
                           "  time = 02:00:00\n  shared_folder = /shared/you/shardscope");
    auto text = readUserFile(file, kProfilesFile);
    if (!text)
        return text.error();
    return parseProfiles(*text, file.string());
}

std::filesystem::path profilesFile(const std::filesystem::path& given)
{
    if (!given.empty())
        return given;
    const auto home = storage::shardscopeHome();
    return home ? *home / "clusters.ini" : std::filesystem::path("clusters.ini");
}

Result<ClusterProfile> loadProfile(const std::filesystem::path& file, const std::string& name)
{
    auto profiles = loadProfiles(file);
    if (!profiles)
        return profiles.error();
    const auto it = profiles->find(name);
    if (it == profiles->end()) {
        std::string names;
        for (const auto& [n, p] : *profiles)
            names += (names.empty() ? "" : ", ") + n;
        return makeError(file.string() + " has no profile [" + name + "]" + (names.empty() ? "" : "; it has " + names));
    }
    const std::string& folder = it->second.sharedFolder;
    if (folder.empty())
        return makeError("profile [" + name + "] of " + file.string()
                         + " names no shared_folder: the folder this machine and every node see, where the run goes");
    // The nodes' launchers find the run by this path, and the batch script's #SBATCH lines carry
    // it (SLURM's --output): an absolute path that those lines hold as it is.
    if (!std::filesystem::path(folder).is_absolute())
        return makeError("profile [" + name + "] of " + file.string() + ": shared_folder " + folder
                         + " is relative; give the absolute path every node mounts it at (e.g. /shared/you/shardscope)");
    if (const auto bad = folder.find_first_of(" \t\n\r\"'\\%$`"); bad != std::string::npos)
        return makeError("profile [" + name + "] of " + file.string() + ": shared_folder " + folder + " holds '"
                         + (folder[bad] == '\n' ? std::string("\\n") : std::string(1, folder[bad]))
                         + "', which a batch script's #SBATCH lines cannot carry; use a folder whose path has none of "
                           "space, quotes, backslash, %, $ or `");
    return it->second;
}

std::string formatProfile(const ClusterProfile& p)
{
    std::ostringstream out;
    out << "[" << p.name << "]\n";
    const auto key = [&](const char* name, const std::string& value) {
        if (!value.empty())
            out << name << " = " << value << "\n";
    };
    key("partition", p.partition);
    key("time", p.timeLimit);
    if (p.warningSeconds != ClusterProfile{}.warningSeconds)
        key("warning_seconds", std::to_string(p.warningSeconds));
    key("account", p.account);
    key("qos", p.qos);
    if (p.cpusPerTask > 0)
        key("cpus_per_task", std::to_string(p.cpusPerTask));
    for (const auto& line : p.extraSbatch)
        key("sbatch", line);
    key("shared_folder", p.sharedFolder);
    key("login", p.login);
    std::string options;
    for (const auto& option : p.sshOptions)
        options += (options.empty() ? "" : " ") + option;
    key("ssh_options", options);
    return out.str();
}

std::string replaceProfileSection(const std::string& text, const std::string& name, const std::string& section)
{
    // Lines, each with its end; the section runs from its heading to the next heading (or the end).
    std::vector<std::string> all;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        const std::size_t next = end == std::string::npos ? text.size() : end + 1;
        all.push_back(text.substr(at, next - at));
        at = next;
    }
    const auto heading = [](const std::string& line) -> std::optional<std::string> {
        const std::string t = trim(line);
        if (t.size() < 3 || t.front() != '[' || t.back() != ']')
            return std::nullopt;
        return trim(t.substr(1, t.size() - 2));
    };
    std::size_t begin = all.size(), end = all.size();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const auto h = heading(all[i]);
        if (!h)
            continue;
        if (begin == all.size() && *h == name)
            begin = i;
        else if (begin != all.size()) {
            end = i;
            break;
        }
    }
    std::string out;
    if (begin == all.size()) { // a new section, after a blank line
        out = text;
        if (section.empty())
            return out;
        if (!out.empty() && out.back() != '\n')
            out += '\n';
        return out + (out.empty() ? "" : "\n") + section;
    }
    // Blank and comment lines just before the next heading stay with it (they are usually its).
    std::size_t kept = end;
    while (kept > begin + 1 && (trim(all[kept - 1]).empty() || trim(all[kept - 1])[0] == '#' || trim(all[kept - 1])[0] == ';'))
        --kept;
    for (std::size_t i = 0; i < begin; ++i)
        out += all[i];
    out += section;
    for (std::size_t i = kept; i < all.size(); ++i)
        out += all[i];
    return out;
}

Result<void> saveProfile(const std::filesystem::path& file, const ClusterProfile& profile, bool remove)
{
    if (trim(profile.name).empty() || profile.name.find_first_of("[]\n") != std::string::npos)
        return makeError("a profile's name is a word (no brackets, not empty): '" + profile.name + "'");
    std::string before;
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
        auto text = readUserFile(file, kProfilesFile);
        if (!text)
            return makeError("not saved: " + text.error().message);
        before = std::move(*text);
    }
    const std::string after = replaceProfileSection(before, profile.name, remove ? std::string() : formatProfile(profile));
    auto parsed = parseProfiles(after, file.string());
    if (!parsed)
        return makeError("not saved, the file would not load: " + parsed.error().message);
    if (!remove && !parsed->count(profile.name))
        return makeError("not saved: [" + profile.name + "] would not read back");
    std::filesystem::create_directories(file.parent_path().empty() ? "." : file.parent_path(), ec);
    if (!before.empty())
        std::ofstream(file.string() + ".previous", std::ios::trunc) << before;
    const std::string partial = file.string() + ".partial";
    {
        std::ofstream out(partial, std::ios::trunc);
        out << after;
        if (!out.flush())
            return makeError("cannot write " + partial);
    }
    std::filesystem::rename(partial, file, ec);
    if (ec)
        return makeError("cannot write " + file.string() + ": " + ec.message());
    return {};
}

std::filesystem::path attemptDir(const std::filesystem::path& runDir, int attempt)
{
    return RunLayout(runDir).attemptDir(attempt);
}

std::filesystem::path nodeRunDir(const std::filesystem::path& runDir, int attempt, int node)
{
    return RunLayout(runDir).nodeDir(attempt, node);
}

Result<std::vector<Partition>> parsePartitions(const std::string& text)
{
    std::vector<Partition> out;
    std::string noise; // lines that are no partition (a login shell's warning over SSH)
    for (const auto& line : lines(text)) {
        const auto f = split(line, '|');
        if (f.size() < 4) {
            noise += noise.empty() ? line : "; " + line;
            continue;
        }
        Partition p;
        p.name = f[0];
        if (!p.name.empty() && p.name.back() == '*') {
            p.isDefault = true;
            p.name.pop_back();
        }
        p.up = f[1] == "up";
        p.nodes = std::atoi(f[2].c_str());
        p.cpusPerNode = std::atoi(f[3].c_str()); // "1" or "1+" (mixed nodes: the smallest)
        out.push_back(p);
    }
    if (out.empty() && !noise.empty())
        return makeError("sinfo printed '" + noise + "', not partition|avail|nodes|cpus");
    return out;
}

bool JobState::ended() const { return endedState(state); }

std::optional<JobState> parseSqueueLine(const std::string& text)
{
    const auto all = lines(text);
    if (all.empty())
        return std::nullopt;
    const auto f = split(all.front(), '|');
    if (f.size() < 3 || f[0].empty())
        return std::nullopt;
    return JobState{f[0], f[1], f[2], {}};
}

std::map<std::string, std::string> parseScontrolRecord(const std::string& text)
{
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    for (std::string word; in >> word;)
        if (const auto eq = word.find('='); eq != std::string::npos && eq > 0)
            out.emplace(word.substr(0, eq), word.substr(eq + 1));
    return out;
}

std::string lostNodesOf(const std::string& sinfoLines)
{
    std::string lost;
    std::set<std::string> seen; // a node in two partitions is listed twice
    std::istringstream in(sinfoLines);
    for (std::string line; std::getline(in, line);) {
        const auto bar = line.find('|'), second = line.find('|', bar == std::string::npos ? bar : bar + 1);
        if (bar == std::string::npos || second == std::string::npos)
            continue;
        const std::string node = trim(line.substr(0, bar)), state = trim(line.substr(bar + 1, second - bar - 1));
        const std::string reason = trim(line.substr(second + 1));
        const bool gone = state.find("down") != std::string::npos || state.find("fail") != std::string::npos
                          || (!state.empty() && state.back() == '*');
        if (!gone || !seen.insert(node).second)
            continue;
        lost += (lost.empty() ? "" : ", ") + node + " (" + state + (reason.empty() || reason == "none" ? "" : ": " + reason)
                + ")";
    }
    return lost;
}

std::string pendingAdvice(const std::string& reason, std::int64_t jobId)
{
    static const std::map<std::string, std::string> kAdvice = {
        {"None", "the scheduler has not placed it yet; it looks again on its next pass (seconds)"},
        {"Resources", "the nodes it asks for are busy; it starts when they are free"},
        {"Priority", "jobs of higher priority come first; it starts after them"},
        {"QOSMaxJobsPerUserLimit", "you run as many jobs as your QoS allows; it starts when one of yours ends"},
        {"AssocMaxJobsLimit", "your account runs as many jobs as it may; it starts when one of them ends"},
        {"ReqNodeNotAvail", "a node it needs is down, drained or reserved; see `sinfo -R`, or ask for other nodes"},
        {"PartitionNodeLimit",
         "it asks for more nodes than the partition allows or has; lower num_machines, or choose another partition"},
        {"PartitionTimeLimit", "its time limit is over the partition's; lower the profile's time"},
        {"BeginTime", "held until its start time (a requeued job waits out the credential lifetime)"},
        {"Dependency", "it waits for the jobs it depends on"},
        {"JobHeldUser", "held by you: `scontrol release <job id>` lets it start"},
        {"JobHeldAdmin", "held by an administrator"},
        {"PartitionDown", "its partition is down (an administrator's doing); it starts when the partition is up again, or "
                          "choose another partition in the profile"},
        {"PartitionInactive", "its partition is inactive; it starts when the partition is up again, or choose another "
                              "partition in the profile"},
        {"NodeDown", "a node it needs is down; it starts when SLURM has nodes for it again"},
    };
    const std::string id = jobId > 0 ? std::to_string(jobId) : std::string("<job id>");
    const auto it = kAdvice.find(reason);
    std::string advice = it != kAdvice.end() ? it->second : "SLURM's reason " + reason + "; `squeue -j " + id + " -l` says more";
    if (const auto at = advice.find("<job id>"); at != std::string::npos)
        advice.replace(at, 8, id);
    return advice;
}

Result<std::int64_t> parseJobId(const std::string& text)
{
    const auto all = lines(text);
    const std::string last = all.empty() ? std::string() : all.back();
    const std::string id = last.substr(0, last.find(';'));
    char* end = nullptr;
    const long long value = std::strtoll(id.c_str(), &end, 10);
    if (id.empty() || *end != '\0' || value <= 0)
        return makeError("sbatch did not print a job id: " + text);
    return static_cast<std::int64_t>(value);
}

SlurmClient::SlurmClient(const ClusterProfile& profile) : m_login(profile.login), m_sshOptions(profile.sshOptions) { }

std::string SlurmClient::where() const { return m_login.empty() ? "this machine" : "login node " + m_login; }

Result<void> SlurmClient::available() const
{
    if (!m_login.empty()) {
        if (!findOnPath("ssh"))
            return makeError("ssh is not on PATH: the profile runs SLURM's commands on " + m_login
                             + " over SSH (Debian: apt-get install openssh-client)");
        if (auto sbatch = run("sbatch", {"--version"}); !sbatch)
            return sbatch.error();
        return {};
    }
    for (const char* program : {"sbatch", "squeue", "scontrol", "sinfo"})
        if (!findOnPath(program))
            return makeError(std::string("no SLURM client on this machine: ") + program
                             + " is not on PATH; install SLURM's client tools (Debian: slurm-client), run on the "
                               "cluster's login node, or give the profile that login node (login = user@host) to run "
                               "them there over SSH");
    return {};
}

Result<std::string> SlurmClient::run(const std::string& program, const std::vector<std::string>& args) const
{
    if (m_login.empty()) {
        const auto path = findOnPath(program);
        if (!path)
            return makeError(program + " is not on PATH (SLURM's client tools)");
        auto ran = runProgram(*path, args, std::chrono::seconds(60));
        if (!ran)
            return ran.error();
        if (ran->timedOut)
            return makeError(program + " did not answer within 60 s; is the SLURM controller up?");
        if (ran->status != 0)
            return makeError(program + " failed (exit " + std::to_string(ran->status) + "): " + trim(ran->output));
        return ran->output;
    }
    const auto ssh = findOnPath("ssh");
    if (!ssh)
        return makeError("ssh is not on PATH (the profile runs SLURM's commands on " + m_login + ")");
    std::string command = program;
    for (const auto& arg : args)
        command += " " + config::shellQuote(arg);
    // No password prompt (a follower runs unattended), no terminal input (-n), no host-key chatter
    // mixed into the output that is parsed; the user's options (port, key) after ours.
    std::vector<std::string> sshArgs{"-n", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "LogLevel=ERROR"};
    sshArgs.insert(sshArgs.end(), m_sshOptions.begin(), m_sshOptions.end());
    sshArgs.insert(sshArgs.end(), {m_login, "--", command});
    auto ran = runProgram(*ssh, sshArgs, std::chrono::seconds(90));
    if (!ran)
        return ran.error();
    if (ran->timedOut)
        return makeError(program + " on " + m_login + " did not answer within 90 s (over SSH); is the login node up?");
    if (ran->status == 255)
        return makeError("ssh to " + m_login + " failed: " + trim(ran->output)
                         + " (it must log in without a prompt: a key in ssh-agent, or ssh_options = -i KEY)");
    if (ran->status == 127)
        return makeError(program + " is not on " + m_login + "'s PATH (SLURM's client tools on the login node)");
    if (ran->status != 0)
        return makeError(program + " on " + m_login + " failed (exit " + std::to_string(ran->status) + "): " + trim(ran->output));
    return ran->output;
}

Result<std::vector<Partition>> SlurmClient::partitions() const
{
    auto text = run("sinfo", {"-h", "-o", "%P|%a|%D|%c"});
    if (!text)
        return text.error();
    return parsePartitions(*text);
}

Result<void> SlurmClient::testSubmit(const std::filesystem::path& script) const
{
    auto text = run("sbatch", {"--test-only", script.string()});
    if (!text)
        return text.error();
    return {};
}

Result<std::int64_t> SlurmClient::submit(const std::filesystem::path& script) const
{
    auto text = run("sbatch", {"--parsable", script.string()});
    if (!text)
        return text.error();
    return parseJobId(*text);
}

Result<void> SlurmClient::cancel(std::int64_t jobId) const
{
    auto text = run("scancel", {std::to_string(jobId)});
    if (!text)
        return text.error();
    return {};
}

Result<std::vector<std::string>> SlurmClient::hostnames(const std::string& nodeList) const
{
    auto text = run("scontrol", {"show", "hostnames", nodeList});
    if (!text)
        return text.error();
    return lines(*text);
}

Result<bool> SlurmClient::knowsJob(std::int64_t jobId) const
{
    auto record = run("scontrol", {"-o", "show", "job", std::to_string(jobId)});
    if (record)
        return true;
    if (record.error().message.find("Invalid job id") != std::string::npos)
        return false;
    return record.error();
}

Result<std::string> SlurmClient::lostNodes(const std::string& nodeList) const
{
    auto lines = run("sinfo", {"-h", "-N", "-n", nodeList, "-o", "%N|%T|%E"});
    if (!lines)
        return lines.error();
    return lostNodesOf(*lines);
}

Result<JobState> SlurmClient::state(std::int64_t jobId) const
{
    const std::string id = std::to_string(jobId);
    if (auto queued = run("squeue", {"-h", "-j", id, "-o", "%T|%r|%N"}))
        if (auto job = parseSqueueLine(*queued); job && !job->ended())
            return *job;
    auto record = run("scontrol", {"-o", "show", "job", id});
    if (!record)
        return makeError("job " + id + " is no longer known to SLURM: " + record.error().message);
    const auto fields = parseScontrolRecord(*record);
    auto field = [&](const char* key) {
        const auto it = fields.find(key);
        return it == fields.end() ? std::string() : it->second;
    };
    return JobState{field("JobState"), field("Reason"), field("NodeList"), field("ExitCode")};
}

} // namespace shardscope::cluster
