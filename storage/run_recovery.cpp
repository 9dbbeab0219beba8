// RunStore: recovering runs whose launcher died (interrupted, or finished from their run
// directory's events.jsonl and outcome.json).

#include "storage/run_store.h"
#include "storage/run_store_detail.h"

#include "engine/common/run_layout.h"
#include "storage/run_outcome.h"

#include "storage/event_rows.h"
#include "storage/run_writer.h"

#include "storage/config_diff.h"
#include "storage/metric_blocks.h"
#include "storage/metric_keys.h"
#include "storage/schema.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <ostream>

namespace shardscope::storage {

using namespace detail;

Result<int> RunStore::markInterruptedRuns()
{
    // Decide outside any transaction, and take the write lock only when there is something to
    // mark: a reader that opens the store while a launcher writes must not wait for it.
    // A cluster run's job goes on without the process that follows it here (`shardscope launch
    // --target slurm`): its end is for a follower to record, not a dead launcher's.
    auto select = m_db.prepare("SELECT id, launcher_pid, launcher_host, launcher_boot_id, launcher_start_ticks, run_dir "
                               "FROM runs WHERE status IN ('pending', 'running') AND job = ''");
    if (!select)
        return select.error();
    std::vector<std::pair<std::int64_t, LauncherIdentity>> gone;
    std::vector<std::pair<std::int64_t, RunEnd>> decided; // the launcher kept its outcome in the run directory
    auto rc = forEachRow(*select, [&](const Statement& s) {
        LauncherIdentity launcher{s.int64(1), s.text(2), s.text(3), s.int64(4)};
        if (checkLiveness(launcher) != Liveness::Gone)
            return;
        std::filesystem::path runDir = s.text(5);
        if (runDir.is_relative())
            runDir = m_runsRoot.parent_path() / runDir;
        if (auto end = readOutcomeFile(runDir))
            decided.emplace_back(s.int64(0), std::move(*end));
        else
            gone.emplace_back(s.int64(0), std::move(launcher));
    });
    if (!rc)
        return rc.error();
    // A launcher that could not write the history as its run ended (a full disk) left the outcome
    // in outcome.json: record it as it was, with the rows events.jsonl still has.
    for (auto& [id, end] : decided) {
        end.error += (end.error.empty() ? "" : "\n")
                     + std::string("(recorded from the run directory's outcome.json: the "
                                   "history could not be written when the run ended)");
        if (auto recovered = recoverFromEventLog(id); !recovered)
            return recovered.error();
        if (auto finished = finishRun(id, end); !finished)
            return finished.error();
    }
    if (gone.empty())
        return static_cast<int>(decided.size());

    auto tx = Transaction::begin(m_db);
    if (!tx)
        return tx.error();
    auto update = m_db.prepare("UPDATE runs SET status = 'interrupted', ended_at = ?, error = ? "
                               "WHERE id = ? AND status IN ('pending', 'running')");
    if (!update)
        return update.error();
    int marked = 0;
    for (const auto& [id, launcher] : gone) {
        update->bind(1, now())
            .bind(2, "the launcher (pid " + std::to_string(launcher.pid) + " on " + launcher.host
                         + ") stopped without ending the run")
            .bind(3, id);
        if (auto r = update->run(); !r)
            return r.error();
        marked += m_db.changes();
    }
    if (auto r = tx->commit(); !r)
        return r.error();
    // Nothing lost: the rows the dead launcher had not committed yet are in the run directory's
    // events.jsonl; bring them in.
    for (const auto& [id, launcher] : gone)
        if (auto recovered = recoverFromEventLog(id); !recovered)
            return recovered.error();
    return marked + static_cast<int>(decided.size());
}

Result<std::int64_t> RunStore::recoverFromEventLog(std::int64_t runId)
{
    auto dirStmt = m_db.prepare("SELECT run_dir FROM runs WHERE id = ?");
    if (!dirStmt)
        return dirStmt.error();
    dirStmt->bind(1, runId);
    auto row = dirStmt->step();
    if (!row)
        return row.error();
    if (!*row)
        return std::int64_t{0};
    std::filesystem::path runDir = dirStmt->text(0);
    if (runDir.is_relative())
        runDir = m_runsRoot.parent_path() / runDir;
    std::ifstream log(RunLayout(runDir).eventsFile());
    if (!log)
        return std::int64_t{0};

    // The last step already stored, per rank: later step events are the missing ones.
    std::map<int, std::int64_t> lastStored;
    auto last = m_db.prepare("SELECT rank, MAX(step) FROM metrics WHERE run_id = ? GROUP BY rank");
    if (!last)
        return last.error();
    last->bind(1, runId);
    if (auto rc = forEachRow(*last, [&](const Statement& st) { lastStored[static_cast<int>(st.int64(0))] = st.int64(1); }); !rc)
        return rc.error();

    auto writer = RunWriter::open(m_db.path(), runId);
    if (!writer)
        return writer.error();
    std::int64_t recovered = 0;
    std::string line;
    while (std::getline(log, line)) {
        auto event = protocol::decodeEvent(line);
        if (!event)
            continue; // a torn last line: what the rank never finished writing
        const auto* step = std::get_if<protocol::StepEvent>(&event->body);
        if (!step)
            continue;
        auto it = lastStored.find(event->rank);
        if (it != lastStored.end() && step->step <= it->second)
            continue;
        writeEventRows(**writer, *event);
        ++recovered;
    }
    if (auto flushed = (*writer)->flush(); !flushed)
        return flushed.error();
    return recovered;
}

} // namespace shardscope::storage
