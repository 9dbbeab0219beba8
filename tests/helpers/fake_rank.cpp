// fake_rank: a stand-in for shardscope-worker in the launcher's tests. It behaves as told on its
// command line, per rank (read from RANK), so a test can make one rank fail, crash or hang.
//
//   --out DIR            write DIR/rank<R>.env (its torchrun variables, one NAME=VALUE a line,
//                        plus LISTEN_FD_OK=1 when a listening socket was inherited and
//                        LISTEN_ADDR=<ip>:<port>, the address that socket is bound to) and
//                        DIR/rank<R>.argv (its whole argv, each argument followed by a NUL byte)
//                        at start
//   --arg TEXT           an opaque argument, only recorded in rank<R>.argv (the security tests
//                        pass shell metacharacters and check they arrive verbatim)
//   --env NAME           also write NAME=<value> into rank<R>.env
//   --exit R:CODE        rank R exits with CODE after --delay-ms
//   --kill-self R:SIG    rank R sends itself SIG after --delay-ms
//   --hang               every other rank sleeps until it is signalled
//   --ignore-stop        ranks that hang ignore SIGINT and SIGTERM (the launcher must escalate to SIGKILL)
//   --delay-ms N         delay before the chosen rank acts (default 100)
//   --beat R:MS          rank R writes an (empty) event line to SHARDSCOPE_EVENTS_FD every MS ms
//                        while it hangs: a heartbeat

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

bool parsePair(const char* text, int& a, int& b)
{
    const char* colon = std::strchr(text, ':');
    if (!colon)
        return false;
    a = std::atoi(text);
    b = std::atoi(colon + 1);
    return true;
}

} // namespace

int main(int argc, char** argv)
{
    const char* rankText = std::getenv("RANK");
    const int rank = rankText ? std::atoi(rankText) : -1;
    std::string outDir;
    int exitRank = -1, exitCode = 0, killRank = -1, killSignal = 0, delayMs = 100, beatRank = -1, beatMs = 0;
    bool hang = false, ignoreStop = false;
    std::vector<std::string> extraEnv;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : "";
        if (arg == "--out") {
            outDir = next;
            ++i;
        } else if (arg == "--arg") {
            ++i;
        } else if (arg == "--env") {
            extraEnv.push_back(next);
            ++i;
        } else if (arg == "--exit") {
            parsePair(next, exitRank, exitCode);
            ++i;
        } else if (arg == "--kill-self") {
            parsePair(next, killRank, killSignal);
            ++i;
        } else if (arg == "--delay-ms") {
            delayMs = std::atoi(next);
            ++i;
        } else if (arg == "--beat") {
            parsePair(next, beatRank, beatMs);
            ++i;
        } else if (arg == "--hang")
            hang = true;
        else if (arg == "--ignore-stop")
            ignoreStop = true;
        else
            return 64;
    }

    if (!outDir.empty()) {
        std::ofstream out(outDir + "/rank" + std::to_string(rank) + ".env");
        for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                                 "MASTER_PORT", "SHARDSCOPE_MASTER_LISTEN_FD"}) {
            if (const char* value = std::getenv(name))
                out << name << "=" << value << "\n";
        }
        for (const auto& name : extraEnv) {
            if (const char* value = std::getenv(name.c_str()))
                out << name << "=" << value << "\n";
        }
        if (const char* fdText = std::getenv("SHARDSCOPE_MASTER_LISTEN_FD")) {
            const int fd = std::atoi(fdText);
            int listening = 0;
            socklen_t len = sizeof listening;
            if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening)
                out << "LISTEN_FD_OK=1\n";
            sockaddr_in bound{};
            socklen_t addrLen = sizeof bound;
            char ip[INET_ADDRSTRLEN] = {};
            if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &addrLen) == 0 && bound.sin_family == AF_INET
                && inet_ntop(AF_INET, &bound.sin_addr, ip, sizeof ip))
                out << "LISTEN_ADDR=" << ip << ":" << ntohs(bound.sin_port) << "\n";
        }
        std::ofstream args(outDir + "/rank" + std::to_string(rank) + ".argv", std::ios::binary);
        for (int i = 0; i < argc; ++i)
            args << argv[i] << '\0';
    }

    if (rank == exitRank || rank == killRank) {
        usleep(static_cast<useconds_t>(delayMs) * 1000);
        if (rank == killRank)
            raise(killSignal);
        return exitCode;
    }
    if (hang) {
        if (ignoreStop) {
            signal(SIGINT, SIG_IGN);
            signal(SIGTERM, SIG_IGN);
        }
        const char* eventsFd = std::getenv("SHARDSCOPE_EVENTS_FD");
        if (rank == beatRank && eventsFd && beatMs > 0) {
            const int fd = std::atoi(eventsFd);
            for (;;) {
                ssize_t ignored = write(fd, "{}\n", 3);
                (void)ignored;
                usleep(static_cast<useconds_t>(beatMs) * 1000);
            }
        }
        for (;;)
            pause();
    }
    return 0;
}
