#pragma once

// How a rank's event becomes rows of the run history: a `step` event one metric row per field
// (nested objects joined with a dot, see metric_keys.h), `hello` a rank row, `eval`, `trace` and
// `checkpoint` their own rows. One mapping for the launcher (live) and for recovering a run from
// its events.jsonl after its launcher died.

#include "engine/protocol/events.h"

namespace shardscope::storage {

class RunWriter;

void writeEventRows(RunWriter& writer, const protocol::Event& event);

} // namespace shardscope::storage
