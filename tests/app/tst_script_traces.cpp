// After a script run, the launcher's import of the torch.profiler traces in the run's traces/
// (app/launcher/script_traces.h): traces of another job size, of a rank the run lacks, twice the
// same rank, or not traces at all are left out with the reason; the rest become one `trace` event
// per rank and a merged file.

#include "app/launcher/script_traces.h"

#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = SHARDSCOPE_SOURCE_DIR "/../shared/corpus/kineto-traces";

bool anyContains(const std::vector<std::string>& lines, const std::string& text)
{
    for (const auto& line : lines)
        if (line.find(text) != std::string::npos)
            return true;
    return false;
}

} // namespace

class TestScriptTraces : public QObject {
    Q_OBJECT
private slots:
    void importsTheRunsRanks()
    {
        QTemporaryDir dir;
        const fs::path traces = dir.path().toStdString();
        fs::copy_file(kCorpus / "trace_filter_sampled_rank-0.json.gz", traces / "worker0.1.pt.trace.json.gz");
        fs::copy_file(kCorpus / "trace_filter_sampled_rank-1.json.gz", traces / "worker1.1.pt.trace.json.gz");
        std::ofstream(traces / "notes.json") << "this is not json";
        const auto ok = shardscope::collectScriptTraces(traces, 128); // the job these traces are of
        QCOMPARE(ok.events.size(), std::size_t(2));
        QCOMPARE(ok.events[0].rank, 0);
        QCOMPARE(ok.events[1].rank, 1);
        const auto* trace = std::get_if<shardscope::protocol::TraceEvent>(&ok.events[1].body);
        QVERIFY(trace && trace->source == "cupti" && trace->summary.overlap > 0);
        QVERIFY(trace->path.find("worker1.1.pt.trace.json.gz") != std::string::npos);
        QVERIFY(fs::exists(ok.merged));
        QVERIFY2(anyContains(ok.warnings, "notes.json"), "the file that is not JSON is named");
        // Run again: the merged file of the first pick-up is not taken for a rank's.
        QCOMPARE(shardscope::collectScriptTraces(traces, 128).events.size(), std::size_t(2));
    }

    void leavesOutOtherJobs()
    {
        QTemporaryDir dir;
        const fs::path traces = dir.path().toStdString();
        fs::copy_file(kCorpus / "trace_filter_sampled_rank-1.json.gz", traces / "a.json.gz");
        fs::copy_file(kCorpus / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", traces / "b.json.gz");
        const auto refused = shardscope::collectScriptTraces(traces, 2);
        QVERIFY(refused.events.empty());
        QVERIFY(refused.merged.empty());
        QVERIFY2(anyContains(refused.warnings, "128-rank job") && anyContains(refused.warnings, "300-rank job"),
                 refused.warnings.empty() ? "no warning" : refused.warnings.front().c_str());
        // The same rank twice: the first file (by name) is kept, the second named.
        fs::copy_file(kCorpus / "trace_filter_sampled_rank-1.json.gz", traces / "c.json.gz");
        const auto twice = shardscope::collectScriptTraces(traces, 128);
        QCOMPARE(twice.events.size(), std::size_t(1));
        QVERIFY(anyContains(twice.warnings, "a second trace of rank 1"));
        QVERIFY(shardscope::collectScriptTraces(dir.filePath("nothing").toStdString(), 2).events.empty());
    }
};

QTEST_APPLESS_MAIN(TestScriptTraces)
#include "tst_script_traces.moc"
