#include "storage/run_outcome.h"

#include "engine/common/user_file.h"

#include "engine/common/run_layout.h"
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace shardscope::storage {

namespace {

constexpr std::size_t kReservedBytes = 4096;

std::string pathOf(const std::filesystem::path& runDir) { return RunLayout(runDir).outcomeFile().string(); }

Result<void> writeAt(int fd, const std::string& bytes, const std::string& path)
{
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return makeError("cannot write " + path + ": " + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

// Writes `bytes` at the start of the file, without truncating it, and syncs it.
Result<void> writeInPlace(const std::string& path, const std::string& bytes)
{
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return makeError("cannot open " + path + ": " + std::strerror(errno));
    auto written = writeAt(fd, bytes, path);
    if (written && ::fsync(fd) != 0)
        written = makeError("cannot sync " + path + ": " + std::strerror(errno));
    ::close(fd);
    return written;
}

} // namespace

Result<void> reserveOutcomeFile(const std::filesystem::path& runDir)
{
    return writeInPlace(pathOf(runDir), std::string(kReservedBytes, ' '));
}

Result<void> writeOutcomeFile(const std::filesystem::path& runDir, const RunEnd& end)
{
    nlohmann::json j = {{"status", std::string(statusName(end.status))}, {"error", end.error}};
    j["exit_code"] = end.exitCode ? nlohmann::json(*end.exitCode) : nlohmann::json(nullptr);
    j["root_cause_rank"] = end.rootCauseRank ? nlohmann::json(*end.rootCauseRank) : nlohmann::json(nullptr);
    j["rank_exit_codes"] = nlohmann::json::array();
    for (const auto& [rank, code] : end.rankExitCodes)
        j["rank_exit_codes"].push_back({rank, code});
    std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    // A long error text is cut to what the reservation holds (the history keeps it whole).
    if (text.size() + 1 > kReservedBytes) {
        j["error"] = end.error.substr(0, kReservedBytes / 2) + " ...";
        text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    text += '\n';
    if (text.size() < kReservedBytes)
        text.append(kReservedBytes - text.size(), ' ');
    return writeInPlace(pathOf(runDir), text);
}

std::optional<RunEnd> readOutcomeFile(const std::filesystem::path& runDir)
{
    // A run folder's file: a FIFO or a device in its place is no outcome (and must not block).
    auto read = readUserFile(pathOf(runDir), {"a run's outcome.json", 1u << 20, std::chrono::seconds(10)});
    if (!read)
        return std::nullopt;
    const std::string& text = *read;
    if (text.find_first_not_of(" \n") == std::string::npos)
        return std::nullopt; // reserved, never written: the launcher died before the end
    try {
        const auto j = nlohmann::json::parse(text);
        RunEnd end;
        const auto status = parseRunStatus(j.at("status").get<std::string>());
        if (!status || !isTerminal(*status) || *status == RunStatus::Interrupted)
            return std::nullopt;
        end.status = *status;
        end.error = j.value("error", std::string());
        if (j.contains("exit_code") && j["exit_code"].is_number_integer())
            end.exitCode = j["exit_code"].get<int>();
        if (j.contains("root_cause_rank") && j["root_cause_rank"].is_number_integer())
            end.rootCauseRank = j["root_cause_rank"].get<int>();
        if (j.contains("rank_exit_codes") && j["rank_exit_codes"].is_array())
            for (const auto& pair : j["rank_exit_codes"])
                if (pair.is_array() && pair.size() == 2 && pair[0].is_number_integer() && pair[1].is_number_integer())
                    end.rankExitCodes.emplace_back(pair[0].get<int>(), pair[1].get<int>());
        return end;
    } catch (const std::exception&) {
        return std::nullopt; // a damaged file: the run is interrupted, as without one
    }
}

} // namespace shardscope::storage
