#include "app/launcher/program.h"

#include "app/launcher/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace shardscope {

using Clock = std::chrono::steady_clock;

Result<ProgramResult> runProgram(const std::string& path, const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                                 std::chrono::milliseconds grace)
{
    int output[2];
    if (pipe2(output, O_CLOEXEC) != 0)
        return makeError("pipe failed: " + errnoText(errno));
    sigset_t childMask;
    sigprocmask(SIG_SETMASK, nullptr, &childMask);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1})
        sigdelset(&childMask, sig);
    std::vector<std::string> argv{path};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildFds fds;
    fds.logFd = output[1];
    auto pid = spawnChild(path, std::move(argv), environmentWith({}, {}), fds, childMask);
    close(output[1]);
    if (!pid) {
        close(output[0]);
        return pid.error();
    }
    ProgramResult result;
    auto deadline = Clock::now() + timeout;
    char buffer[4096];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0 && !result.timedOut && grace.count() > 0) {
            result.timedOut = true;
            kill(-*pid, SIGINT);
            deadline = Clock::now() + grace;
            continue;
        }
        if (left <= 0) {
            result.timedOut = true;
            kill(-*pid, SIGKILL);
            break;
        }
        pollfd polled{output[0], POLLIN, 0};
        if (poll(&polled, 1, static_cast<int>(std::min<long long>(left, 100))) <= 0)
            continue;
        const ssize_t n = read(output[0], buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        result.output.append(buffer, static_cast<std::size_t>(n));
    }
    close(output[0]);
    int status = 0;
    while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) { }
    result.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return result;
}

std::optional<std::string> findOnPath(const std::string& program)
{
    const char* path = std::getenv("PATH");
    std::string folders = path ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= folders.size()) {
        const std::size_t end = std::min(folders.find(':', start), folders.size());
        const std::string folder = folders.substr(start, end - start);
        if (!folder.empty() && access((folder + "/" + program).c_str(), X_OK) == 0)
            return folder + "/" + program;
        start = end + 1;
    }
    return std::nullopt;
}

std::filesystem::path thisExecutable(const std::string& argv0)
{
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::absolute(argv0, ec) : self;
}

} // namespace shardscope
