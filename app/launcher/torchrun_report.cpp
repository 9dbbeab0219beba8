#include "app/launcher/torchrun_report.h"

#include <cstdio>
#include <string>

namespace shardscope {

namespace {

constexpr std::string_view kFailuresHeading = "\nFailures:\n";
constexpr std::string_view kRootCauseHeading = "\nRoot Cause (first observed failure):\n";

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
std::vector<TorchrunFailure> parseTorchrunFailures(std::string_view output)
{
    const auto root = output.rfind(kRootCauseHeading);
    if (root == std::string_view::npos)
        return {};
    const auto failures = output.rfind(kFailuresHeading, root);
    if (failures == std::string_view::npos)
        return {};
    std::vector<TorchrunFailure> found;
    TorchrunFailure current;
    bool haveRank = false;
    std::size_t begin = failures + kFailuresHeading.size();
    while (begin < output.size()) {
        auto end = output.find('\n', begin);
        if (end == std::string_view::npos)
            end = output.size();
        const std::string line(output.substr(begin, end - begin));
        if (begin > root && !line.empty() && line.front() == '=')
            break; // the report's closing border
        int a = 0, b = 0;
        if (std::sscanf(line.c_str(), " rank : %d (local_rank: %d)", &a, &b) == 2) {
            current = TorchrunFailure{a, b, 0, 0, begin > root};
            haveRank = true;
        } else if (haveRank && std::sscanf(line.c_str(), " exitcode : %d (pid: %d)", &a, &b) == 2) {
            current.exitCode = a;
            current.pid = static_cast<pid_t>(b);
            found.push_back(current);
            haveRank = false;
        }
        begin = end + 1;
    }
    return found;
}

} // namespace shardscope
