#pragma once

// The POSIX process primitive the launcher is built on: one child forked and exec'd with the
// environment and descriptors it is meant to have, in a process group of its own, killed with
// its parent (PR_SET_PDEATHSIG), its signals back to their defaults; an exec failure comes back as
// an error before the child runs anything. Also the signals the launcher handles itself.

#include "engine/common/result.h"

#include <signal.h>
#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace shardscope {

std::string errnoText(int error);
std::string signalName(int sig); // "SIGTERM", or "signal N"

// The inherited environment minus every variable in `ours` and `removed`, plus `ours`.
std::vector<std::string> environmentWith(const std::vector<std::string>& ours, std::set<std::string> removed);

// SIGCHLD, SIGINT, SIGTERM, SIGHUP: blocked in the launcher and read from a signalfd, restored to
// the default in each child before exec.
sigset_t supervisedSignals();

// What a child inherits besides its environment.
struct ChildFds {
    int listenFd = -1; // rank 0's TCPStore socket
    int eventsFd = -1; // write end of its events pipe
    int logFd = -1; // its stdout and stderr, or -1 to share the launcher's
};

// Forks and execs `path` with `argv` and `env`. Returns the pid, or an error when fork or exec
// failed (an exec failure is reported back through a close-on-exec pipe).
Result<pid_t> spawnChild(const std::string& path, std::vector<std::string> argv, std::vector<std::string> env,
                         const ChildFds& fds, const sigset_t& originalMask);

// Starts `path` with `argv` detached from this process: forked twice (no child of this one: no
// zombie, no parent-death signal), in a session of its own (a closed terminal or workbench does
// not end it), in / (no folder a user may unmount), stdin from /dev/null, stdout and stderr
// appended to `logFile`, this process's environment. Returns its pid, or why it could not start
// (fork, or exec: reported back through a close-on-exec pipe).
Result<pid_t> spawnDetached(const std::string& path, std::vector<std::string> argv, const std::string& logFile);

} // namespace shardscope
