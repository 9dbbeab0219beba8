#include "app/launcher/rendezvous.h"

#include "app/launcher/spawn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

namespace shardscope {

namespace {

using Clock = std::chrono::steady_clock;

// main_process_ip and a port as a socket address; "localhost" is 127.0.0.1.
Result<sockaddr_in> ipv4Address(const std::string& address, int port)
{
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const std::string numeric = address == "localhost" ? "127.0.0.1" : address;
    if (inet_pton(AF_INET, numeric.c_str(), &addr.sin_addr) != 1)
        return makeError("main_process_ip '" + address + "' is not an IPv4 address; give a numeric address such as 127.0.0.1");
    return addr;
}

} // namespace

Result<ListeningSocket> listenOn(const std::string& address, int port)
{
    auto parsed = ipv4Address(address, port);
    if (!parsed)
        return parsed.error();
    sockaddr_in addr = *parsed;

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

// Machines 1..N-1: machine 0's launcher must be listening before our ranks try the rendezvous
// (they would wait in silence). Probes the port, says it waits every 5 s, honours Ctrl-C.
Result<void> waitForMachineZero(const std::string& address, int port, std::chrono::milliseconds timeout)
{
    auto parsed = ipv4Address(address, port);
    if (!parsed)
        return parsed.error();
    sockaddr_in addr = *parsed;
    const std::string where = address + ":" + std::to_string(port);
    const auto start = Clock::now();
    auto lastSaid = start - std::chrono::seconds(4); // the first word after a second, then every 5 s
    const sigset_t supervised = supervisedSignals();
    while (true) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return makeError("socket failed: " + errnoText(errno));
        const bool answered = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        close(fd);
        if (answered)
            return {};
        const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
        if (Clock::now() - start >= timeout)
            return makeError("machine 0 did not answer at " + where + " within " + std::to_string(waited.count())
                             + " s; start its launcher (--machine_rank 0) with the same --main_process_ip and "
                               "--main_process_port, check the address and any firewall, or raise --rendezvous_timeout");
        if (Clock::now() - lastSaid >= std::chrono::seconds(5)) {
            std::fprintf(stderr, "shardscope launch: waiting for machine 0 at %s (%lld s)\n", where.c_str(),
                         static_cast<long long>(waited.count()));
            lastSaid = Clock::now();
        }
        // Sleep 200 ms, or less if Ctrl-C / SIGTERM arrives (the launcher blocks those signals).
        timespec pause{0, 200'000'000};
        siginfo_t info{};
        const int sig = sigtimedwait(&supervised, &info, &pause);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
            return makeError("cancelled while waiting for machine 0 at " + where);
    }
}

} // namespace shardscope
