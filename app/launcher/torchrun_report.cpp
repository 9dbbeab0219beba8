#include "app/launcher/torchrun_report.h"

#include <cstdio>
#include <string>

namespace shardscope {

namespace {

constexpr std::string_view kFailuresHeading = "\nFailures:\n";
constexpr std::string_view kRootCauseHeading = "\nRoot Cause (first observed failure):\n";
// The fields of an entry, as torch formats them (_FAILURE_FORMAT_TEMPLATE): their exact indent
// and padding, so that a line of a traceback quoted in an entry is not taken for one.
constexpr std::string_view kRankField = "  rank      : ";
constexpr std::string_view kExitCodeField = "  exitcode  : ";

// The entries between `begin` and the report's closing border (a line of '=') or `end`.
void readEntries(std::string_view output, std::size_t begin, std::size_t end, bool rootCause, std::vector<TorchrunFailure>& found)
{
    TorchrunFailure current;
    bool haveRank = false;
    while (begin < end) {
        auto lineEnd = output.find('\n', begin);
        if (lineEnd == std::string_view::npos || lineEnd > end)
            lineEnd = end;
        const std::string_view line = output.substr(begin, lineEnd - begin);
        begin = lineEnd + 1;
        if (!line.empty() && line.front() == '=')
            break;
        if (!line.empty() && line.front() == '[') { // "[<index>]:", a new entry
            haveRank = false;
            continue;
        }
        int a = 0, b = 0;
        const std::string text(line);
        if (line.substr(0, kRankField.size()) == kRankField
            && std::sscanf(text.c_str() + kRankField.size(), "%d (local_rank: %d)", &a, &b) == 2) {
            current = TorchrunFailure{a, b, 0, 0, rootCause};
            haveRank = true;
        } else if (haveRank && line.substr(0, kExitCodeField.size()) == kExitCodeField
                   && std::sscanf(text.c_str() + kExitCodeField.size(), "%d (pid: %d)", &a, &b) == 2) {
            current.exitCode = a;
            current.pid = static_cast<pid_t>(b);
            found.push_back(current);
            haveRank = false;
        }
    }
}

} // namespace

// The report (torch/distributed/elastic/multiprocessing/errors/__init__.py, format_msg):
//   Failures:
//   [1]:
//     time      : 2026-12-05_23:05:58
//     host      : localhost
//     rank      : 0 (local_rank: 0)
//     exitcode  : -15 (pid: 26782)  (SIGTERM)
//     ...
//   ----------
//   Root Cause (first observed failure):
//   [0]:
//     ...the same fields...
//   ==========
// with "  <NO_OTHER_FAILURES>" in place of the first list when one rank failed.
TorchrunReport parseTorchrunReport(std::string_view output)
{
    TorchrunReport report;
    const auto root = output.rfind(kRootCauseHeading);
    if (root == std::string_view::npos)
        return report;
    readEntries(output, root + kRootCauseHeading.size(), output.size(), true, report.failures);
    if (report.failures.size() != 1) { // an entry cut off, or not a report of torch's
        report.failures.clear();
        return report;
    }
    const auto failures = output.rfind(kFailuresHeading, root);
    // The list belongs to this report only if no earlier report's end lies between them.
    if (failures == std::string_view::npos || output.substr(failures, root - failures).find("\n=") != std::string_view::npos)
        return report;
    readEntries(output, failures + kFailuresHeading.size(), root, false, report.failures);
    report.whole = true;
    return report;
}

} // namespace shardscope
