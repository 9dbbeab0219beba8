#pragma once

// What the parts of RunStore share (run_store.cpp: opening, lifecycle, edits and deletion;
// run_recovery.cpp; run_queries.cpp; run_export.cpp). Not for use outside storage/.

#include "storage/sqlite_db.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace shardscope::storage::detail {

inline double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

inline std::string runLabel(std::int64_t runId) { return "run " + std::to_string(runId); }

// Runs a query to its end, calling onRow for each row.
template <typename OnRow>
Result<void> forEachRow(Statement& stmt, OnRow&& onRow)
{
    while (true) {
        auto row = stmt.step();
        if (!row)
            return row.error();
        if (!*row)
            return {};
        onRow(stmt);
    }
}

} // namespace shardscope::storage::detail
