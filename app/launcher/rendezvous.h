#pragma once

// Where the ranks of a launch meet: machine 0's launcher binds the rendezvous port itself (its
// socket is handed to rank 0's TCPStore, so a taken port is reported before any rank starts and
// nothing can steal a free one), and the other machines' launchers wait until it answers.

#include "engine/common/result.h"

#include <chrono>
#include <string>

namespace shardscope {

// Binds a listening TCP socket on `address`:`port` (0: any free port). Returns the descriptor and
// the port; an error says when the port is taken.
struct ListeningSocket {
    int fd = -1;
    int port = 0;
};
Result<ListeningSocket> listenOn(const std::string& address, int port);

// Machines 1..N-1: machine 0's launcher must be listening at `address`:`port` before our ranks try
// the rendezvous (they would wait in silence). Probes the port, says it waits every 5 s, gives up
// after `timeout`, honours Ctrl-C.
Result<void> waitForMachineZero(const std::string& address, int port, std::chrono::milliseconds timeout);

} // namespace shardscope
