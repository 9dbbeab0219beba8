#pragma once

// Stragglers: a rank persistently slower than the others. DDP's all-reduce makes every rank's
// step time equal (the fast ones wait for the slow one), so the check reads compute-only time
// (StepEvent::computeTime: the step without data loading, collective waits and the optimizer).
// A rank is flagged when the median of its last `window` compute times exceeds (1 + threshold)
// times the median of the other ranks' medians over the same steps (the others, not all ranks:
// with two ranks the median of all would sit halfway to the slow one), and has been so at each of
// the last `window` steps judged: a rank slower for less than that (another process took its core
// for a while, which on shared cores happens to every rank in turn) is not persistently slower;
// judged at every step, a healthy 2-rank run flagged both ranks. A rank is flagged once; after it
// falls back under the threshold it can be flagged again.

#include "engine/protocol/events.h"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

namespace shardscope {

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

struct StragglerOptions {
    double threshold = 0.2; // 20 % slower than the others
    int window = 20; // steps
    // And at least this much slower, seconds: a rank 0.3 ms behind in a 2 ms step is the noise of
    // ranks sharing cores, not a straggler (the demo on two cores flagged both ranks at 1.2x).
    double minGap = 0.005;
};

class StragglerDetector {
public:
    // `ranks`: how many ranks report (this launcher's); a window is judged once all have.
    StragglerDetector(int ranks, StragglerOptions options);

    // A rank's step; the ranks flagged because of it (at most one at a time in practice), as the
    // launcher's events for those ranks (Event::rank is the straggler).
    std::vector<protocol::Event> addStep(int rank, const protocol::StepEvent& step, double time);

private:
    struct RankTimes {
        std::map<std::int64_t, double> computeByStep; // the last steps' compute-only times
        int slowJudgements = 0; // judged slow at this many steps in a row
        bool flagged = false;
    };
    int m_ranks;
    StragglerOptions m_options;
    std::map<int, RankTimes> m_times;
    std::int64_t m_lastJudged = 0; // the last step whose window was judged
};

} // namespace shardscope
