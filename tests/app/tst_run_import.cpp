// `shardscope runs import` (app/runs/run_import.h): a run directory's per-rank event files, as
// the Python reporter writes them without a launcher, become a run in the history with its end
// as the events tell it; a second import of the same name, and a directory without events, are
// refused with the reason.

#include "app/runs/run_import.h"
#include "engine/protocol/events.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "tests/common/recipe_run.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

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
        // Under another name: still refused, the folder is run train-1's (#43: deleting a second row
        // would delete the first run's files).
        auto copy = importRunDirectory(home.path().toStdString(), runDir, "train-1-copy");
        QVERIFY(!copy);
        QVERIFY2(copy.error().message.find("is already the folder of run " + std::to_string(imported->runId) + " (train-1)")
                     != std::string::npos,
                 copy.error().message.c_str());
    }

    // #43 point 3: what `runs import` prints of recorded text (a folder named with an escape
    // sequence that would set the window title) is shown escaped, never sent raw to the terminal,
    // in its report and in its errors.
    void cliOutputIsEscaped()
    {
        QTemporaryDir home;
        const std::string evil = "evil\x1b]0;pwned\x07";
        const fs::path runDir = fs::path(home.path().toStdString()) / "runs" / evil;
        writeRun(runDir, true);
        for (int time = 0; time < 2; ++time) {
            const auto imported = testing::runShardscope(home.path(),
                                                         {"runs", "import", QString::fromStdString(runDir.string())});
            const QByteArray out = imported.output.toUtf8();
            QCOMPARE(imported.exitCode, time == 0 ? 0 : 1); // the second time: the name is taken
            QVERIFY2(!out.contains('\x1b') && !out.contains('\x07'), out.constData());
            QVERIFY2(out.contains("evil\\x1b]0;pwned\\x07"), out.constData());
        }
    }

    // #43 point 2: what an import must not trust. Each refusal names the file, and none hangs.
    void refusesWhatARunDidNotWrite_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("says");
        QTest::newRow("a FIFO with no writer") << "fifo"
                                               << "is not a regular file (a FIFO)";
        QTest::newRow("a link to /dev/zero") << "zero"
                                             << "is a link out of the run folder";
        QTest::newRow("a link to /dev/urandom") << "urandom"
                                                << "is a link out of the run folder";
        QTest::newRow("a folder") << "folder"
                                  << "is not a regular file (a folder)";
        QTest::newRow("random bytes") << "random"
                                      << "has no events";
    }
    void refusesWhatARunDidNotWrite()
    {
        QFETCH(QString, kind);
        QFETCH(QString, says);
        QTemporaryDir home;
        const fs::path root = home.path().toStdString();
        const fs::path dir = root / "run";
        fs::create_directories(dir);
        const fs::path events = dir / "events.jsonl";
        if (kind == "fifo")
            QCOMPARE(::mkfifo(events.c_str(), 0600), 0);
        else if (kind == "zero")
            fs::create_symlink("/dev/zero", events);
        else if (kind == "urandom")
            fs::create_symlink("/dev/urandom", events);
        else if (kind == "folder")
            fs::create_directories(events);
        else {
            std::ofstream out(events, std::ios::binary);
            for (int i = 0; i < 4096; ++i)
                out.put(static_cast<char>((i * 7919 + 13) % 256));
        }
        auto imported = importRunDirectory(root, dir);
        QVERIFY(!imported);
        QVERIFY2(imported.error().message.find(says.toStdString()) != std::string::npos, imported.error().message.c_str());
        auto store = storage::RunStore::open(storage::historyFile(root));
        QVERIFY(store.ok());
        QVERIFY(store->listRuns()->empty()); // nothing recorded
    }

    // #43 point 2: a field of the wrong type is an error (it aborted the program); a trailing slash
    // names the folder; a rank whose file is missing did not finish.
    void wrongTypesSlashesAndMissingRanks()
    {
        QTemporaryDir home;
        const fs::path root = home.path().toStdString();
        writeRun(root / "typed", true);
        std::ofstream(root / "typed" / "run.json") << R"({"distributed_type": 5})";
        auto typed = importRunDirectory(root, root / "typed");
        QVERIFY(!typed);
        QVERIFY2(typed.error().message.find("run.json: distributed_type is 5, not a string") != std::string::npos,
                 typed.error().message.c_str());

        writeRun(root / "slashed", true);
        auto slashed = importRunDirectory(root, (root / "slashed").string() + "/");
        QVERIFY2(slashed, slashed ? "" : slashed.error().message.c_str());
        QCOMPARE(slashed->name, std::string("slashed"));

        writeRun(root / "half", true); // 2 ranks (run.json), one file left
        fs::remove(root / "half" / "events" / "rank1.jsonl");
        auto half = importRunDirectory(root, root / "half");
        QVERIFY(half);
        QCOMPARE(half->status, std::string("failed (unfinished)"));
    }

    // #43 point 2: numbers an import sizes its work by are bounded: a hello saying 2e9 ranks (a
    // table of every rank was built from it: tens of GB and no end) and a rank of INT_MAX (its
    // successor overflowed) are lines that are not events; the import ends at once with what is true.
    void hugeWorldAndRankAreNotTrusted()
    {
        QTemporaryDir home;
        const fs::path root = home.path().toStdString();
        writeRun(root / "huge", true);
        {
            std::ofstream out(root / "huge" / "events" / "rank0.jsonl", std::ios::app);
            out << R"({"v":1,"type":"hello","rank":0,"time":99,"pid":1,"device":"cpu","world_size":2000000000})"
                << "\n";
            out << R"({"v":1,"type":"log","rank":2147483647,"time":99,"level":"info","message":"x"})"
                << "\n";
            out << R"({"v":1,"type":"log","rank":0,"time":NaN,"level":"info","message":"x"})"
                << "\n";
        }
        QElapsedTimer clock;
        clock.start();
        auto imported = importRunDirectory(root, root / "huge");
        QVERIFY2(imported, imported ? "" : imported.error().message.c_str());
        QVERIFY(clock.elapsed() < 30000);
        QCOMPARE(imported->malformed, std::int64_t(2 + 3));
        QCOMPARE(imported->ranks, 2);
        QCOMPARE(imported->status, std::string("completed"));
        auto store = storage::RunStore::open(storage::historyFile(root));
        QCOMPARE(store->run(imported->runId)->summary.worldSize, 2);
        // A read that takes longer than its deadline ends, naming the file (a stalled filesystem).
        std::int64_t malformed = 0;
        auto late = readRunEvents(root / "huge", malformed, std::chrono::milliseconds(-1));
        QVERIFY(!late);
        QVERIFY2(late.error().message.find("took longer than") != std::string::npos
                     && late.error().message.find(".jsonl took") != std::string::npos,
                 late.error().message.c_str());
    }

    // #43 point 2: the folder of a run the launcher recorded (finished or still running) is that
    // run's: importing it under another name is refused, so no second row can delete its files.
    void launcherRunsFolderIsRefused()
    {
        QTemporaryDir home;
        const fs::path root = home.path().toStdString();
        auto store = storage::RunStore::open(storage::historyFile(root));
        QVERIFY(store.ok());
        for (const bool live : {false, true}) {
            const std::string name = live ? "live" : "finished";
            const fs::path runDir = root / "runs" / name;
            writeRun(runDir, !live);
            storage::NewRun run; // as `shardscope launch` records its run
            run.name = name;
            run.runDir = runDir.string();
            run.worldSize = 2;
            auto id = store->createRun(run);
            QVERIFY(id.ok());
            QVERIFY(store->markRunning(*id).ok());
            if (!live)
                QVERIFY(store->finishRun(*id, storage::RunEnd{}).ok());
            auto copy = importRunDirectory(root, runDir, name + "-copy");
            QVERIFY(!copy);
            QVERIFY2(copy.error().message.find("is already the folder of run " + std::to_string(*id) + " (" + name + ")")
                         != std::string::npos,
                     copy.error().message.c_str());
        }
        QCOMPARE(store->listRuns()->size(), std::size_t(2));
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
