// Faults that used to be reported wrongly, each on a real 2-rank run of shardscope-worker:
//   - a run cut short (a rank declared hung that then cancels cleanly) must not end "completed";
//   - a stopped rank (SIGSTOP) is the one named as hung, not the healthy rank waiting for it;
//   - a rank busy longer than the heartbeat timeout (a long step) is not taken as hung;
//   - one rank's own error (a truncated optimizer file) is the root cause, and its peer ends
//     with an ordinary error (exit 5), never std::terminate;
//   - ranks that disagree on the resumed step fail at once, naming the rank.

#include "storage/run_store.h"
#include "tests/common/files.h"
#include "tests/common/recipe_run.h"
#include "storage/store_paths.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <filesystem>
#include <thread>

using namespace shardscope::storage;
namespace testing = shardscope::testing;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");

const char* kEndless = "name: endless\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                       "training: {per_device_batch_size: 8, max_steps: 1000000}\n";

// A small tmpfs for the history and the runs (the store's own filesystem, not a file-size
// limit on the ranks): it can be filled, emptied again and made read-only.
class SmallDisk {
public:
    SmallDisk()
    {
        if (geteuid() != 0 || !m_dir.isValid())
            return;
        // Room for a whole 4000-step run of two ranks (about 17 MB of history with its WAL, 7 MB of
        // events, logs): only fill() makes it full. At 24 MB the run itself filled it at its end.
        m_mounted = ::mount("tmpfs", m_dir.path().toUtf8().constData(), "tmpfs", 0, "size=64m") == 0;
    }
    ~SmallDisk()
    {
        if (m_mounted)
            ::umount2(m_dir.path().toUtf8().constData(), MNT_DETACH);
    }
    bool mounted() const { return m_mounted; }
    QString path() const { return m_dir.path(); }
    // Writes a file until the disk is full.
    void fill()
    {
        QFile filler(m_dir.filePath("filler"));
        filler.open(QIODevice::WriteOnly);
        const QByteArray block(64 * 1024, 'x');
        while (filler.write(block) == block.size() && filler.flush()) { }
        const QByteArray small(512, 'x'); // the last pages too
        while (filler.write(small) == small.size() && filler.flush()) { }
    }
    void unfill() { QFile::remove(m_dir.filePath("filler")); }
    bool remountReadOnly()
    {
        return ::mount(nullptr, m_dir.path().toUtf8().constData(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
    }
    bool remountReadWrite() { return ::mount(nullptr, m_dir.path().toUtf8().constData(), nullptr, MS_REMOUNT, nullptr) == 0; }

private:
    QTemporaryDir m_dir;
    bool m_mounted = false;
};

struct Launch {
    Launch() = default;
    // The history and the runs in `homeParent`/home (a SmallDisk).
    explicit Launch(const QString& homeParent) : home(homeParent + "/home-XXXXXX") { }
    QTemporaryDir home;
    QProcess process;
    QString recipe;

    void start(const QString& name, const QByteArray& recipeText, const QStringList& extra)
    {
        recipe = home.filePath(name + ".yaml");
        QFile f(recipe);
        f.open(QIODevice::WriteOnly);
        f.write(recipeText);
        f.close();
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.path());
        process.setProcessEnvironment(env);
        process.setProcessChannelMode(QProcess::MergedChannels);
        process.start(kShardscope, QStringList{"launch", "--num_processes", "2", "--recipe", recipe, "--run_name", name} + extra);
    }
    QString runDir(const QString& name) const { return home.filePath("runs/" + name); }
    QList<QJsonObject> events(const QString& name) const
    {
        QList<QJsonObject> out;
        QFile file(runDir(name) + "/events.jsonl");
        if (file.open(QIODevice::ReadOnly))
            while (!file.atEnd())
                out << QJsonDocument::fromJson(file.readLine()).object();
        return out;
    }
    // Rank 0's loss at each step of run `name`, from its events.
    QMap<qint64, double> rankZeroLosses(const QString& name) const
    {
        QMap<qint64, double> losses;
        for (const auto& e : events(name))
            if (e["type"] == "step" && e["rank"].toInt() == 0)
                losses[e["step"].toInteger()] = e["loss"].toDouble();
        return losses;
    }
    // `shardscope launch --continue_run name` in this home: its exit code (-1: it did not end) and output.
    std::pair<int, QString> continueRun(const QString& name)
    {
        QProcess go;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.path());
        go.setProcessEnvironment(env);
        go.setProcessChannelMode(QProcess::MergedChannels);
        go.start(kShardscope, {"launch", "--continue_run", name});
        const bool ended = go.waitForFinished(120000);
        return {ended ? go.exitCode() : -1, QString::fromUtf8(go.readAll())};
    }
    // Waits until rank `rank` has reported `steps` steps; returns its pid (0 on timeout).
    qint64 pidAfterSteps(const QString& name, int rank, int steps)
    {
        for (int i = 0; i < 600; ++i) {
            qint64 pid = 0;
            int seen = 0;
            for (const auto& e : events(name)) {
                if (e["type"] == "hello" && e["rank"].toInt() == rank)
                    pid = e["pid"].toInteger();
                if (e["type"] == "step" && e["rank"].toInt() == rank)
                    ++seen;
            }
            if (pid && seen >= steps)
                return pid;
            QTest::qWait(100);
        }
        return 0;
    }
    // The history's record of run `name`.
    RunDetails details(const QString& name)
    {
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        if (!store)
            qFatal("%s", store.error().message.c_str());
        auto runs = store->listRuns();
        if (!runs)
            qFatal("%s", runs.error().message.c_str());
        for (const auto& r : *runs)
            if (r.name == name.toStdString()) {
                auto d = store->run(r.id);
                if (!d)
                    qFatal("%s", d.error().message.c_str());
                return *d;
            }
        qFatal("run %s is not in the history", qPrintable(name));
    }
};

// Rank 0's loss rows of the history, by step; a step seen twice goes to `repeated`.
QMap<qint64, double> historyRankZeroLosses(const std::vector<shardscope::storage::MetricRow>& rows, QList<qint64>& repeated)
{
    QMap<qint64, double> losses;
    for (const auto& row : rows)
        if (row.key == "loss" && row.rank == 0) {
            if (losses.contains(row.step))
                repeated << row.step;
            losses[row.step] = row.value;
        }
    return losses;
}

// `shardscope runs list` on `home`: its exit code and output.
std::pair<int, QString> runsList(const QString& home)
{
    QProcess list;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOME", home);
    list.setProcessEnvironment(env);
    list.setProcessChannelMode(QProcess::MergedChannels);
    list.start(kShardscope, {"runs", "list"});
    list.waitForFinished(30000);
    return {list.exitStatus() == QProcess::NormalExit ? list.exitCode() : -1, QString::fromUtf8(list.readAll())};
}

// Sets `key` of a checkpoint's state_rank<N>.json, as a user editing it would.
void editState(const QString& checkpoint, int rank, const QString& key, const QJsonValue& value)
{
    QFile state(checkpoint + "/state_rank" + QString::number(rank) + ".json");
    if (!state.open(QIODevice::ReadOnly))
        qFatal("no state file in %s", qPrintable(checkpoint));
    auto json = QJsonDocument::fromJson(state.readAll()).object();
    state.close();
    json[key] = value;
    state.open(QIODevice::WriteOnly | QIODevice::Truncate);
    state.write(QJsonDocument(json).toJson());
}

const char* kResume = "name: resume\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                      "training: {per_device_batch_size: 8, max_steps: 20}\n";

// A finished run to resume from: 2 ranks, checkpoints every 5 steps.
QString checkpointedRun(Launch& l)
{
    l.start("first",
            "name: first\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
            "training: {per_device_batch_size: 8, max_steps: 10, checkpoint_every: 5}\n",
            {});
    l.process.waitForFinished(120000);
    return l.runDir("first") + "/checkpoints/step_10";
}

// A GPT at lr 80: its loss is NaN within a few steps.
QByteArray divergingRecipe(int maxSteps)
{
    return "name: diverge\nseed: 5\nmodel: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}\n"
           "data: {type: text}\noptimizer: {type: adamw, lr: 80}\ntraining: {per_device_batch_size: 2, max_steps: "
           + QByteArray::number(maxSteps) + "}\n";
}

} // namespace

class TestReliability : public QObject {
    Q_OBJECT
private slots:
    // Point 1: a rank declared hung that then cancels cleanly exits 0 — the run still failed.
    void runCutShortIsNotASuccess()
    {
        Launch l;
        l.start("cut", kEndless, {"--heartbeat_timeout", "1"});
        const qint64 rank1 = l.pidAfterSteps("cut", 1, 4);
        QVERIFY(rank1 > 0);
        kill(static_cast<pid_t>(rank1), SIGSTOP);
        QTest::qWait(2500); // past the timeout: the launcher takes rank 1 as hung and sends SIGINT
        kill(static_cast<pid_t>(rank1), SIGCONT); // it wakes, sees SIGINT, finishes the step and cancels
        QVERIFY(l.process.waitForFinished(60000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QCOMPARE(l.process.exitCode(), 124);
        QVERIFY2(out.contains("rank 1 failed first (root cause)") && out.contains("hung"), qPrintable(out));
        QVERIFY2(!out.contains("finished successfully"), qPrintable(out));
        const auto run = l.details("cut");
        QCOMPARE(run.summary.status, RunStatus::Failed);
        QCOMPARE(run.rootCauseRank.value_or(-1), 1);
        QCOMPARE(run.exitCode.value_or(0), 124);
    }

    // Point 2: the stopped rank is named, not rank 0, which waits for it in an all-reduce.
    void stoppedRankIsTheOneNamed()
    {
        Launch l;
        l.start("stop", kEndless, {"--heartbeat_timeout", "2"});
        const qint64 rank1 = l.pidAfterSteps("stop", 1, 4);
        QVERIFY(rank1 > 0);
        kill(static_cast<pid_t>(rank1), SIGSTOP);
        QVERIFY(l.process.waitForFinished(60000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QCOMPARE(l.process.exitCode(), 124);
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
        QVERIFY2(out.contains("rank 1 (pid " + QString::number(rank1) + ") hung"), qPrintable(out));
        QCOMPARE(l.details("stop").rootCauseRank.value_or(-1), 1);
    }

    // A step longer than the heartbeat timeout is work, not a hang: the heartbeat thread beats on.
    void longStepIsNotAHang()
    {
        Launch l;
        // Seconds a step on 2 cores, against a 0.5 s timeout.
        l.start("slow",
                "name: slow\nmodel: {type: gpt, n_layer: 6, n_embd: 384, n_head: 6, block_size: 256}\n"
                "training: {per_device_batch_size: 16, max_steps: 2}\n",
                {"--heartbeat_timeout", "0.5"});
        QVERIFY(l.process.waitForFinished(170000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY2(l.process.exitCode() == 0, qPrintable(out));
        double longest = 0;
        for (const auto& e : l.events("slow"))
            if (e["type"] == "step")
                longest = std::max(longest, e["step_time"].toDouble());
        QVERIFY2(longest > 0.5, qPrintable(QString("the steps took %1 s: not longer than the timeout").arg(longest)));
        QCOMPARE(l.details("slow").summary.status, RunStatus::Completed);
        // Heartbeats keep the launcher informed but stay out of the run's event file.
        for (const auto& e : l.events("slow"))
            QVERIFY(e["type"] != "heartbeat");
    }

    // #22 point 4: a rank that runs out of memory says in which phase of which step, what it held
    // and what the estimate for the config is; the error's kind is "oom", and the history has it.
    void outOfMemoryIsReportedWithItsPhaseAndTheEstimate()
    {
        Launch l;
        l.start("oom", "name: oom\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\ntraining: {max_steps: 10}\n",
                {"--", "--oom-at-step", "3"});
        QVERIFY(l.process.waitForFinished(60000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY(l.process.exitCode() != 0);
        QVERIFY2(
            out.contains("oom: out of memory in forward of step 3 (DefaultCPUAllocator: can't allocate memory: you "
                         "tried to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)); this rank held"),
            qPrintable(out));
        QVERIFY2(out.contains(QRegularExpression("this rank held [0-9.]+ MiB resident; the estimate for this config is [0-9.]+ "
                                                 "[KM]iB per rank \\(model states")),
                 qPrintable(out));
        const auto details = l.details("oom");
        QCOMPARE(details.summary.status, RunStatus::Failed);
        QVERIFY2(QString::fromStdString(details.error).contains("out of memory in forward of step 3"), details.error.c_str());
    }

    // Point 3: rank 1 cannot read its optimizer file; rank 0 loses its peer. Rank 1 is the cause.
    void ownErrorIsTheRootCauseAndPeersEndCleanly()
    {
        Launch l;
        const QString checkpoint = checkpointedRun(l);
        QVERIFY(QFile::exists(checkpoint + "/optimizer_rank1.bin"));
        std::filesystem::resize_file((checkpoint + "/optimizer_rank1.bin").toStdString(), 10);
        QProcess& p = l.process;
        l.start("resume", kResume, {"--resume_from_checkpoint", checkpoint});
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAll());
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
        QCOMPARE(p.exitCode(), 4);
        QVERIFY2(out.contains("optimizer_rank1.bin"), qPrintable(out)); // the message names the file
        QVERIFY2(!out.contains("frame #"), qPrintable(out)); // no C++ backtrace
        QFile log0(l.runDir("resume") + "/logs/rank0.log");
        QVERIFY(log0.open(QIODevice::ReadOnly));
        const QString rank0 = QString::fromUtf8(log0.readAll());
        QVERIFY2(!rank0.contains("terminate called"), qPrintable(rank0));
        QVERIFY2(out.contains("rank 0 (pid") && out.contains("exited with code 5"), qPrintable(out));
        QCOMPARE(l.details("resume").rootCauseRank.value_or(-1), 1);
    }

    // Point 6: rank 1's state says another step: the ranks fail at once, naming rank 1.
    void ranksThatDisagreeOnTheResumedStepFail()
    {
        Launch l;
        const QString checkpoint = checkpointedRun(l);
        editState(checkpoint, 1, "step", 7);
        l.start("resume", kResume, {"--resume_from_checkpoint", checkpoint, "--heartbeat_timeout", "30"});
        QVERIFY(l.process.waitForFinished(60000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY2(l.process.exitCode() != 0, qPrintable(out));
        QVERIFY2(out.contains("rank 1 resumes after step 7"), qPrintable(out));
        QVERIFY2(!out.contains("hung"), qPrintable(out)); // found by the check, not by a timeout
    }

    // #43 point 7: two launches into a history that does not exist yet both record their run (one
    // of them lost the race for SQLite's switch to WAL, "database is locked", in 2 of 6 trials;
    // 8 trials here).
    void twoLaunchesIntoANewHistoryAreBothRecorded()
    {
        const QByteArray recipe = "name: race\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                  "training: {per_device_batch_size: 8, max_steps: 3}\n";
        for (int trial = 0; trial < 8; ++trial) {
            QTemporaryDir home;
            const QString recipePath = home.filePath(QStringLiteral("race.yaml"));
            shardscope::testing::writeFile(recipePath, recipe);
            QProcess a, b;
            for (auto [process, name] : {std::pair<QProcess*, const char*>{&a, "a"}, {&b, "b"}}) {
                auto env = QProcessEnvironment::systemEnvironment();
                env.insert("SHARDSCOPE_HOME", home.filePath(QStringLiteral("new")));
                process->setProcessEnvironment(env);
                process->setProcessChannelMode(QProcess::MergedChannels);
                process->start(kShardscope, {"launch", "--recipe", recipePath, "--run_name", name});
            }
            QVERIFY(a.waitForFinished(120000) && b.waitForFinished(120000));
            const QString out = QString::fromUtf8(a.readAll() + b.readAll());
            QVERIFY2(a.exitCode() == 0 && b.exitCode() == 0, qPrintable(out));
            QVERIFY2(!out.contains(QStringLiteral("not recorded in the history")), qPrintable(out));
            auto store = RunStore::open(historyFile(home.filePath(QStringLiteral("new")).toStdString()));
            QVERIFY(store.ok());
            QCOMPARE(store->listRuns()->size(), std::size_t(2));
        }
    }

    // #43 point 4: a run whose loss goes NaN (lr 80) keeps every step in the history as what it
    // is: 20 of 20 steps, the later losses NaN (not dropped, not missing), the final loss shown as
    // nan, and the CSV export writing nan.
    void nonFiniteStepsAreKept()
    {
        QTemporaryDir home;
        const QString recipePath = home.filePath(QStringLiteral("diverge.yaml"));
        shardscope::testing::writeFile(recipePath, divergingRecipe(20));
        const QString out = testing::runShardscope(home.path(),
                                                   {"launch", "--num_processes", "2", "--recipe", recipePath, "--run_name",
                                                    "diverge", "--max_nonfinite_steps",
                                                    "0"}, // trained to the end: every step is kept
                                                   120000)
                                .output;
        QVERIFY2(!out.contains(QStringLiteral("malformed")), qPrintable(out));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        const auto runId = store->resolveRun("diverge");
        QVERIFY(runId.ok());
        for (int rank : {0, 1}) {
            auto losses = store->series(*runId, rank, "loss");
            QVERIFY(losses.ok());
            QCOMPARE(losses->size(), std::size_t(20));
            QVERIFY(std::isfinite(losses->front().value));
            QVERIFY2(std::isnan(losses->back().value), qPrintable(QString::number(losses->back().value)));
        }
        const QString shown = testing::runShardscope(home.path(), {"runs", "show", "diverge"}).output;
        QVERIFY2(shown.contains(QRegularExpression(QStringLiteral("final loss +nan"))), qPrintable(shown));
        QVERIFY2(shown.contains(QRegularExpression(QStringLiteral("steps +20"))), qPrintable(shown));
        const QString exported = testing::runShardscope(home.path(), {"runs", "export", "diverge", "--format", "csv"}).output;
        QVERIFY2(exported.contains(QRegularExpression(QStringLiteral(",20,[0-9.]+,loss,nan\\n"))),
                 qPrintable(exported.right(300)));
    }

    // #45 point 4: a diverged run (lr 80: NaN within a few steps) is never a green "completed": by
    // default it stops after 3 non-finite losses in a row, failed, saying from which step and,
    // from the engine's probe, the module where the values began.
    void divergedRunStopsAsFailed()
    {
        QTemporaryDir home;
        const QString recipePath = home.filePath(QStringLiteral("diverge.yaml"));
        shardscope::testing::writeFile(recipePath, divergingRecipe(200));
        const auto ran = testing::runShardscope(
            home.path(), {"launch", "--num_processes", "2", "--recipe", recipePath, "--run_name", "diverge"}, 120000);
        QVERIFY2(ran.exitCode == 1, qPrintable(ran.output));
        static const QRegularExpression said(
            QStringLiteral("the run diverged: its loss is NaN from step (\\d+) on \\(3 steps in a row"));
        QVERIFY2(said.match(ran.output).hasMatch(), qPrintable(ran.output));
        // Where the probe saw it begin: a block's output in forward, or the gradient into it in backward.
        static const QRegularExpression where(
            QStringLiteral("the first non-finite (output on this rank was|gradient was the one into) h\\.\\d+'s"));
        QVERIFY2(where.match(ran.output).hasMatch(), qPrintable(ran.output));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto details = store->run(*store->resolveRun("diverge"));
        QVERIFY(details.ok());
        QCOMPARE(details->summary.status, RunStatus::Failed);
        QVERIFY2(QString::fromStdString(details->error).contains("diverged"), details->error.c_str());
        QVERIFY(details->summary.lastStep.value_or(200) < 200);
    }

    // #43 point 9: a healthy run whose per-step loss is noisy (an MLP on synthetic regression,
    // batch 8, 400 steps) raises no loss-spike warning (it raised 9).
    void noisyHealthyRunRaisesNoLossSpike()
    {
        QTemporaryDir home;
        const QString recipePath = home.filePath(QStringLiteral("noisy.yaml"));
        shardscope::testing::writeFile(recipePath, "name: noisy\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                                   "training: {per_device_batch_size: 8, max_steps: 400}\n");
        const auto launched = testing::runShardscope(
            home.path(), {"launch", "--num_processes", "2", "--recipe", recipePath, "--run_name", "noisy"}, 120000);
        const QString& out = launched.output;
        QCOMPARE(launched.exitCode, 0);
        QVERIFY2(!out.contains(QStringLiteral("loss spike")), qPrintable(out));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        QVERIFY(store->series(*store->resolveRun("noisy"), 0, "loss_spike")->empty());
        QCOMPARE(store->series(*store->resolveRun("noisy"), 0, "loss")->size(), std::size_t(400));
    }

    // A signal that asks for a checkpoint (SIGTERM: a laptop closing, a preemption; SIGUSR1: a
    // time limit's warning) to the launcher: every rank stops after the same step with the same
    // checkpoint, the launcher exits 75 (SIGUSR1) or 143, and the run resumed from it trains the losses of an
    // uninterrupted run bit for bit.
    void stopSignalSavesACheckpointToResumeExactly_data()
    {
        QTest::addColumn<int>("sig");
        QTest::newRow("SIGTERM") << int(SIGTERM);
        QTest::newRow("SIGUSR1") << int(SIGUSR1);
    }
    void stopSignalSavesACheckpointToResumeExactly()
    {
        QFETCH(int, sig);
        const QByteArray recipe = "name: sig\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                  "training: {per_device_batch_size: 8, max_steps: 24}\n";
        const QStringList slow = {"--", "--slow-rank", "1", "--slow-forward-ms", "60"}; // time to signal mid-run
        Launch l;
        l.start("cut", recipe, slow);
        QVERIFY(l.pidAfterSteps("cut", 0, 4) > 0);
        kill(static_cast<pid_t>(l.process.processId()), sig);
        QVERIFY(l.process.waitForFinished(120000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY2(l.process.exitCode() == (sig == SIGUSR1 ? 75 : 128 + SIGTERM), qPrintable(out)); // only 75 requeues
        QVERIFY2(out.contains("with a checkpoint to resume from"), qPrintable(out));
        std::map<int, qint64> doneAt;
        QMap<qint64, double> losses; // step -> rank 0's loss, over both parts of the run
        for (const auto& e : l.events("cut")) {
            if (e["type"] == "done") {
                QCOMPARE(e["status"].toString(), QStringLiteral("checkpointed"));
                doneAt[e["rank"].toInt()] = e["steps"].toInteger();
            }
            if (e["type"] == "step" && e["rank"].toInt() == 0)
                losses[e["step"].toInteger()] = e["loss"].toDouble();
        }
        QCOMPARE(doneAt.size(), std::size_t(2));
        const qint64 stoppedAt = doneAt[0];
        QCOMPARE(doneAt[1], stoppedAt); // agreed: the same step on every rank
        QVERIFY2(stoppedAt >= 4 && stoppedAt < 24, qPrintable(out));
        const QString checkpoint = l.runDir("cut") + "/checkpoints/step_" + QString::number(stoppedAt);
        QVERIFY2(QFile::exists(checkpoint + "/manifest.json"), qPrintable(checkpoint));
        QCOMPARE(l.details("cut").summary.status, RunStatus::Cancelled);

        Launch resumed; // in another home: "latest" could not mean another run's checkpoint
        resumed.start("rest", recipe, QStringList{"--resume_from_checkpoint", checkpoint} + slow);
        QVERIFY(resumed.process.waitForFinished(120000));
        QVERIFY2(resumed.process.exitCode() == 0, resumed.process.readAll().constData());
        for (const auto& e : resumed.events("rest"))
            if (e["type"] == "step" && e["rank"].toInt() == 0) {
                QVERIFY(e["step"].toInteger() > stoppedAt);
                losses[e["step"].toInteger()] = e["loss"].toDouble();
            }
        Launch whole;
        whole.start("whole", recipe, {});
        QVERIFY(whole.process.waitForFinished(120000));
        QCOMPARE(whole.process.exitCode(), 0);
        const QMap<qint64, double> uninterrupted = whole.rankZeroLosses("whole");
        QCOMPARE(uninterrupted.size(), 24);
        QCOMPARE(losses, uninterrupted); // bit for bit: the doubles as the events carry them
    }

    // #45 point 2: a run stopped with a checkpoint goes on as the same run of the history (its next
    // attempt), from its newest checkpoint, with its own recipe and process count: one run, two
    // attempts, the curve continuing where it left off (each step once), equal to an uninterrupted run's.
    void continuedRunIsTheSameRunsNextAttempt()
    {
        const QByteArray recipe = "name: sig\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                  "training: {per_device_batch_size: 8, max_steps: 24}\n";
        Launch l;
        l.start("cut", recipe, {"--", "--slow-rank", "1", "--slow-forward-ms", "60"});
        QVERIFY(l.pidAfterSteps("cut", 0, 4) > 0);
        kill(static_cast<pid_t>(l.process.processId()), SIGTERM);
        QVERIFY(l.process.waitForFinished(120000));
        QCOMPARE(l.details("cut").summary.status, RunStatus::Cancelled);
        qint64 stoppedAt = 0;
        for (const auto& e : l.events("cut"))
            if (e["type"] == "done" && e["rank"].toInt() == 0)
                stoppedAt = e["steps"].toInteger();
        QVERIFY(stoppedAt >= 4 && stoppedAt < 24);

        const auto [code, out] = l.continueRun("cut");
        QVERIFY2(code == 0, qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("/checkpoints/step_%1 as attempt 1").arg(stoppedAt)), qPrintable(out));
        const RunDetails run = l.details("cut");
        QCOMPARE(run.summary.status, RunStatus::Completed);
        QCOMPARE(run.summary.lastStep.value_or(0), 24);
        QCOMPARE(run.attempts.size(), std::size_t(2));
        QCOMPARE(run.attempts[0].resumedStep, 0);
        QCOMPARE(run.attempts[1].attempt, 1);
        QCOMPARE(run.attempts[1].resumedStep, stoppedAt);
        QVERIFY(QString::fromStdString(run.attempts[1].resumedFrom).endsWith(QStringLiteral("step_%1").arg(stoppedAt)));
        QCOMPARE(run.attempts[1].exitCode.value_or(-1), 0);
        QVERIFY(QFile::exists(l.runDir("cut") + "/attempts/1/events.jsonl")); // the attempt's own folder
        auto store = RunStore::open(historyFile(l.home.path().toStdString()));
        QVERIFY(store.ok());
        auto listed = store->listRuns();
        QVERIFY(listed.ok());
        QCOMPARE(listed->size(), std::size_t(1)); // not a second run
        auto rows = store->metricsSince(run.summary.id, 0);
        QVERIFY(rows.ok());
        QList<qint64> repeated;
        const QMap<qint64, double> losses = historyRankZeroLosses(*rows, repeated);
        QVERIFY2(repeated.isEmpty(), qPrintable(QStringLiteral("step %1 twice").arg(repeated.value(0))));
        Launch whole;
        whole.start("whole", recipe, {});
        QVERIFY(whole.process.waitForFinished(120000));
        QCOMPARE(whole.process.exitCode(), 0);
        const QMap<qint64, double> uninterrupted = whole.rankZeroLosses("whole");
        QCOMPARE(losses, uninterrupted);

        // A completed run has nothing left to train: refused, the history as it was.
        const auto [again, refused] = l.continueRun("cut");
        QCOMPARE(again, 2);
        QVERIFY2(refused.contains("run cut completed: it has nothing left to train"), qPrintable(refused));
        QCOMPARE(l.details("cut").attempts.size(), std::size_t(2));
    }

    // #45 point 2, a failed run: the steps after its last checkpoint are redone by the next attempt
    // and kept once in the history (the attempt's), the curve equal to an uninterrupted run's.
    void continuedRunRedoesTheStepsAfterItsCheckpoint()
    {
        const QByteArray recipe = "name: oom\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                  "training: {per_device_batch_size: 8, max_steps: 12, checkpoint_every: 5}\n";
        Launch l;
        l.start("failed", recipe, {"--", "--oom-at-step", "8"});
        QVERIFY(l.process.waitForFinished(120000));
        QVERIFY(l.process.exitCode() != 0);
        QCOMPARE(l.details("failed").summary.status, RunStatus::Failed);
        QCOMPARE(l.details("failed").summary.lastStep.value_or(0), 7);
        const auto [code, out] = l.continueRun("failed");
        QVERIFY2(code == 0, qPrintable(out));
        const RunDetails run = l.details("failed");
        QCOMPARE(run.summary.status, RunStatus::Completed);
        QVERIFY(run.error.empty()); // the first attempt's error belongs to it, not to the run that completed
        QCOMPARE(run.attempts.size(), std::size_t(2));
        QCOMPARE(run.attempts[0].exitCode.value_or(0), l.process.exitCode());
        QCOMPARE(run.attempts[1].resumedStep, 5);
        auto store = RunStore::open(historyFile(l.home.path().toStdString()));
        QVERIFY(store.ok());
        auto rows = store->metricsSince(run.summary.id, 0);
        QVERIFY(rows.ok());
        QList<qint64> repeated;
        const QMap<qint64, double> losses = historyRankZeroLosses(*rows, repeated);
        QVERIFY2(repeated.isEmpty(), qPrintable(QStringLiteral("step %1 twice").arg(repeated.value(0))));
        // The block summaries (Note [Metric blocks]), which count the rows, were rebuilt without the redone steps.
        QCOMPARE(l.details("failed").metricRows, static_cast<std::int64_t>(rows->size()));
        Launch whole;
        whole.start("whole", recipe, {});
        QVERIFY(whole.process.waitForFinished(120000));
        QCOMPARE(whole.process.exitCode(), 0);
        const QMap<qint64, double> uninterrupted = whole.rankZeroLosses("whole");
        QCOMPARE(uninterrupted.size(), 12);
        QCOMPARE(losses, uninterrupted);
    }

    // Point 7: an edited state file is named, without nlohmann's raw exception text.
    void editedStateFileIsNamed()
    {
        Launch l;
        const QString checkpoint = checkpointedRun(l);
        editState(checkpoint, 1, "step", "ten");
        l.start("resume", kResume, {"--resume_from_checkpoint", checkpoint});
        QVERIFY(l.process.waitForFinished(60000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QCOMPARE(l.process.exitCode(), 4);
        QVERIFY2(out.contains("state_rank1.json is not as Shardscope wrote it"), qPrintable(out));
        QVERIFY2(!out.contains("[json.exception"), qPrintable(out));
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
    }

    // Point 7: what a rank would refuse is refused before any rank starts, with the key named.
    void rankErrorsAreCaughtBeforeLaunch_data()
    {
        QTest::addColumn<QByteArray>("recipe");
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<QString>("message");
        QTest::newRow("max_steps below warm-up")
            << QByteArray("name: w\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\nschedule: {warmup_steps: 50}\n"
                          "training: {per_device_batch_size: 8, max_steps: 100}\n")
            << QStringList{"--max_steps", "10"} << "'schedule.warmup_steps' (50) exceeds 'training.max_steps' (10)";
        QTest::newRow("absurd lr") << QByteArray("name: lr\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                                                 "optimizer: {lr: 1e300}\ntraining: {per_device_batch_size: 8, max_steps: 10}\n")
                                   << QStringList{} << "'optimizer.lr' is 1e300";
        QTest::newRow("vocabulary smaller than the bytes")
            << QByteArray("name: v\nmodel: {type: gpt, vocab_size: 64, n_layer: 1, n_embd: 16, n_head: 2, block_size: 16}\n"
                          "data: {type: text}\ntraining: {per_device_batch_size: 2, max_steps: 2}\n")
            << QStringList{} << "model.vocab_size is 64 but the text";
        QTest::newRow("missing checkpoint") << QByteArray(kEndless)
                                            << QStringList{"--resume_from_checkpoint", "/nonexistent/step_5"} << "does not exist";
        QTest::newRow("store on every address")
            << QByteArray(kEndless) << QStringList{"--main_process_ip", "0.0.0.0"} << "has no authentication";
    }
    void rankErrorsAreCaughtBeforeLaunch()
    {
        QFETCH(QByteArray, recipe);
        QFETCH(QStringList, extra);
        QFETCH(QString, message);
        Launch l;
        l.start("refused", recipe, extra);
        QVERIFY(l.process.waitForFinished(30000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QCOMPARE(l.process.exitCode(), 2);
        QVERIFY2(out.contains(message), qPrintable(out));
        QVERIFY2(!out.contains("rank 0 (pid"), qPrintable(out)); // no rank ran
        QVERIFY2(!out.contains("frame #") && !out.contains("json.exception"), qPrintable(out));
    }

    // Point 7: a machine other than 0 says it waits for machine 0, and gives up with a reason.
    void machineOneSaysItWaitsForMachineZero()
    {
        Launch l;
        const int port = 1 + (static_cast<int>(QCoreApplication::applicationPid()) % 20000) + 40000;
        l.start("m1", kEndless,
                {"--num_machines", "2", "--machine_rank", "1", "--main_process_port", QString::number(port),
                 "--rendezvous_timeout", "3"});
        QVERIFY(l.process.waitForFinished(30000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY(l.process.exitCode() != 0);
        QVERIFY2(out.contains("waiting for machine 0 at 127.0.0.1:" + QString::number(port)), qPrintable(out));
        QVERIFY2(out.contains("machine 0 did not answer"), qPrintable(out));
    }

    // Point 7: a stop during a long eval ends it at the next batch, not after the whole eval.
    void stopDuringEvalIsPrompt()
    {
        Launch l;
        // Each rank evaluates 150,000 samples one at a time (tens of seconds) after step 2.
        l.start("eval",
                "name: eval\nmodel: {type: mlp}\ndata: {type: synthetic_regression, num_samples: 400000, "
                "eval_fraction: 0.75}\ntraining: {per_device_batch_size: 1, max_steps: 4, eval_every: 2}\n",
                {});
        QVERIFY(l.pidAfterSteps("eval", 0, 2) > 0);
        QTest::qWait(500); // inside the eval
        const auto stopAsked = std::chrono::steady_clock::now();
        kill(static_cast<pid_t>(l.process.processId()), SIGINT); // Ctrl-C (SIGTERM would save a checkpoint)
        QVERIFY(l.process.waitForFinished(60000));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopAsked).count();
        const QString out = QString::fromUtf8(l.process.readAll());
        QCOMPARE(l.process.exitCode(), 130);
        QVERIFY2(seconds < 3, qPrintable(QString("stopping took %1 s\n%2").arg(seconds).arg(out)));
    }

    // Points 4 and 5: the store's own filesystem fills while the run goes on, and frees again.
    void fullDiskLosesNothing()
    {
        SmallDisk disk;
        if (!disk.mounted())
            QSKIP("mounting a small filesystem for the history needs root (CI runs as root)");
        Launch l(disk.path());
        l.start("full",
                "name: full\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                "training: {per_device_batch_size: 8, max_steps: 4000}\nexport: {enabled: false}\n",
                {});
        QVERIFY(l.pidAfterSteps("full", 0, 4) > 0);
        disk.fill();
        QTest::qWait(2500);
        disk.unfill();
        QVERIFY(l.process.waitForFinished(170000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY2(l.process.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains("could not be written for"), qPrintable(out)); // the outage is reported
        int stepLines = 0;
        for (const auto& e : l.events("full"))
            stepLines += e["type"] == "step";
        QVERIFY2(stepLines == 2 * 4000,
                 qPrintable(QString::number(stepLines) + " step lines; the launcher said:\n" + out)); // events.jsonl lost no line
        const auto run = l.details("full");
        QCOMPARE(run.summary.status, RunStatus::Completed);
        QCOMPARE(run.summary.lastStep.value_or(0), std::int64_t(4000));
        auto store = RunStore::open(historyFile(l.home.path().toStdString()));
        QVERIFY(store.ok());
        for (int rank : {0, 1})
            QCOMPARE(store->series(run.summary.id, rank, "loss")->size(), size_t(4000)); // nor the history a row
        QVERIFY2(run.error.find("could not be written") != std::string::npos, run.error.c_str());
    }

    // Point 4: the disk is still full when the run ends: the outcome waits in the run directory,
    // the history can be read meanwhile, and records the real end once there is space.
    void outcomeOutlivesAFullDisk()
    {
        SmallDisk disk;
        if (!disk.mounted())
            QSKIP("mounting a small filesystem for the history needs root (CI runs as root)");
        Launch l(disk.path());
        l.start("late",
                "name: late\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                "training: {per_device_batch_size: 8, max_steps: 1500}\nexport: {enabled: false}\n",
                {});
        QVERIFY(l.pidAfterSteps("late", 0, 4) > 0);
        disk.fill();
        QVERIFY(l.process.waitForFinished(170000));
        const QString out = QString::fromUtf8(l.process.readAll());
        QVERIFY2(l.process.exitCode() == 0, qPrintable(out)); // the run itself completed
        QVERIFY2(out.contains("outcome.json"), qPrintable(out));
        // Still full: reading the history works.
        const auto [listedCode, listed] = runsList(l.home.path());
        QVERIFY2(listedCode == 0 && listed.contains("late"), qPrintable(listed));
        disk.unfill();
        const auto run = l.details("late"); // an open with space: the outcome is recorded
        QCOMPARE(run.summary.status, RunStatus::Completed);
        QCOMPARE(run.exitCode.value_or(-1), 0);
    }

    // Point 4: a read-only home whose history was closed cleanly (no -wal/-shm beside it).
    void readOnlyHomeAfterACleanRunIsListed()
    {
        SmallDisk disk;
        if (!disk.mounted())
            QSKIP("mounting a small filesystem for the history needs root (CI runs as root)");
        Launch l(disk.path());
        l.start("done",
                "name: done\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n"
                "training: {per_device_batch_size: 8, max_steps: 5}\n",
                {});
        QVERIFY(l.process.waitForFinished(60000));
        QCOMPARE(l.process.exitCode(), 0);
        QVERIFY(disk.remountReadOnly());
        const auto [listedCode, listed] = runsList(l.home.path());
        QVERIFY(disk.remountReadWrite());
        QVERIFY2(listedCode == 0 && listed.contains("done") && listed.contains("completed"), qPrintable(listed));
    }

    // Point 4: a read-only home holding a run whose launcher died is listed, not refused.
    void readOnlyHomeIsListed()
    {
        SmallDisk disk;
        if (!disk.mounted())
            QSKIP("mounting a small filesystem for the history needs root (CI runs as root)");
        Launch l(disk.path());
        l.start("orphan", kEndless, {});
        QVERIFY(l.pidAfterSteps("orphan", 0, 4) > 0);
        kill(static_cast<pid_t>(l.process.processId()), SIGKILL); // its ranks follow (parent-death signal)
        QVERIFY(l.process.waitForFinished(30000));
        QTest::qWait(500);
        QVERIFY(disk.remountReadOnly());
        const auto [listedCode, listed] = runsList(l.home.path());
        QVERIFY2(listedCode == 0, qPrintable(listed));
        QVERIFY2(listed.contains("orphan") && listed.contains("running"), qPrintable(listed));
        QVERIFY2(listed.contains("not writable") || listed.contains("read-only"), qPrintable(listed)); // and says why
        QVERIFY(disk.remountReadWrite());
        QCOMPARE(l.details("orphan").summary.status, RunStatus::Interrupted); // recorded once it can be
    }
};

QTEST_GUILESS_MAIN(TestReliability)
#include "tst_reliability.moc"
