#pragma once

// How a rank's event becomes rows of the run history: a `step` event one metric row per field
// (nested objects joined with a dot, see metric_keys.h), `hello` a rank row, `eval`, `trace` and
// `checkpoint` their own rows. One mapping for the launcher (live) and for recovering a run from
// its events.jsonl after its launcher died.

#include "engine/protocol/events.h"
#include "storage/run_types.h"

#include <vector>

namespace shardscope::storage {

class RunWriter;

void writeEventRows(RunWriter& writer, const protocol::Event& event);

// The metric rows of a `step` event (keys are static strings) and the records of an `eval`
// event: what writeEventRows writes, for readers of events.jsonl that do not write a store.
std::vector<MetricValue> stepMetrics(const protocol::StepEvent& step);
std::vector<EvalRecord> evalRecords(int rank, double time, const protocol::EvalEvent& eval);
// The run_ranks row of a `hello` event.
RankInfo rankInfo(int rank, const protocol::HelloEvent& hello);

} // namespace shardscope::storage
