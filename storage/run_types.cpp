#include "storage/run_types.h"

#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>

namespace shardscope::storage {

namespace {

constexpr std::array<std::string_view, 6> kStatusNames = {"pending", "running",   "completed",
                                                          "failed",  "cancelled", "interrupted"};

std::string readFirstLine(const std::string& path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// Field 22 of /proc/<pid>/stat (starttime, clock ticks after boot); 0 when unreadable. The
// command name (field 2) may hold spaces and parentheses, so count from the last ')'.
std::int64_t processStartTicks(std::int64_t pid)
{
    const std::string stat = readFirstLine("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos)
        return 0;
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int index = 3; fields >> field; ++index) {
        if (index == 22)
            return std::stoll(field);
    }
    return 0;
}

std::string hostName()
{
    std::array<char, 256> buffer{};
    if (gethostname(buffer.data(), buffer.size() - 1) != 0)
        return {};
    return buffer.data();
}

} // namespace

std::string_view statusName(RunStatus status) { return kStatusNames[std::size_t(status)]; }

std::optional<RunStatus> parseRunStatus(std::string_view text)
{
    for (std::size_t i = 0; i < kStatusNames.size(); ++i) {
        if (kStatusNames[i] == text)
            return RunStatus(i);
    }
    return std::nullopt;
}

bool isTerminal(RunStatus status) { return status != RunStatus::Pending && status != RunStatus::Running; }

LauncherIdentity LauncherIdentity::current()
{
    LauncherIdentity self;
    self.pid = getpid();
    self.host = hostName();
    self.bootId = readFirstLine("/proc/sys/kernel/random/boot_id");
    self.startTicks = processStartTicks(self.pid);
    return self;
}

Liveness checkLiveness(const LauncherIdentity& launcher)
{
    if (launcher.pid <= 0)
        return Liveness::Gone;
    if (launcher.host != hostName())
        return Liveness::Unknown;
    // Same host but another boot: every process of that boot is gone.
    if (!launcher.bootId.empty() && launcher.bootId != readFirstLine("/proc/sys/kernel/random/boot_id"))
        return Liveness::Gone;
    const std::int64_t ticks = processStartTicks(launcher.pid);
    if (ticks == 0)
        return Liveness::Gone; // no such process
    // A process with that pid that started at another time is a recycled pid, not our launcher.
    if (launcher.startTicks != 0 && ticks != launcher.startTicks)
        return Liveness::Gone;
    // A zombie launcher (dead, not yet reaped) is gone too.
    const std::string stat = readFirstLine("/proc/" + std::to_string(launcher.pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'Z' || stat[close + 2] == 'X'))
        return Liveness::Gone;
    return Liveness::Alive;
}

MfuPeak mfuPeakOf(const std::vector<RunDetails::Rank>& ranks)
{
    MfuPeak peak;
    for (const auto& rank : ranks) {
        peak.emulated = peak.emulated || rank.info.precisionEmulated;
        if (peak.source.empty())
            peak.source = rank.info.peakSource;
    }
    return peak;
}

} // namespace shardscope::storage
