#include "app/launcher/spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace shardscope {

namespace {

std::vector<char*> cStrings(std::vector<std::string>& strings)
{
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (auto& s : strings)
        out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

} // namespace

std::string errnoText(int error) { return std::strerror(error); }

std::string signalName(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The inherited environment minus every variable in `ours` and `removed`, plus `ours`.
std::vector<std::string> environmentWith(const std::vector<std::string>& ours, std::set<std::string> removed)
{
    for (const auto& entry : ours)
        removed.insert(entry.substr(0, entry.find('=')));
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string entry(*e);
        if (!removed.count(entry.substr(0, entry.find('='))))
            env.push_back(entry);
    }
    env.insert(env.end(), ours.begin(), ours.end());
    return env;
}

// Signals the launcher handles itself; blocked in the launcher and read from a signalfd,
// restored to the default in each rank before exec.
sigset_t supervisedSignals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    return set;
}

void blockLauncherSignals()
{
    const sigset_t supervised = supervisedSignals();
    sigprocmask(SIG_BLOCK, &supervised, nullptr);
}

// Forks and execs one rank. Returns the pid, or an error when fork or exec failed (an exec
// failure is reported back through a close-on-exec pipe, so it is seen before any rank runs).
Result<pid_t> spawnChild(const std::string& path, std::vector<std::string> argv, std::vector<std::string> env,
                         const ChildFds& fds, const sigset_t& originalMask)
{
    int errorPipe[2];
    if (pipe2(errorPipe, O_CLOEXEC) != 0)
        return makeError("pipe failed: " + errnoText(errno));

    auto argvC = cStrings(argv);
    auto envC = cStrings(env);
    const pid_t parent = getpid();

    const pid_t pid = fork();
    if (pid < 0) {
        const int error = errno;
        close(errorPipe[0]);
        close(errorPipe[1]);
        return makeError("fork failed: " + errnoText(error));
    }
    if (pid == 0) {
        // Child: only async-signal-safe calls from here to exec.
        close(errorPipe[0]);
        // Its own process group, so the launcher can signal a rank and everything it started,
        // and a terminal's Ctrl-C reaches only the launcher, which then stops ranks in order.
        setpgid(0, 0);
        // No rank outlives its launcher, even one killed with SIGKILL.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        // Descriptors are close-on-exec by default; these few are meant for the rank.
        for (int fd : {fds.listenFd, fds.eventsFd})
            if (fd >= 0)
                fcntl(fd, F_SETFD, 0);
        if (fds.logFd >= 0) {
            dup2(fds.logFd, STDOUT_FILENO);
            dup2(fds.logFd, STDERR_FILENO);
        }
        struct sigaction dfl { };
        dfl.sa_handler = SIG_DFL;
        for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGPIPE})
            sigaction(sig, &dfl, nullptr);
        sigprocmask(SIG_SETMASK, &originalMask, nullptr);
        execve(path.c_str(), argvC.data(), envC.data());
        const int error = errno;
        ssize_t ignored = write(errorPipe[1], &error, sizeof error);
        (void)ignored;
        _exit(127);
    }
    close(errorPipe[1]);
    int childErrno = 0;
    ssize_t n;
    do {
        n = read(errorPipe[0], &childErrno, sizeof childErrno);
    } while (n < 0 && errno == EINTR);
    close(errorPipe[0]);
    if (n == static_cast<ssize_t>(sizeof childErrno)) {
        waitpid(pid, nullptr, 0);
        return makeError("cannot execute " + path + ": " + errnoText(childErrno));
    }
    return pid;
}

Result<pid_t> spawnDetached(const std::string& path, std::vector<std::string> argv, const std::string& logFile)
{
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0)
        return makeError("pipe failed: " + errnoText(errno));
    auto argvC = cStrings(argv);
    const pid_t child = fork();
    if (child < 0) {
        const int error = errno;
        close(report[0]);
        close(report[1]);
        return makeError("fork failed: " + errnoText(error));
    }
    if (child == 0) {
        // Only async-signal-safe calls from here to exec.
        setsid();
        const pid_t detached = fork();
        if (detached != 0) {
            (void)!write(report[1], &detached, sizeof detached);
            _exit(detached > 0 ? 0 : 1);
        }
        (void)!chdir("/");
        const int out = open(logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out >= 0) {
            dup2(out, STDOUT_FILENO);
            dup2(out, STDERR_FILENO);
        }
        if (in >= 0)
            dup2(in, STDIN_FILENO);
        // Whatever this process blocks (a launcher blocks the signals it reads), the detached
        // program handles its own.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        execv(path.c_str(), argvC.data());
        const int error = errno; // exec failed: said through the pipe (a successful exec closes it)
        (void)!write(report[1], &error, sizeof error);
        _exit(127);
    }
    close(report[1]);
    pid_t detached = -1;
    int execError = 0;
    const bool told = read(report[0], &detached, sizeof detached) == static_cast<ssize_t>(sizeof detached);
    const bool execFailed = told && read(report[0], &execError, sizeof execError) == static_cast<ssize_t>(sizeof execError);
    close(report[0]);
    waitpid(child, nullptr, 0);
    if (!told || detached <= 0)
        return makeError("fork failed");
    if (execFailed)
        return makeError("cannot execute " + path + ": " + errnoText(execError));
    return detached;
}

} // namespace shardscope
