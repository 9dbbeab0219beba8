// `shardscope runs import` (app/launcher/run_import.h): a run directory's per-rank event files, as
// the Python reporter writes them without a launcher, become a run in the history with its end
// as the events tell it; a second import of the same name, and a directory without events, are
// refused with the reason.

#include "app/launcher/run_import.h"
#include "engine/protocol/events.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace shardscope;

namespace {

std::string line(int rank, double time, protocol::EventBody body)
{
    protocol::Event e;
    e.rank = rank;
    e.time = time;
    e.body = std::move(body);
    return protocol::encodeEvent(e) + "\n";
}

// Two ranks' files: hello, three steps, and (when `finished`) done.
void writeRun(const fs::path& dir, bool finished, bool failing = false)
{
    fs::create_directories(dir / "events");
    for (int rank : {0, 1}) {
        std::ofstream out(dir / "events" / ("rank" + std::to_string(rank) + ".jsonl"));
        protocol::HelloEvent hello;
        hello.worldSize = 2;
        out << line(rank, 100, hello);
        for (int step = 1; step <= 3; ++step) {
            protocol::StepEvent s;
            s.step = step;
            s.loss = 1.0 / step;
            out << line(rank, 100 + step, s);
        }
        if (failing && rank == 1)
            out << line(rank, 104, protocol::ErrorEvent{"exception", "RuntimeError: boom"});
        out << "not an event\n";
        if (finished)
            out << line(rank, 105, protocol::DoneEvent{failing && rank == 1 ? "failed" : "completed", 3, 5.0});
    }
    std::ofstream(dir / "run.json") << R"({"distributed_type": "MULTI_CPU", "mixed_precision": "bf16", "num_processes": 2})";
}

} // namespace

class TestRunImport : public QObject {
    Q_OBJECT
private slots:
    void importsAFinishedRun()
    {
        QTemporaryDir home;
        const fs::path runDir = fs::path(home.path().toStdString()) / "runs" / "train-1";
        writeRun(runDir, true);
        auto imported = importRunDirectory(home.path().toStdString(), runDir);
        QVERIFY2(imported, imported ? "" : imported.error().message.c_str());
        QCOMPARE(imported->ranks, 2);
        QCOMPARE(imported->malformed, std::int64_t(2));
        QCOMPARE(imported->status, std::string("completed"));
        auto store = storage::RunStore::open(storage::historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto details = store->run(imported->runId);
        QVERIFY(details.ok());
        QCOMPARE(details->summary.name, std::string("train-1"));
        QCOMPARE(details->summary.status, storage::RunStatus::Completed);
        QCOMPARE(details->summary.worldSize, 2);
        QCOMPARE(details->summary.distributedType, std::string("MULTI_CPU"));
        QCOMPARE(details->summary.mixedPrecision, std::string("bf16"));
        for (int rank : {0, 1}) {
            auto loss = store->series(imported->runId, rank, "loss");
            QVERIFY(loss.ok());
            QCOMPARE(loss->size(), std::size_t(3));
        }
        // The same name again: refused, nothing overwritten.
        auto again = importRunDirectory(home.path().toStdString(), runDir);
        QVERIFY(!again);
        QVERIFY2(again.error().message.find("already has a run named train-1") != std::string::npos,
                 again.error().message.c_str());
        QVERIFY(importRunDirectory(home.path().toStdString(), runDir, "train-1-copy"));
    }

    void endAsTheEventsTellIt()
    {
        QTemporaryDir home;
        const fs::path root = home.path().toStdString();
        writeRun(root / "failing", true, true);
        auto failing = importRunDirectory(root, root / "failing");
        QVERIFY(failing);
        QCOMPARE(failing->status, std::string("failed"));
        auto store = storage::RunStore::open(storage::historyFile(root));
        auto details = store->run(failing->runId);
        QCOMPARE(details->rootCauseRank.value_or(-1), 1);
        // No done events: not reported as a success.
        writeRun(root / "unfinished", false);
        auto unfinished = importRunDirectory(root, root / "unfinished");
        QVERIFY(unfinished);
        QCOMPARE(unfinished->status, std::string("failed (unfinished)"));
        QCOMPARE(store->run(unfinished->runId)->summary.status, storage::RunStatus::Failed);
        // Nothing to import.
        fs::create_directories(root / "empty");
        auto empty = importRunDirectory(root, root / "empty");
        QVERIFY(!empty);
        QVERIFY2(empty.error().message.find("has no events") != std::string::npos, empty.error().message.c_str());
        QVERIFY(!importRunDirectory(root, root / "missing"));
    }
};

QTEST_APPLESS_MAIN(TestRunImport)
#include "tst_run_import.moc"
