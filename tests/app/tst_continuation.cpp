// --continue_run's choices (app/runs/continuation.h) on a history and run folders made here: which
// checkpoint (the newest complete one), which attempt (after the last recorded), the request the
// attempt runs with (the run's recipe, config and process count, its own folder under attempts/),
// the runs that cannot go on and why, and the plan an attempt must keep. No process starts.

#include "app/runs/continuation.h"
#include "engine/common/run_layout.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace shardscope;
using namespace shardscope::runs;
namespace fs = std::filesystem;

namespace {

config::RunPlan demoPlan()
{
    config::RunPlan plan;
    plan.recipe.name = "demo";
    plan.numProcesses = 2;
    plan.distributedType = "MULTI_CPU";
    return plan;
}

void checkpointAt(const RunLayout& run, int step, bool complete)
{
    const fs::path dir = run.checkpointsDir() / ("step_" + std::to_string(step));
    fs::create_directories(dir);
    if (complete)
        std::ofstream(dir / "manifest.json") << "{}";
}

} // namespace

class TestContinuation : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_home;
    fs::path home() const { return m_home.path().toStdString(); }

    // A run of the history in its own folder (plan.json, recipe, config), ended as `status`.
    std::int64_t addRun(const std::string& name, storage::RunStatus status, const std::string& job = {})
    {
        auto store = storage::RunStore::open(storage::historyFile(home()));
        if (!store)
            qFatal("%s", store.error().message.c_str());
        const RunLayout run(home() / "runs" / name);
        fs::create_directories(run.dir());
        std::ofstream(run.planFile()) << config::planToJson(demoPlan());
        std::ofstream(run.recipeFile()) << "name: demo\n";
        std::ofstream(run.configFile()) << "distributed_type: MULTI_CPU\n";
        storage::NewRun row;
        row.name = name;
        row.runDir = run.dir().string();
        row.worldSize = 2;
        const auto id = store->createRun(row);
        if (!id)
            qFatal("%s", id.error().message.c_str());
        if (!job.empty())
            (void)store->setJob(*id, job);
        (void)store->markRunning(*id);
        if (status != storage::RunStatus::Running) {
            storage::RunEnd end;
            end.status = status;
            end.exitCode = status == storage::RunStatus::Completed ? 0 : 1;
            (void)store->finishRun(*id, end);
        }
        return *id;
    }

    Result<LaunchRequest> continuing(const std::string& name)
    {
        LaunchRequest request;
        request.continueRun = name;
        return continuationOf(request, home());
    }

private slots:
    void initTestCase() { QVERIFY(m_home.isValid()); }

    void goesOnFromTheNewestCompleteCheckpoint()
    {
        const std::int64_t id = addRun("failed-run", storage::RunStatus::Failed);
        const RunLayout run(home() / "runs" / "failed-run");
        checkpointAt(run, 4, true);
        checkpointAt(run, 8, true);
        checkpointAt(run, 12, false); // its writing was interrupted: no manifest
        auto next = continuing("failed-run");
        QVERIFY2(next.ok(), next.ok() ? "" : next.error().message.c_str());
        QCOMPARE(next->resumeFrom, (run.checkpointsDir() / "step_8").string());
        QCOMPARE(next->checkpointsDir, run.checkpointsDir().string());
        QCOMPARE(next->runsDir, run.attemptsDir().string());
        QCOMPARE(next->runName, std::string("1"));
        QCOMPARE(next->recipe, run.recipeFile().string());
        QCOMPARE(next->configFile, run.configFile().string());
        QCOMPARE(next->numProcesses, 2);
        QVERIFY(next->givenNumProcesses);
        QVERIFY(next->continuation);
        QCOMPARE(next->continuation->runId, id);
        QCOMPARE(next->continuation->attempt.attempt, 1);
        QCOMPARE(next->continuation->attempt.resumedStep, std::int64_t(8));
        QCOMPARE(next->continuation->attempt.resumedFrom, (run.checkpointsDir() / "step_8").string());

        // What the user gave wins over the run's own: a recipe, a process count.
        LaunchRequest given;
        given.continueRun = "failed-run";
        given.recipe = "/elsewhere/recipe.yaml";
        given.numProcesses = 4;
        given.givenNumProcesses = true;
        auto mine = continuationOf(given, home());
        QVERIFY(mine.ok());
        QCOMPARE(mine->recipe, std::string("/elsewhere/recipe.yaml"));
        QCOMPARE(mine->numProcesses, 4);

        // After attempt 1 is recorded, the next is attempt 2.
        auto store = storage::RunStore::open(storage::historyFile(home()));
        QVERIFY(store.ok());
        storage::RunAttempt first;
        first.attempt = 1;
        QVERIFY(store->recordAttempt(id, first).ok());
        auto again = continuing("failed-run");
        QVERIFY(again.ok());
        QCOMPARE(again->continuation->attempt.attempt, 2);
        QCOMPARE(again->runName, std::string("2"));
    }

    void runsThatCannotGoOnAreRefusedWithTheReason()
    {
        addRun("done-run", storage::RunStatus::Completed);
        auto done = continuing("done-run");
        QVERIFY(!done.ok());
        QVERIFY2(done.error().message.find("completed: it has nothing left to train") != std::string::npos,
                 done.error().message.c_str());

        addRun("live-run", storage::RunStatus::Running);
        auto live = continuing("live-run");
        QVERIFY(!live.ok());
        QVERIFY2(live.error().message.find("is running; only a run that has ended goes on") != std::string::npos,
                 live.error().message.c_str());

        addRun("bare-run", storage::RunStatus::Failed);
        auto bare = continuing("bare-run");
        QVERIFY(!bare.ok());
        QVERIFY2(bare.error().message.find("has no complete checkpoint") != std::string::npos, bare.error().message.c_str());

        addRun("cluster-run", storage::RunStatus::Failed, "slurm:12");
        checkpointAt(RunLayout(home() / "runs" / "cluster-run"), 2, true);
        auto cluster = continuing("cluster-run");
        QVERIFY(!cluster.ok());
        QVERIFY2(cluster.error().message.find("is not an engine run of this machine") != std::string::npos,
                 cluster.error().message.c_str());

        QVERIFY(!continuing("no-such-run").ok());
    }

    void anAttemptTrainsAsTheRunDid()
    {
        const std::string original = config::planToJson(demoPlan());
        QVERIFY(sameTraining(original, demoPlan()).ok());
        config::RunPlan other = demoPlan();
        other.numProcesses = 4;
        auto differs = sameTraining(original, other);
        QVERIFY(!differs.ok());
        QVERIFY2(differs.error().message.find("its num_processes differs from the run's") != std::string::npos,
                 differs.error().message.c_str());
        config::RunPlan moved = demoPlan();
        moved.runDir = "/another/folder"; // folders, ports and faults may differ
        QVERIFY(sameTraining(original, moved).ok());
        QVERIFY(!sameTraining("not json", demoPlan()).ok());
    }
};

QTEST_APPLESS_MAIN(TestContinuation)
#include "tst_continuation.moc"
