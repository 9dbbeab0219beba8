#include "app/launcher/launcher.h"

#include "engine/common/dist_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

extern char** environ;

namespace shardscope {

namespace {

using Clock = std::chrono::steady_clock;

std::string errnoText(int error)
{
    return std::strerror(error);
}

std::string signalName(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The rank's environment: ours, minus every variable we set, plus torchrun's and the extras.
std::vector<std::string> rankEnvironment(const DistEnv& dist, const std::vector<std::string>& extra)
{
    std::vector<std::string> ours = dist.toEnvironment();
    ours.insert(ours.end(), extra.begin(), extra.end());
    std::set<std::string> names;
    for (const auto& entry : ours)
        names.insert(entry.substr(0, entry.find('=')));
    // A stale listen fd from an outer launcher must never leak into ranks that did not get one.
    names.insert(env_names::kMasterListenFd);

    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string entry(*e);
        if (!names.count(entry.substr(0, entry.find('='))))
            env.push_back(entry);
    }
    env.insert(env.end(), ours.begin(), ours.end());
    return env;
}

std::vector<char*> cStrings(std::vector<std::string>& strings)
{
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (auto& s : strings)
        out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

struct Child {
    int rank = 0;
    pid_t pid = 0;
    bool running = true;
};

// Signals the launcher handles itself; blocked in the launcher and received with sigtimedwait,
// restored to the default in each rank before exec.
sigset_t supervisedSignals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    return set;
}

// Forks and execs one rank. Returns the pid, or an error when fork or exec failed (an exec
// failure is reported back through a close-on-exec pipe, so it is seen before any rank runs).
Result<pid_t> spawnRank(const std::string& path, std::vector<std::string> argv, std::vector<std::string> env,
                        int inheritFd, const sigset_t& originalMask)
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
        if (inheritFd >= 0)
            fcntl(inheritFd, F_SETFD, 0);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE})
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

} // namespace

std::string RankExit::describe() const
{
    std::ostringstream out;
    out << "rank " << rank << " (pid " << pid << ")";
    if (stoppedByLauncher)
        out << " stopped by the launcher";
    if (signal != 0)
        out << (stoppedByLauncher ? " with " : " killed by ") << signalName(signal);
    else
        out << (stoppedByLauncher ? ", " : " ") << "exited with code " << exitCode;
    out << " after " << static_cast<int>(seconds * 1000) / 1000.0 << " s";
    return out.str();
}

std::string LaunchOutcome::failureSummary() const
{
    std::ostringstream out;
    if (rootCauseRank) {
        out << "error: rank " << *rootCauseRank << " failed first (root cause):\n";
        out << "  " << ranks[*rootCauseRank].describe() << "\n";
    } else if (cancelled) {
        out << "launch cancelled: every rank was asked to stop\n";
    } else {
        return {};
    }
    for (const auto& r : ranks) {
        if (rootCauseRank && r.rank == *rootCauseRank)
            continue;
        out << "  " << r.describe() << "\n";
    }
    return out.str();
}

Result<ListeningSocket> listenOn(const std::string& address, int port)
{
    sockaddr_in addr {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const std::string numeric = address == "localhost" ? "127.0.0.1" : address;
    if (inet_pton(AF_INET, numeric.c_str(), &addr.sin_addr) != 1)
        return makeError("main_process_ip '" + address + "' is not an IPv4 address; give a numeric address such as 127.0.0.1");

    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return makeError("socket failed: " + errnoText(errno));
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int error = errno;
        close(fd);
        if (error == EADDRINUSE)
            return makeError("port " + std::to_string(port) + " on " + address
                             + " is already in use; choose another --main_process_port, or omit it to pick a free one");
        return makeError("cannot bind " + address + ":" + std::to_string(port) + ": " + errnoText(error));
    }
    if (listen(fd, 128) != 0) {
        const int error = errno;
        close(fd);
        return makeError("listen failed: " + errnoText(error));
    }
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    return ListeningSocket{fd, ntohs(addr.sin_port)};
}

Result<LaunchOutcome> runLaunch(const LaunchOptions& options)
{
    if (options.numProcesses < 1)
        return makeError("num_processes must be at least 1 (got " + std::to_string(options.numProcesses) + ")");
    if (access(options.workerPath.c_str(), X_OK) != 0)
        return makeError("worker '" + options.workerPath + "' is not an executable file: " + errnoText(errno));

    // The launcher binds the rendezvous port itself and hands the socket to rank 0's TCPStore:
    // a taken port is reported here, before any rank starts, and nothing can steal a free one.
    auto listener = listenOn(options.masterAddr, options.masterPort);
    if (!listener)
        return listener.error();

    const sigset_t supervised = supervisedSignals();
    sigset_t originalMask;
    sigprocmask(SIG_BLOCK, &supervised, &originalMask);

    LaunchOutcome outcome;
    outcome.masterPort = listener->port;
    std::vector<Child> children;
    const auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    auto stopAll = [&](int sig) {
        for (auto& c : children)
            if (c.running)
                kill(-c.pid, sig);
    };

    for (int rank = 0; rank < options.numProcesses; ++rank) {
        DistEnv dist;
        dist.rank = rank;
        dist.localRank = rank;
        dist.worldSize = options.numProcesses;
        dist.localWorldSize = options.numProcesses;
        dist.masterAddr = options.masterAddr;
        dist.masterPort = listener->port;
        dist.masterListenFd = rank == 0 ? listener->fd : -1;

        std::vector<std::string> argv{options.workerPath};
        argv.insert(argv.end(), options.workerArgs.begin(), options.workerArgs.end());
        auto pid = spawnRank(options.workerPath, std::move(argv), rankEnvironment(dist, options.extraEnvironment),
                             dist.masterListenFd, originalMask);
        if (!pid) {
            stopAll(SIGKILL);
            for (auto& c : children)
                waitpid(c.pid, nullptr, 0);
            close(listener->fd);
            sigprocmask(SIG_SETMASK, &originalMask, nullptr);
            return pid.error();
        }
        children.push_back({rank, *pid, true});
        outcome.ranks.push_back(RankExit{rank, *pid, 0, 0, false, 0});
    }
    // Rank 0 holds its own copy of the listening socket now.
    close(listener->fd);

    int running = options.numProcesses;
    bool stopping = false;
    Clock::time_point killDeadline {};

    while (running > 0) {
        int status = 0;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (auto& c : children) {
                if (c.pid != pid || !c.running)
                    continue;
                c.running = false;
                --running;
                RankExit& exit = outcome.ranks[c.rank];
                exit.seconds = elapsed();
                if (WIFSIGNALED(status))
                    exit.signal = WTERMSIG(status);
                else if (WIFEXITED(status))
                    exit.exitCode = WEXITSTATUS(status);
                if (stopping) {
                    exit.stoppedByLauncher = true;
                } else if (exit.failed()) {
                    outcome.rootCauseRank = c.rank;
                    stopping = true;
                    killDeadline = Clock::now() + options.stopGrace;
                    stopAll(SIGTERM);
                }
            }
        }
        if (running == 0)
            break;
        if (stopping && Clock::now() >= killDeadline) {
            stopAll(SIGKILL);
            killDeadline = Clock::now() + std::chrono::hours(1);
        }

        timespec timeout {0, 50 * 1000 * 1000};
        siginfo_t info;
        const int sig = sigtimedwait(&supervised, &info, &timeout);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            if (!stopping) {
                outcome.cancelled = true;
                stopping = true;
                killDeadline = Clock::now() + options.stopGrace;
                stopAll(SIGTERM);
            } else {
                // Asked twice: stop waiting for a graceful exit.
                stopAll(SIGKILL);
            }
        }
    }
    sigprocmask(SIG_SETMASK, &originalMask, nullptr);

    if (outcome.rootCauseRank)
        outcome.exitCode = outcome.ranks[*outcome.rootCauseRank].status();
    else if (outcome.cancelled)
        outcome.exitCode = 130;
    return outcome;
}

} // namespace shardscope
