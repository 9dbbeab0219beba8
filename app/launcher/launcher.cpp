#include "app/launcher/launcher.h"
#include "engine/common/wall_clock.h"
#include "app/launcher/program.h"
#include "app/launcher/rendezvous.h"
#include "app/launcher/spawn.h"
#include "app/launcher/torchrun_report.h"

#include "engine/common/dist_env.h"
#include "engine/common/run_layout.h"
#include "engine/protocol/events.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

namespace shardscope {

namespace {

using Clock = std::chrono::steady_clock;

// The rank's environment: ours, minus every variable we set, plus torchrun's and the extras.
std::vector<std::string> rankEnvironment(const DistEnv& dist, const std::vector<std::string>& extra)
{
    std::vector<std::string> ours = dist.toEnvironment();
    ours.insert(ours.end(), extra.begin(), extra.end());
    // A stale listen fd from an outer launcher must never leak into ranks that did not get one.
    return environmentWith(ours, {env_names::kMasterListenFd});
}

// A launcher that starts the ranks itself (accelerate launch) sets torchrun's variables for them:
// none may leak in from an outer launch, nor an events descriptor that it would not own.
std::vector<std::string> launcherEnvironment(const std::vector<std::string>& extra)
{
    std::set<std::string> removed{env_names::kMasterListenFd, "SHARDSCOPE_EVENTS_FD", "TORCHELASTIC_RUN_ID"};
    for (const auto& entry : DistEnv{}.toEnvironment())
        removed.insert(entry.substr(0, entry.find('=')));
    return environmentWith(extra, removed);
}

struct Child {
    int rank = 0;
    pid_t pid = 0;
    bool running = true;
};

} // namespace

std::chrono::milliseconds heartbeatInterval(std::chrono::milliseconds hangTimeout)
{
    return std::chrono::milliseconds(std::clamp<std::int64_t>(hangTimeout.count() / 4, 100, 2000));
}

std::string RankExit::describe() const
{
    std::ostringstream out;
    out << "rank " << rank;
    if (pid != 0)
        out << " (pid " << pid << ")";
    if (hung)
        out << " hung (" << (hungDetail.empty() ? std::string("no heartbeat within the timeout") : hungDetail) << ") and was";
    if (stoppedByLauncher || hung)
        out << " stopped by " << (stoppedByTorchrun ? "torchrun" : "the launcher");
    if (signal != 0)
        out << (stoppedByLauncher || hung ? " with " : " killed by ") << signalName(signal);
    else
        out << (stoppedByLauncher || hung ? ", " : " ") << "exited with code " << exitCode;
    out << " after " << static_cast<int>(seconds * 1000) / 1000.0 << " s";
    return out.str();
}

std::string LaunchOutcome::failureSummary() const
{
    std::ostringstream out;
    if (!abortReason.empty() && !rootCauseRank && !cancelled) {
        out << "error: " << abortReason << "; its ranks were stopped:\n";
    } else if (rootCauseRank && rootCauseStandsIn) {
        out << "error: accelerate launch failed, and no report of torchrun's names the rank that did (see " << kLauncherLogName
            << "); rank " << *rootCauseRank << " stands for it:\n";
    } else if (rootCauseRank) {
        out << "error: rank " << *rootCauseRank << " failed first (root cause):\n";
        for (const auto& r : ranks)
            if (r.rank == *rootCauseRank)
                out << "  " << r.describe() << "\n";
    } else if (cancelled) {
        out << "launch cancelled: every rank was asked to stop\n";
    } else {
        return {};
    }
    if (!reason.empty())
        out << "  " << reason << "\n";
    for (const auto& r : ranks) {
        if (rootCauseRank && r.rank == *rootCauseRank)
            continue;
        out << "  " << r.describe() << "\n";
    }
    return out.str();
}

void LaunchOutcome::blameFirstOwnError(const std::vector<ReportedError>& errors,
                                       const std::function<bool(int rank)>& leftUnfinished)
{
    if (!rootCauseRank || cancelled)
        return;
    for (const auto& r : ranks)
        if (r.rank == *rootCauseRank && r.hung)
            return; // the launcher saw it hang: that is the cause
    std::optional<int> first;
    double firstTime = 0;
    // At equal times (a script run's ranks all exit when its rank launcher does) the root cause
    // already named stays.
    auto consider = [&](int rank, double time) {
        if (!first || time < firstTime || (time == firstTime && rank == *rootCauseRank)) {
            first = rank;
            firstTime = time;
        }
    };
    for (const auto& e : errors)
        if (e.kind != protocol::kPeerLostKind)
            consider(e.rank, e.time);
    for (const auto& r : ranks) {
        const bool reported = std::any_of(errors.begin(), errors.end(), [&](const ReportedError& e) { return e.rank == r.rank; });
        const bool quitEarly = !r.failed() && leftUnfinished && leftUnfinished(r.rank);
        if ((r.failed() || quitEarly) && !r.stoppedByLauncher && !reported)
            consider(r.rank, r.exitedAt);
    }
    if (!first || *first == *rootCauseRank)
        return;
    rootCauseRank = first;
    rootCauseStandsIn = false;
    for (const auto& r : ranks)
        if (r.rank == *first) {
            exitCode = r.status() != 0 ? r.status() : 1;
            if (!r.failed())
                addReason("rank " + std::to_string(r.rank)
                          + " exited with code 0 before the end of the run and the others lost it: it left early");
        }
}

namespace {

Result<void> checkLaunchOptions(const LaunchOptions& options)
{
    if (options.numProcesses < 1)
        return makeError("num_processes must be at least 1 (got " + std::to_string(options.numProcesses) + ")");
    if (access(options.workerPath.c_str(), X_OK) != 0)
        return makeError("worker '" + options.workerPath + "' is not an executable file: " + errnoText(errno));
    if (options.numMachines < 1 || options.machineRank < 0 || options.machineRank >= options.numMachines)
        return makeError("machine_rank " + std::to_string(options.machineRank) + " is not in 0.."
                         + std::to_string(options.numMachines - 1) + " (num_machines " + std::to_string(options.numMachines)
                         + ")");
    if (options.numMachines > 1 && options.masterPort == 0)
        return makeError("a job over " + std::to_string(options.numMachines)
                         + " machines needs --main_process_port: every machine's launcher must know where machine 0 listens");
    // The rendezvous store has no authentication: it listens beyond loopback only for a job over
    // several machines, which the user asked for with num_machines.
    if (options.numMachines == 1 && !isLoopbackHost(options.masterAddr))
        return makeError("main_process_ip " + options.masterAddr
                         + " would open the rendezvous store, which has no "
                           "authentication, to the network for a run on this machine alone; leave main_process_ip unset "
                           "(127.0.0.1), or give --num_machines N (and the same address on every machine) for a job over "
                           "several machines");
    return {};
}

// One launch on this machine: starts its ranks, then waits for them while reading their event
// lines, and stops them all (SIGINT, then SIGKILL after the grace) when one fails, one hangs, or
// the user asks (Ctrl-C, SIGHUP; twice: SIGKILL at once; SIGTERM and SIGUSR1 save a checkpoint first). Signals arrive through a
// signalfd, so one poll() waits for them and for event lines alike.
class Supervisor {
public:
    explicit Supervisor(const LaunchOptions& options);
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    // Starts every rank; on a failure stops and reaps those already started.
    Result<void> start(ListeningSocket listener);
    // Returns when every rank has exited and every events pipe is closed.
    void supervise();
    LaunchOutcome outcome();

private:
    Result<void> startRank(int rank, const ListeningSocket& listener);
    Result<void> startRankLauncher(); // LaunchOptions::launcherStartsRanks
    Result<void> openEventPipes(); // the named pipes of a script run's ranks
    std::size_t index(int localRank) const { return static_cast<std::size_t>(localRank); }
    bool rankRunning(int localRank) const;
    void recordExit(RankExit& exit, int status);
    void onRankLauncherExit(pid_t pid, int status);
    void applyTorchrunReport();
    void stopOrphans(int sig);
    void stopAll(int sig);
    void beginStopping(); // the cancel signal now, SIGKILL after the grace
    void beginCheckpointStop(int sig); // SIGUSR1 to the ranks now, SIGKILL after the checkpoint's grace
    // What tells the ranks to stop after their step: the engine's take SIGINT (SIGTERM saves a
    // checkpoint first); torchrun, a script run's, passes SIGTERM on to its ranks.
    int cancelSignal() const { return m_options.launcherStartsRanks ? SIGTERM : SIGINT; }
    void reapExited();
    void checkHeartbeats();
    void checkStuckRank();
    void stopForHang(); // LaunchOptions::onHang, then beginStopping
    void pollOnce();
    void readSignals();
    bool drainEvents(int localRank); // false at EOF
    void drainOutput();
    void routeOutputLine(std::string_view line);
    long openEventFds() const;
    double elapsed() const { return std::chrono::duration<double>(Clock::now() - m_start).count(); }

    const LaunchOptions& m_options;
    sigset_t m_originalMask{};
    sigset_t m_rankMask{};
    int m_signalFd = -1;
    LaunchOutcome m_outcome;
    std::vector<Child> m_children;
    std::vector<int> m_eventReadFds;
    std::vector<std::string> m_partialLines;
    // Heartbeat: the last time each rank sent anything on its events pipe, and whether it has yet.
    std::vector<Clock::time_point> m_lastHeard;
    std::vector<bool> m_heardFrom;
    Clock::time_point m_start = Clock::now();
    // A script run: the write ends the launcher keeps open on the ranks' named pipes (so that a
    // rank not yet writing is not an end of file), the pipe of the rank launcher's output, and the
    // logs it is split into (per local rank, then launcher.log last).
    std::vector<int> m_pipeKeepers;
    int m_outputFd = -1;
    std::string m_outputPartial;
    std::vector<int> m_logFds;
    // The end of the rank launcher's own output (launcher.log), where torchrun's failure report is.
    std::string m_launcherOutputTail;
    int m_running = 0;
    bool m_stopping = false;
    Clock::time_point m_killDeadline{};
};

Supervisor::Supervisor(const LaunchOptions& options)
    : m_options(options), m_eventReadFds(index(options.numProcesses), -1), m_partialLines(index(options.numProcesses))
{
    const sigset_t supervised = supervisedSignals();
    sigprocmask(SIG_BLOCK, &supervised, &m_originalMask);
    // Ranks start with the caller's mask minus the supervised signals, which they must receive
    // (SIGTERM stops them) even when the caller had blocked them already (blockLauncherSignals).
    m_rankMask = m_originalMask;
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1})
        sigdelset(&m_rankMask, sig);
    // The engine's ranks start with SIGTERM and SIGUSR1 blocked and unblock them once they catch
    // them (app/worker): a time limit's warning that comes as a rank starts (SLURM may send it at
    // once) waits for the handler instead of killing the rank.
    if (!options.launcherStartsRanks) {
        sigaddset(&m_rankMask, SIGTERM);
        sigaddset(&m_rankMask, SIGUSR1);
    }
    m_signalFd = signalfd(-1, &supervised, SFD_CLOEXEC | SFD_NONBLOCK);
}

Supervisor::~Supervisor()
{
    for (const auto& fds : {m_eventReadFds, m_pipeKeepers, m_logFds})
        for (int fd : fds)
            if (fd >= 0)
                close(fd);
    if (m_outputFd >= 0)
        close(m_outputFd);
    if (!m_options.eventPipeDirectory.empty() && m_options.launcherStartsRanks) {
        std::error_code ignored;
        std::filesystem::remove_all(m_options.eventPipeDirectory, ignored);
    }
    if (m_signalFd >= 0)
        close(m_signalFd);
    sigprocmask(SIG_SETMASK, &m_originalMask, nullptr);
}

Result<void> Supervisor::start(ListeningSocket listener)
{
    m_outcome.masterPort = listener.port;
    if (m_options.launcherStartsRanks) {
        if (auto started = startRankLauncher(); !started)
            return started.error();
        m_running = 1;
        m_lastHeard.assign(index(m_options.numProcesses), Clock::now());
        m_heardFrom.assign(index(m_options.numProcesses), false);
        return {};
    }
    for (int rank = 0; rank < m_options.numProcesses; ++rank) {
        if (auto started = startRank(rank, listener); !started) {
            stopAll(SIGKILL);
            for (auto& c : m_children)
                waitpid(c.pid, nullptr, 0);
            if (listener.fd >= 0)
                close(listener.fd);
            return started.error();
        }
    }
    // Rank 0 holds its own copy of the listening socket now.
    if (listener.fd >= 0)
        close(listener.fd);
    m_running = m_options.numProcesses;
    m_lastHeard.assign(index(m_options.numProcesses), Clock::now());
    m_heardFrom.assign(index(m_options.numProcesses), false);
    return {};
}

Result<void> Supervisor::startRank(int rank, const ListeningSocket& listener)
{
    DistEnv dist;
    dist.rank = m_options.machineRank * m_options.numProcesses + rank;
    dist.localRank = rank;
    dist.worldSize = m_options.numMachines * m_options.numProcesses;
    dist.localWorldSize = m_options.numProcesses;
    dist.groupRank = m_options.machineRank;
    dist.masterAddr = m_options.masterAddr;
    dist.masterPort = listener.port;
    dist.masterListenFd = dist.rank == 0 ? listener.fd : -1;

    ChildFds fds;
    fds.listenFd = dist.masterListenFd;
    std::vector<std::string> extra = m_options.extraEnvironment;
    if (m_options.hangTimeout.count() > 0 && m_options.onEventLine) {
        extra.push_back("SHARDSCOPE_HEARTBEAT_MS=" + std::to_string(heartbeatInterval(m_options.hangTimeout).count()));
    }
    int eventsPipe[2] = {-1, -1};
    if (m_options.onEventLine) {
        if (pipe2(eventsPipe, O_CLOEXEC) != 0)
            return makeError("pipe failed: " + errnoText(errno));
        fds.eventsFd = eventsPipe[1];
        extra.push_back("SHARDSCOPE_EVENTS_FD=" + std::to_string(eventsPipe[1]));
    }
    // The launcher keeps only the read end of the events pipe, so a rank's exit closes it.
    m_eventReadFds[index(rank)] = eventsPipe[0];
    auto closeRankEnds = [&] {
        if (eventsPipe[1] >= 0)
            close(eventsPipe[1]);
        if (fds.logFd >= 0)
            close(fds.logFd);
    };
    if (!m_options.logDirectory.empty()) {
        const std::string logPath = (std::filesystem::path(m_options.logDirectory) / RunLayout::rankLogName(rank)).string();
        fds.logFd = open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fds.logFd < 0) {
            const int error = errno;
            closeRankEnds();
            return makeError("cannot create the log file " + logPath + ": " + errnoText(error));
        }
    }
    std::vector<std::string> argv{m_options.workerPath};
    argv.insert(argv.end(), m_options.workerArgs.begin(), m_options.workerArgs.end());
    auto pid = spawnChild(m_options.workerPath, std::move(argv), rankEnvironment(dist, extra), fds, m_rankMask);
    closeRankEnds();
    if (!pid)
        return pid.error();
    m_children.push_back({rank, *pid, true});
    RankExit started;
    started.rank = dist.rank;
    started.pid = *pid;
    m_outcome.ranks.push_back(started);
    return {};
}

Result<void> Supervisor::openEventPipes()
{
    const std::filesystem::path dir(m_options.eventPipeDirectory);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        return makeError("cannot create the folder of the ranks' event pipes " + dir.string() + ": " + ec.message());
    for (int rank = 0; rank < m_options.numProcesses; ++rank) {
        const int globalRank = m_options.machineRank * m_options.numProcesses + rank;
        const std::string path = (dir / ("rank" + std::to_string(globalRank) + ".fifo")).string();
        unlink(path.c_str());
        if (mkfifo(path.c_str(), 0600) != 0)
            return makeError("cannot create the event pipe " + path + ": " + errnoText(errno));
        // Read end first (a non-blocking open needs no writer), then our own writer, so that the
        // pipe reads as empty rather than ended until the rank opens it.
        m_eventReadFds[index(rank)] = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        const int keeper = m_eventReadFds[index(rank)] >= 0 ? open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
        if (keeper < 0)
            return makeError("cannot open the event pipe " + path + ": " + errnoText(errno));
        m_pipeKeepers.push_back(keeper);
    }
    return {};
}

Result<void> Supervisor::startRankLauncher()
{
    // Ranks orphaned by a killed torchrun come to us, and are stopped (stopOrphans).
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (auto opened = openEventPipes(); !opened)
        return opened.error();
    std::vector<std::string> extra = m_options.extraEnvironment;
    extra.push_back("SHARDSCOPE_EVENT_PIPES=" + m_options.eventPipeDirectory);
    if (m_options.hangTimeout.count() > 0) {
        extra.push_back("SHARDSCOPE_HEARTBEAT_MS=" + std::to_string(heartbeatInterval(m_options.hangTimeout).count()));
    }
    ChildFds fds;
    int outputPipe[2] = {-1, -1};
    if (!m_options.logDirectory.empty()) {
        for (int rank = 0; rank <= m_options.numProcesses; ++rank) {
            const int globalRank = m_options.machineRank * m_options.numProcesses + rank;
            const std::string name = rank < m_options.numProcesses ? RunLayout::rankLogName(globalRank) : kLauncherLogName;
            const std::string path = (std::filesystem::path(m_options.logDirectory) / name).string();
            const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
            if (fd < 0)
                return makeError("cannot create the log file " + path + ": " + errnoText(errno));
            m_logFds.push_back(fd);
        }
        if (pipe2(outputPipe, O_CLOEXEC) != 0)
            return makeError("pipe failed: " + errnoText(errno));
        fds.logFd = outputPipe[1];
        m_outputFd = outputPipe[0];
    }
    std::vector<std::string> argv{m_options.workerPath};
    argv.insert(argv.end(), m_options.workerArgs.begin(), m_options.workerArgs.end());
    auto pid = spawnChild(m_options.workerPath, std::move(argv), launcherEnvironment(extra), fds, m_rankMask);
    if (outputPipe[1] >= 0)
        close(outputPipe[1]);
    if (!pid)
        return pid.error();
    m_children.push_back({-1, *pid, true});
    for (int rank = 0; rank < m_options.numProcesses; ++rank) {
        RankExit started;
        started.rank = m_options.machineRank * m_options.numProcesses + rank;
        started.pid = *pid;
        m_outcome.ranks.push_back(started);
    }
    return {};
}

bool Supervisor::rankRunning(int localRank) const
{
    if (m_options.launcherStartsRanks)
        return !m_children.empty() && m_children.front().running;
    return m_children[index(localRank)].running;
}

namespace {

// The processes whose parent is `parent` (from /proc).
std::vector<pid_t> childrenOf(pid_t parent)
{
    std::vector<pid_t> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
            continue;
        // One line, read with getline: a process that ends between the open and the read makes
        // read() fail with ESRCH, which istreambuf_iterator let out as an exception (the launcher
        // died of it, `terminate called ... No such process`); getline leaves the stream bad.
        std::ifstream stat(entry.path() / "stat");
        std::string text;
        std::getline(stat, text);
        // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
        const auto close = text.rfind(')');
        if (close == std::string::npos)
            continue;
        std::istringstream rest(text.substr(close + 1));
        std::string state;
        pid_t ppid = 0;
        if (rest >> state >> ppid && ppid == parent)
            found.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return found;
}

} // namespace

void Supervisor::stopOrphans(int sig)
{
    for (pid_t pid : childrenOf(getpid()))
        if (std::none_of(m_children.begin(), m_children.end(), [&](const Child& c) { return c.pid == pid && c.running; }))
            kill(pid, sig);
}

void Supervisor::stopAll(int sig)
{
    for (auto& c : m_children)
        if (c.running)
            kill(-c.pid, sig);
    if (m_options.launcherStartsRanks)
        stopOrphans(sig);
}

void Supervisor::beginStopping()
{
    m_stopping = true;
    m_killDeadline = Clock::now() + m_options.stopGrace;
    stopAll(cancelSignal());
}

void Supervisor::beginCheckpointStop(int sig)
{
    m_stopping = true;
    m_outcome.cancelled = true;
    m_outcome.checkpointSignal = sig;
    m_killDeadline = Clock::now() + m_options.checkpointGrace;
    stopAll(SIGUSR1);
}

long Supervisor::openEventFds() const
{
    return std::count_if(m_eventReadFds.begin(), m_eventReadFds.end(), [](int fd) { return fd >= 0; })
           + (m_outputFd >= 0 ? 1 : 0);
}

void Supervisor::supervise()
{
    while (m_running > 0 || openEventFds() > 0) {
        reapExited();
        if (m_running == 0 && openEventFds() == 0)
            break;
        // The rank launcher is gone: whatever it left behind is an orphan, and is stopped.
        if (m_options.launcherStartsRanks && m_running == 0)
            stopOrphans(SIGKILL);
        if (!m_stopping && m_options.hangTimeout.count() > 0 && m_options.onEventLine)
            checkHeartbeats();
        if (!m_stopping && m_options.hangTimeout.count() > 0 && m_options.findStuckRank)
            checkStuckRank();
        if (!m_stopping && m_options.findAbortReason)
            if (auto reason = m_options.findAbortReason()) {
                m_outcome.abortReason = *reason;
                beginStopping();
            }
        if (m_stopping && m_running > 0 && Clock::now() >= m_killDeadline) {
            stopAll(SIGKILL);
            m_killDeadline = Clock::now() + std::chrono::hours(1);
        }
        pollOnce();
    }
}

void Supervisor::recordExit(RankExit& exit, int status)
{
    exit.seconds = elapsed();
    exit.exitedAt = unixSeconds();
    if (WIFSIGNALED(status))
        exit.signal = WTERMSIG(status);
    else if (WIFEXITED(status))
        exit.exitCode = WEXITSTATUS(status);
    if (m_stopping)
        exit.stoppedByLauncher = true;
}

// The rank launcher's exit is every rank's: which rank failed first is decided from their error
// events (LaunchOutcome::blameFirstOwnError), rank 0 standing in until then.
void Supervisor::onRankLauncherExit(pid_t pid, int status)
{
    for (std::size_t i = 0; i < m_pipeKeepers.size(); ++i)
        close(m_pipeKeepers[i]);
    m_pipeKeepers.clear();
    if (!m_stopping && WIFSIGNALED(status)) {
        // torchrun ends with its report when a rank fails; killed, it names no rank and none is
        // to blame. Its ranks, orphaned, are the launcher's to stop (below).
        RankExit killed;
        killed.pid = pid;
        recordExit(killed, status);
        m_outcome.rankLauncherKilled = killed;
        std::ostringstream reason;
        reason << "accelerate launch (pid " << pid << ") was killed by " << signalName(killed.signal) << " after "
               << static_cast<int>(killed.seconds * 1000) / 1000.0
               << " s, from outside the run (no rank had failed, or torchrun would have ended it with a report)";
        m_outcome.abortReason = reason.str();
        for (auto& exit : m_outcome.ranks) {
            exit.pid = 0; // the ranks' own pids are torchrun's to know
            exit.exitCode = 0;
            exit.signal = SIGKILL;
            exit.stoppedByLauncher = true;
        }
        beginStopping();
    } else if (!m_stopping && !m_outcome.ranks.empty() && m_outcome.ranks.front().failed()) {
        m_outcome.rootCauseRank = m_outcome.ranks.front().rank;
        m_outcome.rootCauseStandsIn = true;
        beginStopping();
    }
    stopOrphans(SIGKILL);
}

void Supervisor::reapExited()
{
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (auto& c : m_children) {
            if (c.pid != pid || !c.running)
                continue;
            c.running = false;
            --m_running;
            if (c.rank < 0) {
                for (auto& exit : m_outcome.ranks)
                    recordExit(exit, status);
                onRankLauncherExit(pid, status);
                continue;
            }
            RankExit& exit = m_outcome.ranks[index(c.rank)];
            recordExit(exit, status);
            if (!m_stopping && exit.failed()) {
                m_outcome.rootCauseRank = exit.rank;
                beginStopping();
            }
        }
    }
}

void Supervisor::checkHeartbeats()
{
    const auto startingTimeout = std::max(m_options.hangTimeout, m_options.startupGrace);
    for (int rank = 0; rank < m_options.numProcesses; ++rank) {
        // A rank that said it is done (or failed) is tearing down, its heartbeat stopped on
        // purpose: it gets as long as a starting rank.
        const bool ending = m_options.rankIsEnding && m_options.rankIsEnding(m_outcome.ranks[index(rank)].rank);
        const bool heard = m_heardFrom[index(rank)];
        // A script's rank that never spoke may not use the reporter at all: nothing to hold it to.
        if (!heard && m_options.launcherStartsRanks)
            continue;
        const auto limit = heard && !ending ? m_options.hangTimeout : startingTimeout;
        if (!rankRunning(rank) || Clock::now() - m_lastHeard[index(rank)] < limit)
            continue;
        RankExit& exit = m_outcome.ranks[index(rank)];
        exit.hung = true;
        char detail[96];
        std::snprintf(detail, sizeof detail, "no event, not even a heartbeat, for %.1f s%s",
                      static_cast<double>(limit.count()) / 1000.0, heard ? "" : " since it started");
        exit.hungDetail = detail;
        m_outcome.rootCauseRank = exit.rank;
        stopForHang();
        return;
    }
}

void Supervisor::stopForHang()
{
    if (m_options.onHang) {
        std::vector<pid_t> rankPids;
        if (!m_options.launcherStartsRanks)
            for (const auto& c : m_children)
                if (c.running)
                    rankPids.push_back(c.pid);
        m_options.onHang(rankPids);
    }
    beginStopping();
}

void Supervisor::checkStuckRank()
{
    auto stuck = m_options.findStuckRank(m_options.hangTimeout);
    if (!stuck)
        return;
    const auto [globalRank, detail] = *stuck;
    for (auto& r : m_outcome.ranks)
        if (r.rank == globalRank) {
            r.hung = true;
            r.hungDetail = detail;
            m_outcome.rootCauseRank = globalRank;
            stopForHang();
        }
}

void Supervisor::pollOnce()
{
    std::vector<pollfd> polled{{m_signalFd, POLLIN, 0}};
    std::vector<int> polledRanks{-1};
    for (int rank = 0; rank < m_options.numProcesses; ++rank) {
        if (m_eventReadFds[index(rank)] >= 0) {
            polled.push_back({m_eventReadFds[index(rank)], POLLIN, 0});
            polledRanks.push_back(rank);
        }
    }
    if (m_outputFd >= 0) {
        polled.push_back({m_outputFd, POLLIN, 0});
        polledRanks.push_back(-1);
    }
    const int ready = poll(polled.data(), polled.size(), 50);
    if (m_options.onTick)
        m_options.onTick();
    if (ready <= 0)
        return;
    for (std::size_t i = 1; i < polled.size(); ++i) {
        if (!(polled[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (polledRanks[i] < 0)
            drainOutput();
        else
            drainEvents(polledRanks[i]);
    }
    if (polled[0].revents & POLLIN)
        readSignals();
}

void Supervisor::readSignals()
{
    signalfd_siginfo info{};
    while (read(m_signalFd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        const int sig = static_cast<int>(info.ssi_signo);
        if (sig == SIGCHLD)
            continue; // reaped at the top of the loop
        // SIGTERM and SIGUSR1 (a time limit's warning, a preemption, a laptop closing) save a
        // checkpoint first, where the ranks are the engine's and the run has a folder to keep it.
        const bool checkpointFirst = (sig == SIGTERM || sig == SIGUSR1) && !m_options.launcherStartsRanks
                                     && m_options.ranksCanCheckpoint;
        if (!m_stopping && checkpointFirst) {
            beginCheckpointStop(sig);
        } else if (!m_stopping) {
            m_outcome.cancelled = true;
            beginStopping();
        } else if (m_outcome.checkpointSignal == 0 || sig == SIGINT || sig == SIGHUP) {
            // Asked twice: stop waiting for a graceful exit. (A checkpoint is not given up for
            // SIGTERM or SIGUSR1 again: SLURM sends both, to the launcher and the ranks.)
            stopAll(SIGKILL);
        }
    }
}

bool Supervisor::drainEvents(int rank)
{
    // Reads what a rank's events pipe holds and hands over complete lines; at EOF, the rest.
    m_lastHeard[index(rank)] = Clock::now();
    m_heardFrom[index(rank)] = true;
    int& fd = m_eventReadFds[index(rank)];
    std::string& partial = m_partialLines[index(rank)];
    char buffer[65536];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) {
        if (!partial.empty())
            m_options.onEventLine(rank, partial);
        partial.clear();
        close(fd);
        fd = -1;
        return false;
    }
    partial.append(buffer, static_cast<std::size_t>(n));
    std::size_t begin = 0, newline;
    while ((newline = partial.find('\n', begin)) != std::string::npos) {
        if (newline > begin)
            m_options.onEventLine(rank, std::string_view(partial).substr(begin, newline - begin));
        begin = newline + 1;
    }
    partial.erase(0, begin);
    return true;
}

void Supervisor::drainOutput()
{
    char buffer[65536];
    const ssize_t n = read(m_outputFd, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        if (!m_outputPartial.empty())
            routeOutputLine(m_outputPartial);
        m_outputPartial.clear();
        close(m_outputFd);
        m_outputFd = -1;
        return;
    }
    m_outputPartial.append(buffer, static_cast<std::size_t>(n));
    std::size_t begin = 0, newline;
    while ((newline = m_outputPartial.find('\n', begin)) != std::string::npos) {
        routeOutputLine(std::string_view(m_outputPartial).substr(begin, newline + 1 - begin));
        begin = newline + 1;
    }
    m_outputPartial.erase(0, begin);
}

// torchrun's tee writes each rank's lines as "[<role><local rank>]:<line>": to that rank's log,
// without the prefix; anything else (accelerate's and torchrun's own words) to launcher.log.
void Supervisor::routeOutputLine(std::string_view line)
{
    auto writeAll = [](int fd, std::string_view text) {
        while (!text.empty()) {
            const ssize_t n = write(fd, text.data(), text.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return;
            text.remove_prefix(static_cast<std::size_t>(n));
        }
    };
    const auto close = line.find("]:");
    if (!line.empty() && line.front() == '[' && close != std::string_view::npos && close < 64) {
        const std::string_view tag = line.substr(1, close - 1);
        const auto digits = tag.find_last_not_of("0123456789");
        const std::string_view number = digits == std::string_view::npos ? tag : tag.substr(digits + 1);
        if (!number.empty() && number.size() < 6) {
            const int localRank = std::stoi(std::string(number));
            if (localRank < m_options.numProcesses) {
                writeAll(m_logFds[index(localRank)], line.substr(close + 2));
                return;
            }
        }
    }
    // One process (Accelerate's simple launcher, no torchrun): its output carries no prefix.
    writeAll(m_options.numProcesses == 1 ? m_logFds[index(0)] : m_logFds.back(), line);
    if (m_options.numProcesses == 1)
        return; // no torchrun, no report of its
    // torchrun's report is at the end; kept whole unless the tracebacks quoted in it are long.
    constexpr std::size_t kKeptOutput = 256 * 1024;
    m_launcherOutputTail.append(line);
    if (m_launcherOutputTail.size() > 2 * kKeptOutput)
        m_launcherOutputTail.erase(0, m_launcherOutputTail.size() - kKeptOutput);
}

// The rank launcher failed on its own (the first rank stands in as root cause): torchrun's report
// says which of its ranks failed first and how. Every rank stood for the rank launcher's exit until now; a rank the report leaves out
// exited 0, and one that torchrun ended with SIGTERM after the first failure was stopped by it.
void Supervisor::applyTorchrunReport()
{
    if (!m_outcome.rootCauseStandsIn)
        return;
    const TorchrunReport report = parseTorchrunReport(m_launcherOutputTail);
    // The report's ranks are this machine's by their local rank (torchrun numbers the global ones).
    auto ours = [&](const TorchrunFailure& f) { return f.localRank >= 0 && f.localRank < m_options.numProcesses; };
    const auto root = std::find_if(report.failures.begin(), report.failures.end(),
                                   [](const TorchrunFailure& f) { return f.rootCause; });
    if (root == report.failures.end() || !ours(*root))
        return; // no report of these ranks: the first rank keeps standing in
    if (report.whole) {
        for (auto& exit : m_outcome.ranks) {
            exit.pid = 0;
            exit.exitCode = 0;
            exit.signal = 0;
        }
    }
    for (const auto& failure : report.failures) {
        if (!ours(failure))
            continue;
        RankExit& exit = m_outcome.ranks[index(failure.localRank)];
        exit.pid = failure.pid;
        exit.exitCode = failure.exitCode > 0 ? failure.exitCode : 0;
        exit.signal = failure.exitCode < 0 ? -failure.exitCode : 0;
        exit.stoppedByTorchrun = !failure.rootCause && exit.signal == SIGTERM;
        exit.stoppedByLauncher = exit.stoppedByTorchrun;
    }
    m_outcome.rootCauseRank = m_outcome.ranks[index(root->localRank)].rank;
    m_outcome.rootCauseStandsIn = false;
}

LaunchOutcome Supervisor::outcome()
{
    applyTorchrunReport();
    if (m_outcome.rootCauseRank) {
        for (const auto& r : m_outcome.ranks)
            if (r.rank == *m_outcome.rootCauseRank)
                // A hung rank stopped by SIGTERM may cancel cleanly and exit 0: the run still failed.
                m_outcome.exitCode = r.hung ? kHungExitCode : r.status();
        if (m_outcome.exitCode == 0)
            m_outcome.exitCode = 1; // a root cause is a failure, whatever its rank's exit said
    } else if (!m_outcome.abortReason.empty() && !m_outcome.cancelled) {
        m_outcome.exitCode = m_outcome.rankLauncherKilled ? m_outcome.rankLauncherKilled->status() : 1;
    } else if (m_outcome.cancelled) {
        m_outcome.exitCode = 130; // a stop with a checkpoint: settled by the launch, which knows what the ranks saved
    }
    return m_outcome;
}

} // namespace

Result<LaunchOutcome> runLaunch(const LaunchOptions& options)
{
    if (auto valid = checkLaunchOptions(options); !valid)
        return valid.error();
    if (options.machineRank > 0)
        if (auto reached = waitForMachineZero(options.masterAddr, options.masterPort, options.rendezvousTimeout); !reached)
            return reached.error();

    // Machine 0's launcher binds the rendezvous port itself and hands the socket to rank 0's
    // TCPStore: a taken port is reported here, before any rank starts, and nothing can steal a
    // free one. Other machines only connect to it.
    ListeningSocket listener{-1, options.masterPort};
    if (options.machineRank == 0 && !options.launcherStartsRanks) {
        auto bound = listenOn(options.masterAddr, options.masterPort);
        if (!bound)
            return bound.error();
        listener = *bound;
    }
    Supervisor supervisor(options);
    if (auto started = supervisor.start(listener); !started)
        return started.error();
    supervisor.supervise();
    return supervisor.outcome();
}

} // namespace shardscope
