// #57 item 7: a cluster run put in a history after the fact (`runs follow DIR`, `runs follow
// --all`) keeps its own times: created when it was submitted (run.json), not when this history
// learned of it; its end (decideJobEnd) when its last attempt's batch script saw it end. No process
// of SLURM's is needed: the end's node names are asked of a SLURM that may be absent.

#include "app/cluster/adoption.h"
#include "app/cluster/follower.h"
#include "storage/run_store.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

class TestAdoption : public QObject {
    Q_OBJECT

private slots:
    void aCaughtUpRunKeepsItsTimes()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const fs::path run = root / "shared/runs/r";
        fs::create_directories(run / "attempts/0/node0");
        std::ofstream(run / "run.json") << R"({"name": "r", "job": "slurm:12", "distributed_type": "MULTI_CPU",)"
                                        << R"( "mixed_precision": "no", "user": "me", "host": "login", "num_machines": 1,)"
                                        << R"( "num_processes": 1, "submitted": 1000.5})";
        std::ofstream(run / "slurm_job_id") << "12\n";
        std::ofstream(run / "attempts/0/attempt.txt") << "job_id=12\nnodes=n1\nstarted=1010\nended=1100\nexit=0\n";
        auto store = storage::RunStore::open((root / "history.db").string());
        QVERIFY(store);
        auto id = cluster::adoptFolder(*store, run);
        QVERIFY2(id, id ? "" : id.error().message.c_str());
        QCOMPARE(store->run(*id)->summary.createdAt, 1000.5);

        const cluster::JobState completed{"COMPLETED", "None", "n1", "0:0"};
        const auto outcome = cluster::decideJobEnd(cluster::SlurmClient(), run, completed, 1, 1);
        QCOMPARE(outcome.endedAt.value_or(0), 1100.0);
        QVERIFY(store->markRunning(*id, 1010.0));
        QVERIFY(store->finishRun(*id, outcome.end, outcome.endedAt));
        const auto summary = store->run(*id)->summary;
        QCOMPARE(summary.startedAt.value_or(0), 1010.0);
        QCOMPARE(summary.endedAt.value_or(0), 1100.0);
    }
};

QTEST_GUILESS_MAIN(TestAdoption)
#include "tst_adoption.moc"
