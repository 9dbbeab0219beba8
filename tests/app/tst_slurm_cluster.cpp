// `shardscope launch --target slurm` against a real SLURM cluster of three nodes started on this
// machine (scripts/slurm-cluster.sh: several slurmd, loopback addresses, its own ports and state
// folder; stopped at the end by PID). Skipped, with the reason, where SLURM's packages are not
// installed (./scripts/setup.sh installs them).

#include "tests/common/files.h"
#include "tests/common/recipe_run.h"
#include "tests/common/slurm_lab.h"
#include "tests/common/ssh_login.h"

#include <QDir>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

namespace testing = shardscope::testing;

namespace {

const QString kRecipe = QStringLiteral(
    "name: slurm\nseed: 5\nmodel: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}\n"
    "data: {type: text}\noptimizer: {type: adamw, lr: 0.003}\n"
    "training: {per_device_batch_size: 2, max_steps: 6}\n");

} // namespace

class TestSlurmCluster : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    testing::SlurmLab m_cluster;
    QString m_profiles;

    // Runs are named per test process: the history (SHARDSCOPE_HOME) outlives it.
    static QString runName(const QString& baseName)
    {
        return baseName + "-" + QString::number(QCoreApplication::applicationPid());
    }
    QString runDir(const QString& baseName) const { return m_dir.filePath("shared/runs/" + runName(baseName)); }

    // `shardscope launch --target ...` started (not waited for).
    void startSubmit(QProcess& p, const QString& baseName, const QStringList& extra, const QString& target,
                     const QString& recipeText)
    {
        const QString name = runName(baseName);
        const QString recipe = m_dir.filePath(name + "-recipe.yaml");
        testing::writeFile(recipe, recipeText.toUtf8());
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(testing::shardscopeBinary(), QStringList{"launch", "--target", target, "--cluster_profiles", m_profiles,
                                                         "--recipe", recipe, "--run_name", name}
                                                 + extra);
    }

    // Its end: the exit code, the output, and the events of the whole run (every attempt's, gathered
    // into the run folder when the job ended).
    testing::RecipeRun finished(QProcess& p, const QString& baseName, int timeoutMs = 300000)
    {
        p.waitForFinished(timeoutMs);
        testing::RecipeRun run;
        run.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
        run.output = QString::fromUtf8(p.readAll());
        run.runDir = runDir(baseName);
        run.events = testing::readEvents(run.runDir + "/events.jsonl");
        return run;
    }

    testing::RecipeRun submit(const QString& baseName, const QStringList& extra, const QString& target = QStringLiteral("slurm"),
                              const QString& recipeText = kRecipe)
    {
        QProcess p;
        startSubmit(p, baseName, extra, target, recipeText);
        return finished(p, baseName);
    }

    // A job's state as squeue says it ("" once it left the queue).
    static QString squeueState(const QString& jobId)
    {
        QProcess p;
        p.start(QStringLiteral("squeue"), {"-h", "-j", jobId, "-o", "%T"});
        p.waitForFinished(30000);
        return QString::fromUtf8(p.readAll()).trimmed();
    }

    // The step events an events file holds so far.
    static int stepsOf(const QString& eventsFile)
    {
        const auto all = testing::readEvents(eventsFile);
        return int(std::count_if(all.begin(), all.end(), [](const QJsonObject& e) { return e["type"].toString() == "step"; }));
    }

    // `shardscope runs show NAME`'s output.
    static QString runsShow(const QString& name)
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(testing::shardscopeBinary(), {"runs", "show", name});
        p.waitForFinished(60000);
        return QString::fromUtf8(p.readAll());
    }

    // `shardscope ARGS` as another machine runs it: its own history (SHARDSCOPE_HOME=home), the
    // same shared folder and cluster. Its exit code and output.
    static std::pair<int, QString> onMachine(const QString& home, const QStringList& args, int timeoutMs = 60000)
    {
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        if (!home.isEmpty())
            env.insert(QStringLiteral("SHARDSCOPE_HOME"), home);
        p.setProcessEnvironment(env);
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(testing::shardscopeBinary(), args);
        p.waitForFinished(timeoutMs);
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll())};
    }

    // No `runs follow` of `home` is left (the followers --all started have recorded their ends).
    static bool followersGone(const QString& home)
    {
        for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
            const QByteArray cmdline = testing::readFile("/proc/" + pid + "/cmdline");
            const QByteArray env = testing::readFile("/proc/" + pid + "/environ");
            if (cmdline.contains(QByteArray("follow\0", 7)) && env.contains("SHARDSCOPE_HOME=" + home.toUtf8() + '\0'))
                return false;
        }
        return true;
    }

private slots:
    void initTestCase()
    {
        if (const QString why = testing::SlurmLab::unavailable(); !why.isEmpty())
            QSKIP(qPrintable(why));
        m_dir.setAutoRemove(qEnvironmentVariableIsEmpty("SHARDSCOPE_KEEP_TEST_FILES")); // to read what the nodes left
        QString said;
        // Node n3 does not see shared-partial (as a node where the shared folder is not mounted).
        QVERIFY(QDir().mkpath(m_dir.filePath(QStringLiteral("shared-partial"))));
        QVERIFY2(m_cluster.start(m_dir.path(), 3, 2, 27817, &said, m_dir.filePath(QStringLiteral("shared-partial"))),
                 qPrintable(said));
        m_profiles = m_dir.filePath(QStringLiteral("clusters.ini"));
        testing::writeFile(
            m_profiles,
            "[default]\nshared_folder = " + m_dir.filePath(QStringLiteral("shared")).toUtf8()
                + "\n[nope]\npartition = nope\nshared_folder = "
                + m_dir.filePath(QStringLiteral("shared")).toUtf8()
                // SLURM's shortest limit. The warning comes on slurmctld's 30 s
                // tick once the time left is under warning + 30 s: here 29 to
                // 59 s into each attempt.
                + "\n[short]\ntime = 1\nwarning_seconds = 1\nshared_folder = " + m_dir.filePath(QStringLiteral("shared")).toUtf8()
                + "\n[partial]\nshared_folder = "
                + m_dir.filePath(QStringLiteral("shared-partial")).toUtf8()
                // More memory than any node has: sbatch --test-only refuses it.
                + "\n[hungry]\nsbatch = --mem=99999999\nshared_folder = " + m_dir.filePath(QStringLiteral("shared")).toUtf8()
                + "\n[two_cpus]\ncpus_per_task = 2\nshared_folder = " + m_dir.filePath(QStringLiteral("shared")).toUtf8() + "\n");
    }

    void cleanupTestCase()
    {
        QString said;
        QVERIFY2(m_cluster.stop(&said), qPrintable(said));
    }

    // A recipe on 2 nodes x 1 rank trains to the same losses, bit for bit, as the same recipe on 2
    // local ranks; the job is followed to COMPLETED and both nodes' events reach the history.
    void twoNodesTrainLikeTwoLocalRanks()
    {
        const auto local = testing::launchRecipe(m_dir.path(), QStringLiteral("local"), kRecipe, 2);
        QVERIFY2(local.exitCode == 0, qPrintable(local.output));
        const auto slurm = submit(QStringLiteral("two-nodes"), {"--num_processes", "2", "--num_machines", "2"});
        QVERIFY2(slurm.exitCode == 0, qPrintable(slurm.output));
        QVERIFY2(slurm.output.contains(QStringLiteral("submitted job"))
                     && slurm.output.contains(QStringLiteral("ended COMPLETED")),
                 qPrintable(slurm.output));
        QVERIFY2(slurm.output.contains(QStringLiteral("in the history: completed")), qPrintable(slurm.output));
        const auto ours = testing::rankZeroLosses(slurm), theirs = testing::rankZeroLosses(local);
        QCOMPARE(ours.size(), 6);
        QCOMPARE(ours, theirs);
        // Node 1 ran rank 1 in its own launcher.
        bool rankOne = false;
        for (const auto& e : testing::readEvents(slurm.runDir + "/attempts/0/node1/events.jsonl"))
            rankOne = rankOne || (e["type"].toString() == "hello" && e["rank"].toInt() == 1);
        QVERIFY(rankOne);
        QVERIFY(QFile::exists(slurm.runDir + "/job.sbatch"));
    }

    // #57 item 1: the controller killed while the job runs and started again 60 s later. The job
    // goes on on its nodes, and so does its launcher: it follows the nodes' files meanwhile (the
    // history's steps go on), takes SLURM's answer up again, and records every step and the end
    // as completed; no rank is blamed.
    void controllerRestartIsNotTheRunsEnd()
    {
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 200"));
        QProcess p;
        startSubmit(p, QStringLiteral("restart"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--slow-rank", "0", "--slow-forward-ms", "400"},
                    QStringLiteral("slurm"), recipe);
        const QString node0 = runDir(QStringLiteral("restart")) + "/attempts/0/node0/events.jsonl";
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(node0) >= 10, 120000);
        QString said;
        QVERIFY2(m_cluster.killController(&said), qPrintable(said));
        const int stepsWhenKilled = stepsOf(node0);
        QTest::qWait(60000);
        QVERIFY2(stepsOf(node0) > stepsWhenKilled + 50, "the job did not go on without its controller");
        QVERIFY2(m_cluster.startController(&said), qPrintable(said));
        const auto run = finished(p, QStringLiteral("restart"));
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("SLURM does not answer; the job goes on without its controller")),
                 qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("in the history: completed")), qPrintable(run.output));
        QVERIFY2(!run.output.contains(QStringLiteral("without a word")) && !run.output.contains(QStringLiteral("UNKNOWN")),
                 qPrintable(run.output));
        QCOMPARE(testing::rankZeroLosses(run).size(), 200);
        QVERIFY2(runsShow(runName(QStringLiteral("restart"))).contains(QStringLiteral("completed")),
                 qPrintable(runsShow(runName(QStringLiteral("restart")))));
    }

    // #57 item 5: a node's ranks compute on the CPUs its job step was given (this cluster sets no
    // affinity mask: SLURM_CPUS_PER_TASK, else the CPUs allocated on the node), not on every core
    // of the machine: one CPU by default, two with cpus_per_task = 2, shared by the node's ranks.
    void nodesComputeOnTheCpusTheyWereGiven()
    {
        const auto threadsOf = [](const QString& eventsFile) {
            QList<int> threads;
            for (const auto& e : testing::readEvents(eventsFile))
                if (e["type"].toString() == "hello")
                    threads << e["threads"].toInt();
            return threads;
        };
        const auto given = submit(QStringLiteral("one-cpu"), {"--num_processes", "2", "--num_machines", "2"});
        QVERIFY2(given.exitCode == 0, qPrintable(given.output));
        for (const char* node : {"node0", "node1"})
            QCOMPARE(threadsOf(given.runDir + "/attempts/0/" + node + "/events.jsonl"), QList<int>{1});
        const auto two = submit(QStringLiteral("two-cpus"), {"--num_processes", "4", "--num_machines", "2"},
                                QStringLiteral("slurm:two_cpus"));
        QVERIFY2(two.exitCode == 0, qPrintable(two.output));
        for (const char* node : {"node0", "node1"})
            QCOMPARE(threadsOf(two.runDir + "/attempts/0/" + node + "/events.jsonl"), (QList<int>{1, 1}));
        const auto alone = submit(QStringLiteral("two-cpus-one-rank"), {"--num_processes", "2", "--num_machines", "2"},
                                  QStringLiteral("slurm:two_cpus"));
        QVERIFY2(alone.exitCode == 0, qPrintable(alone.output));
        QCOMPARE(threadsOf(alone.runDir + "/attempts/0/node0/events.jsonl"), QList<int>{2});
    }

    // FSDP HYBRID_SHARD on 2 nodes x 2 ranks: shards within each node, replicas across them; the
    // losses equal 4 local DDP ranks' (to 1e-5, as tst_sharding holds hybrid sharding to DDP).
    void hybridShardingOnTwoNodesOfTwoRanks()
    {
        const auto local = testing::launchRecipe(m_dir.path(), QStringLiteral("local-ddp-4"), kRecipe, 4);
        QVERIFY2(local.exitCode == 0, qPrintable(local.output));
        const auto slurm = submit(QStringLiteral("hybrid"), {"--num_processes", "4", "--num_machines", "2", "--",
                                                             "--fsdp_sharding_strategy", "HYBRID_SHARD"});
        QVERIFY2(slurm.exitCode == 0, qPrintable(slurm.output));
        const auto ours = testing::rankZeroLosses(slurm), theirs = testing::rankZeroLosses(local);
        QCOMPARE(ours.size(), 6);
        QVERIFY2(testing::maxRelativeDifference(ours, theirs) <= 1e-5,
                 qPrintable(QStringLiteral("differs from 4-rank DDP by %1").arg(testing::maxRelativeDifference(ours, theirs))));
        // Each node ran two ranks in its launcher.
        QSet<int> nodeOne;
        for (const auto& e : testing::readEvents(slurm.runDir + "/attempts/0/node1/events.jsonl"))
            if (e["type"].toString() == "hello")
                nodeOne.insert(e["rank"].toInt());
        QCOMPARE(nodeOne, (QSet<int>{2, 3}));
    }

    // A job over its time limit: SIGUSR1 before the limit, one checkpoint on every rank at the same
    // step, the job requeues itself, and the next attempt resumes from it; the whole run's losses
    // equal an uninterrupted local run's bit for bit, and the history keeps the attempts.
    void timeLimitWarningCheckpointsRequeuesAndResumes()
    {
        // About 60 s of training (0.4 s steps): more than one attempt's 29 to 59 s before its warning.
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 150"));
        // One intra-op thread per rank on both sides: a node's lone rank would otherwise take the
        // node's two cores, and sum in another order than a local rank sharing them.
        const auto local = testing::launchRecipe(m_dir.path(), QStringLiteral("local-long"), recipe, 2, {}, {"--threads", "1"});
        QVERIFY2(local.exitCode == 0, qPrintable(local.output));
        // Steps of about 0.4 s: the warning comes while the first attempt trains.
        const auto slurm = submit(QStringLiteral("time-limit"),
                                  {"--num_processes", "2", "--num_machines", "2", "--", "--threads", "1", "--slow-rank", "1",
                                   "--slow-forward-ms", "400"},
                                  QStringLiteral("slurm:short"), recipe);
        QVERIFY2(slurm.exitCode == 0, qPrintable(slurm.output));
        QVERIFY2(slurm.output.contains(QStringLiteral("ended COMPLETED")), qPrintable(slurm.output));
        QVERIFY2(slurm.output.contains(QStringLiteral("attempt 1 resumed after step")), qPrintable(slurm.output));
        const QByteArray jobOutput = testing::readFile(QDir(slurm.runDir).entryInfoList({"slurm-*.out"}).value(0).filePath());
        QVERIFY2(jobOutput.contains("every rank saved a checkpoint before the time limit; requeueing job"),
                 jobOutput.constData());
        // Attempt 0 stopped with the same checkpoint on both nodes' ranks.
        QSet<qint64> stoppedAt;
        for (int node = 0; node < 2; ++node)
            for (const auto& e : testing::readEvents(slurm.runDir + "/attempts/0/node" + QString::number(node) + "/events.jsonl"))
                if (e["type"].toString() == "done") {
                    QCOMPARE(e["status"].toString(), QStringLiteral("checkpointed"));
                    stoppedAt.insert(e["steps"].toInteger());
                }
        QCOMPARE(stoppedAt.size(), 1);
        QVERIFY(QFile::exists(slurm.runDir + "/checkpoints/step_" + QString::number(*stoppedAt.begin()) + "/manifest.json"));
        const auto ours = testing::rankZeroLosses(slurm), theirs = testing::rankZeroLosses(local);
        QCOMPARE(ours.size(), 150);
        QCOMPARE(ours, theirs);
        const QString shown = runsShow(runName(QStringLiteral("time-limit")));
        QVERIFY2(shown.contains(QStringLiteral("attempt 0")) && shown.contains(QStringLiteral("attempt 1"))
                     && shown.contains(QStringLiteral("resumed after step %1").arg(*stoppedAt.begin())),
                 qPrintable(shown));
    }

    // A preemption (an admin's `scontrol requeue`): SIGTERM to every task, a checkpoint, SLURM puts
    // the job back in the queue, and the next attempt resumes; the losses are an uninterrupted run's.
    void requeueByAnAdminResumes()
    {
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 40"));
        const auto local = testing::launchRecipe(m_dir.path(), QStringLiteral("local-40"), recipe, 2, {}, {"--threads", "1"});
        QVERIFY2(local.exitCode == 0, qPrintable(local.output));
        QProcess p;
        startSubmit(p, QStringLiteral("preempted"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--threads", "1", "--slow-rank", "1",
                     "--slow-forward-ms", "150"},
                    QStringLiteral("slurm"), recipe);
        // Steps reported by attempt 0: then the admin requeues the job.
        const QString events = runDir(QStringLiteral("preempted")) + "/attempts/0/node0/events.jsonl";
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(events) >= 5, 60000);
        const QString jobId =
            QString::fromUtf8(testing::readFile(runDir(QStringLiteral("preempted")) + "/slurm_job_id")).trimmed();
        QProcess requeue;
        requeue.start(QStringLiteral("scontrol"), {"requeue", jobId});
        QVERIFY(requeue.waitForFinished(30000));
        QVERIFY2(requeue.exitCode() == 0, requeue.readAll().constData());
        const auto slurm = finished(p, QStringLiteral("preempted"));
        QVERIFY2(slurm.exitCode == 0, qPrintable(slurm.output));
        QVERIFY2(slurm.output.contains(QStringLiteral("attempt 1 resumed after step")), qPrintable(slurm.output));
        const auto ours = testing::rankZeroLosses(slurm), theirs = testing::rankZeroLosses(local);
        QCOMPARE(ours.size(), 40);
        QCOMPARE(ours, theirs);
    }

    // The run is in the history as soon as it is submitted: pending, with SLURM's reason and what to
    // do (here Resources: another job holds a node). Stop (SIGINT to the follower, as the workbench
    // sends it) ends the pending job, then a running one; both are recorded as cancelled.
    void pendingJobShowsWhyAndStopEndsPendingAndRunningJobs()
    {
        QProcess blocker; // holds one node for as long as it runs
        blocker.start(QStringLiteral("sbatch"),
                      {"--parsable", "--nodes=1", "--exclusive", "--output=/dev/null", "--wrap", "sleep 300"});
        QVERIFY(blocker.waitForFinished(30000));
        const QString blockerId = QString::fromUtf8(blocker.readAll()).trimmed();
        QVERIFY2(!blockerId.isEmpty(), "sbatch of the blocking job failed");
        QTRY_VERIFY_WITH_TIMEOUT(squeueState(blockerId) == QStringLiteral("RUNNING"), 30000);
        QProcess pending;
        startSubmit(pending, QStringLiteral("pending"), {"--num_processes", "3", "--num_machines", "3"}, QStringLiteral("slurm"),
                    kRecipe);
        QTRY_VERIFY_WITH_TIMEOUT(runsShow(runName(QStringLiteral("pending"))).contains(QStringLiteral("status")), 30000);
        QTRY_VERIFY_WITH_TIMEOUT(
            runsShow(runName(QStringLiteral("pending")))
                .contains(QStringLiteral("pending (the job is pending (Resources): the nodes it asks for are busy")),
            30000);
        // Its launcher follows it: `runs follow` from another terminal is refused, naming it.
        QProcess follow;
        follow.setProcessChannelMode(QProcess::MergedChannels);
        follow.start(testing::shardscopeBinary(), {"runs", "follow", runName(QStringLiteral("pending"))});
        QVERIFY(follow.waitForFinished(60000));
        const QString refused = QString::fromUtf8(follow.readAll());
        QVERIFY2(follow.exitCode() == 2 && refused.contains(QStringLiteral("is followed by its launcher")), qPrintable(refused));
        ::kill(static_cast<pid_t>(pending.processId()), SIGINT); // Stop
        const auto stopped = finished(pending, QStringLiteral("pending"), 60000);
        QVERIFY2(stopped.exitCode == 130, qPrintable(stopped.output));
        QVERIFY2(stopped.output.contains(QStringLiteral("cancelling job"))
                     && stopped.output.contains(QStringLiteral("ended CANCELLED")),
                 qPrintable(stopped.output));
        QVERIFY2(runsShow(runName(QStringLiteral("pending"))).contains(QStringLiteral("cancelled")), qPrintable(stopped.output));
        QProcess cancelBlocker;
        cancelBlocker.start(QStringLiteral("scancel"), {blockerId});
        QVERIFY(cancelBlocker.waitForFinished(30000));

        // A running job: Stop once its ranks have stepped.
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 400"));
        QProcess running;
        startSubmit(running, QStringLiteral("stopped"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--slow-rank", "1", "--slow-forward-ms", "100"},
                    QStringLiteral("slurm"), recipe);
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(runDir(QStringLiteral("stopped")) + "/attempts/0/node0/events.jsonl") >= 3, 60000);
        QVERIFY2(runsShow(runName(QStringLiteral("stopped"))).contains(QStringLiteral("running")),
                 qPrintable(runsShow(runName(QStringLiteral("stopped")))));
        ::kill(static_cast<pid_t>(running.processId()), SIGINT);
        const auto ended = finished(running, QStringLiteral("stopped"), 120000);
        QVERIFY2(ended.exitCode == 130, qPrintable(ended.output));
        QVERIFY2(ended.output.contains(QStringLiteral("ended CANCELLED")), qPrintable(ended.output));
        const QString shown = runsShow(runName(QStringLiteral("stopped")));
        QVERIFY2(shown.contains(QStringLiteral("cancelled"))
                     && shown.contains(QRegularExpression(QStringLiteral("job +slurm:[0-9]+"))),
                 qPrintable(shown));

        // #57 item 7: SIGTERM (a logout, a shutdown) to the submitting launcher stops following, not
        // the job: it goes on, and `runs follow` takes it up (whose Stop cancels it).
        QProcess terminated;
        startSubmit(terminated, QStringLiteral("terminated"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--slow-rank", "1", "--slow-forward-ms", "100"},
                    QStringLiteral("slurm"), recipe);
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(runDir(QStringLiteral("terminated")) + "/attempts/0/node0/events.jsonl") >= 3, 60000);
        ::kill(static_cast<pid_t>(terminated.processId()), SIGTERM);
        const auto left = finished(terminated, QStringLiteral("terminated"), 60000);
        QVERIFY2(left.exitCode == 1 && left.output.contains(QStringLiteral("stopped following job")), qPrintable(left.output));
        const QString jobId =
            QString::fromUtf8(testing::readFile(runDir(QStringLiteral("terminated")) + "/slurm_job_id")).trimmed();
        QCOMPARE(squeueState(jobId), QStringLiteral("RUNNING"));
        QProcess takenUp;
        takenUp.setProcessChannelMode(QProcess::MergedChannels);
        takenUp.start(testing::shardscopeBinary(), {"runs", "follow", runName(QStringLiteral("terminated"))});
        QString followed;
        QTRY_VERIFY_WITH_TIMEOUT((followed += QString::fromUtf8(takenUp.readAll())).contains(QStringLiteral("following job")),
                                 60000);
        ::kill(static_cast<pid_t>(takenUp.processId()), SIGINT); // its Stop
        QVERIFY(takenUp.waitForFinished(120000));
        followed += QString::fromUtf8(takenUp.readAll());
        QVERIFY2(takenUp.exitCode() == 130 && followed.contains(QStringLiteral("ended CANCELLED")), qPrintable(followed));
        QVERIFY2(runsShow(runName(QStringLiteral("terminated"))).contains(QStringLiteral("cancelled")), qPrintable(followed));
    }

    // Killing one node's process mid-run fails the run and names that rank and node, not the peer
    // that lost it.
    void killedNodeIsNamed()
    {
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 400"));
        QProcess p;
        startSubmit(p, QStringLiteral("node-killed"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--slow-rank", "0", "--slow-forward-ms", "100"},
                    QStringLiteral("slurm"), recipe);
        const QString nodeOne = runDir(QStringLiteral("node-killed")) + "/attempts/0/node1/events.jsonl";
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(nodeOne) >= 3, 60000);
        qint64 pid = 0;
        for (const auto& e : testing::readEvents(nodeOne))
            if (e["type"].toString() == "hello" && e["rank"].toInt() == 1)
                pid = e["pid"].toInteger();
        QVERIFY(pid > 0);
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        const auto run = finished(p, QStringLiteral("node-killed"), 180000);
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.output.contains(QStringLiteral("rank 1 on n2 (node 1)")), qPrintable(run.output));
        const QString shown = runsShow(runName(QStringLiteral("node-killed")));
        QVERIFY2(shown.contains(QStringLiteral("failed")) && shown.contains(QStringLiteral("rank 1 on n2 (node 1)")),
                 qPrintable(shown));
    }

    // The Accelerate example script on 2 nodes through the real `accelerate launch` of the project's
    // venv (each node's with its --machine_rank, the head's address, --same_network): per-rank
    // events from both nodes in the history, and the run completed.
    void acceleratesExampleScriptOnTwoNodes()
    {
        const QString python = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
        QProcess probe;
        probe.start(python, {"-c", "import accelerate, torch, shardscope"});
        if (!probe.waitForFinished(60000) || probe.exitCode() != 0)
            QSKIP("the project venv has no accelerate/torch/shardscope (scripts/setup.sh installs them)");
        const QString config = m_dir.filePath(QStringLiteral("cpu-2-machines.yaml"));
        testing::writeFile(config, "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                                   "num_machines: 2\nnum_processes: 2\nrdzv_backend: static\nsame_network: true\n"
                                   "use_cpu: true\n");
        const QString name = runName(QStringLiteral("script"));
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(testing::shardscopeBinary(),
                {"launch", "--target", "slurm", "--cluster_profiles", m_profiles, "--script",
                 QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/examples/accelerate_train.py"), "--python", python,
                 "--config_file", config, "--run_name", name, "--", "--steps", "6"});
        const auto run = finished(p, QStringLiteral("script"), 300000);
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("ended COMPLETED"))
                     && run.output.contains(QStringLiteral("in the history: completed")),
                 qPrintable(run.output));
        const QByteArray script = testing::readFile(run.runDir + "/job.sbatch");
        QVERIFY2(!script.contains("--signal") && !script.contains("--requeue"),
                 script.constData()); // USR1 would kill Python ranks
        for (int node = 0; node < 2; ++node) {
            QSet<int> steppers;
            for (const auto& e : testing::readEvents(run.runDir + "/attempts/0/node" + QString::number(node) + "/events.jsonl"))
                if (e["type"].toString() == "step")
                    steppers.insert(e["rank"].toInt());
            QCOMPARE(steppers, QSet<int>{node}); // rank N ran on node N and reported its steps
        }
        // Node 1's `accelerate launch` got its own machine rank and the head's address.
        const QByteArray command = testing::readFile(run.runDir + "/attempts/0/node1/command.sh");
        QVERIFY2(command.contains("--num_machines 2 --machine_rank 1 --main_process_ip 127.0.0.1 --same_network"),
                 command.constData());
        const QString shown = runsShow(name);
        QVERIFY2(shown.contains(QStringLiteral("completed")) && shown.contains(QStringLiteral("2 ranks")), qPrintable(shown));
    }

    // What SLURM cannot run is refused before anything is submitted, saying why.
    void refusedBeforeSubmission()
    {
        const auto partition = submit(QStringLiteral("bad-partition"), {}, QStringLiteral("slurm:nope"));
        QCOMPARE(partition.exitCode, 2);
        QVERIFY2(partition.output.contains(QStringLiteral("partition 'nope' of profile [nope] does not exist; the cluster's "
                                                          "partitions are debug")),
                 qPrintable(partition.output));
        const auto nodes = submit(QStringLiteral("too-many-nodes"), {"--num_processes", "4", "--num_machines", "4"});
        QCOMPARE(nodes.exitCode, 2);
        QVERIFY2(nodes.output.contains(QStringLiteral("partition debug has 3 nodes and the run asks for 4")),
                 qPrintable(nodes.output));
        QVERIFY(!QFile::exists(nodes.runDir + "/job.sbatch"));
        // #57 item 7: a job SLURM's own check refuses leaves no run folder behind to block its name.
        const auto hungry = submit(QStringLiteral("refused-by-sbatch"), {}, QStringLiteral("slurm:hungry"));
        QCOMPARE(hungry.exitCode, 2);
        QVERIFY2(hungry.output.contains(QStringLiteral("SLURM refuses the job"))
                     && hungry.output.contains(QStringLiteral("its run folder is removed")),
                 qPrintable(hungry.output));
        QVERIFY2(!QFileInfo::exists(hungry.runDir), qPrintable(hungry.runDir));
    }

    // A run folder one node does not see (the shared folder not mounted there): the batch script's
    // probe names the node and ends the job before any rank starts; the run fails saying so and
    // what to do, on no rank.
    void folderANodeCannotSeeIsNamed()
    {
        const auto run = submit(QStringLiteral("unseen"), {"--num_processes", "3", "--num_machines", "3"},
                                QStringLiteral("slurm:partial"));
        QCOMPARE(run.exitCode, 1);
        QVERIFY2(run.output.contains(QStringLiteral("node(s) n3 do not see the run folder")), qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("must be mounted at the same path on every node")), qPrintable(run.output));
        const QString folder = m_dir.filePath("shared-partial/runs/" + runName(QStringLiteral("unseen")));
        QVERIFY(QFileInfo::exists(folder + "/attempts/0/unseen_folder.txt"));
        QVERIFY2(!QFileInfo::exists(folder + "/attempts/0/node0"), "a launcher started"); // no rank ran
        const QString shown = runsShow(runName(QStringLiteral("unseen")));
        QVERIFY2(shown.contains(QRegularExpression(QStringLiteral("status +failed")))
                     && shown.contains(QStringLiteral("n3 do not see")),
                 qPrintable(shown));
    }

    // --detach: the run is in the history at once, followed by no one; `runs follow` later takes it
    // over (its launcher is gone), records every step the nodes wrote and the end; once ended it
    // says so.
    void detachedRunIsFollowedLater()
    {
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 40"));
        const auto detached = submit(
            QStringLiteral("detached"),
            {"--num_processes", "2", "--num_machines", "2", "--detach", "--", "--slow-rank", "1", "--slow-forward-ms", "50"},
            QStringLiteral("slurm"), recipe);
        QVERIFY2(detached.exitCode == 0 && detached.output.contains(QStringLiteral("runs follow")), qPrintable(detached.output));
        const QString name = runName(QStringLiteral("detached"));
        QVERIFY2(runsShow(name).contains(QRegularExpression(QStringLiteral("status +(pending|running)"))),
                 qPrintable(runsShow(name)));
        QTest::qWait(3000); // the job runs meanwhile: follow catches up with what the nodes wrote
        QProcess follow;
        follow.setProcessChannelMode(QProcess::MergedChannels);
        follow.start(testing::shardscopeBinary(), {"runs", "follow", name});
        QVERIFY(follow.waitForFinished(240000));
        const QString followed = QString::fromUtf8(follow.readAll());
        QVERIFY2(follow.exitCode() == 0 && followed.contains(QStringLiteral("ended COMPLETED")), qPrintable(followed));
        const QString shown = runsShow(name);
        QVERIFY2(shown.contains(QRegularExpression(QStringLiteral("status +completed"))), qPrintable(shown));
        QVERIFY2(shown.contains(QRegularExpression(QStringLiteral("steps +40"))), qPrintable(shown));
        QVERIFY2(shown.contains(QStringLiteral("attempt 0")) || shown.contains(QStringLiteral("ATTEMPT")), qPrintable(shown));
        follow.start(testing::shardscopeBinary(), {"runs", "follow", name});
        QVERIFY(follow.waitForFinished(60000));
        const QString again = QString::fromUtf8(follow.readAll());
        QVERIFY2(follow.exitCode() == 0 && again.contains(QStringLiteral("has ended: completed")), qPrintable(again));
    }

    // A run submitted from one machine is caught up with from another that sees the same shared
    // folder and cluster: `runs follow --all` there puts it in that machine's history from the
    // folder's run.json and follows it to its end in the background; back on the first machine,
    // whose detached launcher is gone, `--all` takes it over too. A job SLURM has forgotten ends as
    // its folder says; another user's run is left alone.
    void runSubmittedElsewhereIsCaughtUp()
    {
        const QString shared = m_dir.filePath(QStringLiteral("shared-elsewhere"));
        const QString profiles = m_dir.filePath(QStringLiteral("elsewhere.ini"));
        testing::writeFile(profiles, "[elsewhere]\nshared_folder = " + shared.toUtf8() + "\n");
        const QString name = runName(QStringLiteral("elsewhere"));
        const QString recipe = m_dir.filePath(name + "-recipe.yaml");
        testing::writeFile(recipe,
                           QString(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 40")).toUtf8());
        const auto [submitted, said] = onMachine({}, {"launch",
                                                      "--target",
                                                      "slurm:elsewhere",
                                                      "--cluster_profiles",
                                                      profiles,
                                                      "--recipe",
                                                      recipe,
                                                      "--run_name",
                                                      name,
                                                      "--num_processes",
                                                      "2",
                                                      "--num_machines",
                                                      "2",
                                                      "--tag",
                                                      "far",
                                                      "--detach",
                                                      "--",
                                                      "--slow-rank",
                                                      "1",
                                                      "--slow-forward-ms",
                                                      "50"});
        QVERIFY2(submitted == 0, qPrintable(said));
        const QString folder = shared + "/runs/" + name;
        QVERIFY2(testing::readFile(folder + "/run.json").contains("\"user\""), qPrintable(folder));

        // Machine B: nothing of it in its history, until --all.
        const QString machineB = m_dir.filePath(QStringLiteral("machine-b"));
        QVERIFY(QDir().mkpath(machineB));
        QVERIFY(onMachine(machineB, {"runs", "show", name}).second.contains(QStringLiteral("no run")));
        auto [code, caughtUp] = onMachine(machineB, {"runs", "follow", "--all", "--cluster_profiles", profiles});
        QVERIFY2(code == 0 && caughtUp.contains("following " + name + " in the background"), qPrintable(caughtUp));
        const QRegularExpression completed(QStringLiteral("status +completed"));
        QTRY_VERIFY2_WITH_TIMEOUT(onMachine(machineB, {"runs", "show", name}).second.contains(completed),
                                  qPrintable(onMachine(machineB, {"runs", "show", name}).second), 240000);
        const QString shownB = onMachine(machineB, {"runs", "show", name}).second;
        QVERIFY2(shownB.contains(QRegularExpression(QStringLiteral("steps +40"))) && shownB.contains(QStringLiteral("far"))
                     && shownB.contains(QStringLiteral("slurm:")),
                 qPrintable(shownB));
        QVERIFY2(testing::readFile(machineB + "/followers/" + name + ".log").contains("put in this history from its folder"),
                 qPrintable(testing::readFile(machineB + "/followers/" + name + ".log")));
        QTRY_VERIFY_WITH_TIMEOUT(followersGone(machineB), 60000);
        std::tie(code, caughtUp) = onMachine(machineB, {"runs", "follow", "--all", "--cluster_profiles", profiles});
        QVERIFY2(code == 0 && caughtUp.contains(QStringLiteral("is followed or has ended")), qPrintable(caughtUp));

        // Machine A: its launcher was detached, so nobody followed the run there; --all does now.
        QVERIFY2(!runsShow(name).contains(completed), qPrintable(runsShow(name)));
        std::tie(code, caughtUp) = onMachine({}, {"runs", "follow", "--all", "--cluster_profiles", profiles});
        QVERIFY2(code == 0 && caughtUp.contains("following " + name + " in the background"), qPrintable(caughtUp));
        QTRY_VERIFY2_WITH_TIMEOUT(runsShow(name).contains(completed), qPrintable(runsShow(name)), 120000);
        QVERIFY2(runsShow(name).contains(QRegularExpression(QStringLiteral("steps +40"))), qPrintable(runsShow(name)));

        // A job SLURM no longer knows: its folder's last attempt says how it ended.
        const QString forgotten = runName(QStringLiteral("forgotten"));
        QVERIFY(QProcess::execute(QStringLiteral("cp"), {"-a", folder, shared + "/runs/" + forgotten}) == 0);
        testing::writeFile(shared + "/runs/" + forgotten + "/slurm_job_id", "99999999\n");
        const QString json = QString::fromUtf8(testing::readFile(folder + "/run.json"));
        QString edited = json;
        edited.replace(QRegularExpression(QStringLiteral("slurm:[0-9]+")), QStringLiteral("slurm:99999999"))
            .replace(name, forgotten);
        testing::writeFile(shared + "/runs/" + forgotten + "/run.json", edited.toUtf8());
        const QString machineC = m_dir.filePath(QStringLiteral("machine-c"));
        QVERIFY(QDir().mkpath(machineC));
        std::tie(code, caughtUp) = onMachine(machineC, {"runs", "follow", shared + "/runs/" + forgotten}, 120000);
        QVERIFY2(code == 0 && caughtUp.contains(QStringLiteral("has left SLURM's memory")), qPrintable(caughtUp));
        const QString shownC = onMachine(machineC, {"runs", "show", forgotten}).second;
        QVERIFY2(shownC.contains(completed) && shownC.contains(QRegularExpression(QStringLiteral("steps +40"))),
                 qPrintable(shownC));
        // #57 item 3: a cancelled job SLURM no longer knows (its batch script saw exit 143, its ranks
        // never said they finished) ends cancelled from its folder instead of staying pending.
        const QString cancelled = runName(QStringLiteral("forgotten-cancelled"));
        const QString cancelledDir = shared + "/runs/" + cancelled;
        QVERIFY(QProcess::execute(QStringLiteral("cp"), {"-a", folder, cancelledDir}) == 0);
        testing::writeFile(cancelledDir + "/slurm_job_id", "99999998\n");
        QString cancelledJson = json;
        cancelledJson.replace(QRegularExpression(QStringLiteral("slurm:[0-9]+")), QStringLiteral("slurm:99999998"))
            .replace(name, cancelled);
        testing::writeFile(cancelledDir + "/run.json", cancelledJson.toUtf8());
        QVERIFY(QProcess::execute(QStringLiteral("sed"), {"-i", "s/^exit=.*/exit=143/", cancelledDir + "/attempts/0/attempt.txt"})
                == 0);
        QVERIFY(
            QProcess::execute(QStringLiteral("bash"), {"-c",
                                                       "for f in \"$1\"/events.jsonl \"$1\"/attempts/*/node*/events.jsonl; do "
                                                       "sed -i '/\"type\":\"done\"/d' \"$f\"; done",
                                                       "_", cancelledDir})
            == 0);
        std::tie(code, caughtUp) = onMachine(machineC, {"runs", "follow", cancelledDir}, 120000);
        QVERIFY2(caughtUp.contains(QStringLiteral("has left SLURM's memory")), qPrintable(caughtUp));
        const QString shownCancelled = onMachine(machineC, {"runs", "show", cancelled}).second;
        QVERIFY2(shownCancelled.contains(QStringLiteral("cancelled")), qPrintable(shownCancelled));

        // Another user's run is not taken into this user's history unasked.
        const QString theirs = runName(QStringLiteral("theirs"));
        QVERIFY(QProcess::execute(QStringLiteral("cp"), {"-a", folder, shared + "/runs/" + theirs}) == 0);
        edited = json;
        edited.replace(name, theirs);
        testing::writeFile(shared + "/runs/" + theirs + "/run.json", edited.toUtf8());
        // Whose it is: the file's owner (whatever it says of itself: anyone who writes the shared
        // folder could write that), here another user's.
        QCOMPARE(::chown(QString(shared + "/runs/" + theirs + "/run.json").toUtf8().constData(), 65534, 65534), 0);
        const QString machineD = m_dir.filePath(QStringLiteral("machine-d"));
        QVERIFY(QDir().mkpath(machineD));
        std::tie(code, caughtUp) = onMachine(machineD, {"runs", "follow", "--all", "--cluster_profiles", profiles});
        QVERIFY2(code == 0 && caughtUp.contains(QStringLiteral("1 run of other users left alone")), qPrintable(caughtUp));
        QVERIFY2(!caughtUp.contains("following " + theirs), qPrintable(caughtUp));
        QTRY_VERIFY_WITH_TIMEOUT(followersGone(machineD), 120000);
        QTRY_VERIFY_WITH_TIMEOUT(followersGone(qEnvironmentVariable("SHARDSCOPE_HOME")), 60000);
    }

    // A profile with a login node runs SLURM's commands there over SSH (a real sshd on this machine,
    // whose sessions have the cluster's SLURM_CONF while this process's commands do not): listed,
    // submitted, followed to its end by its launcher and by `runs follow` later; a login that
    // fails is refused before submission with ssh's reason.
    void loginNodeOverSsh()
    {
        if (const QString why = testing::SshLogin::unavailable(); !why.isEmpty())
            QSKIP(qPrintable(why));
        testing::SshLogin login;
        QString said;
        QVERIFY2(login.start(m_dir.path(), 27990, {"SLURM_CONF=" + qEnvironmentVariable("SLURM_CONF")}, &said), qPrintable(said));
        const QString profiles = m_dir.filePath(QStringLiteral("login.ini"));
        const QByteArray shared = m_dir.filePath(QStringLiteral("shared")).toUtf8();
        testing::writeFile(profiles, "[login]\nlogin = " + login.destination().toUtf8()
                                         + "\nssh_options = " + login.options().join(' ').toUtf8() + "\nshared_folder = " + shared
                                         + "\n[unreachable]\nlogin = root@127.0.0.1\nssh_options = -p 1 -o "
                                           "StrictHostKeyChecking=no\nshared_folder = "
                                         + shared + "\n");
        // This process's SLURM commands could not reach the cluster: only the login node's can.
        auto here = [](const QStringList& args, int timeoutMs = 300000) {
            QProcess p;
            auto env = QProcessEnvironment::systemEnvironment();
            env.remove(QStringLiteral("SLURM_CONF"));
            env.insert(QStringLiteral("SLURM_CONF"), QStringLiteral("/nonexistent/slurm.conf"));
            p.setProcessEnvironment(env);
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(testing::shardscopeBinary(), args);
            p.waitForFinished(timeoutMs);
            return std::pair{p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAll())};
        };
        auto [code, out] = here({"clusters", "--cluster_profiles", profiles});
        QVERIFY2(
            code == 0
                && out.contains(QStringLiteral("partitions (sinfo on login node root@127.0.0.1): debug (default) up 3 nodes")),
            qPrintable(out));
        QVERIFY2(out.contains(QStringLiteral("SLURM on root@127.0.0.1 over SSH")), qPrintable(out));

        const QString name = runName(QStringLiteral("over-ssh"));
        const QString recipe = m_dir.filePath(name + "-recipe.yaml");
        testing::writeFile(recipe, kRecipe.toUtf8());
        const QStringList launch{"launch", "--cluster_profiles", profiles, "--recipe", recipe, "--num_processes",
                                 "2",      "--num_machines",     "2"};
        std::tie(code, out) = here(launch + QStringList{"--target", "slurm:login", "--run_name", name});
        QVERIFY2(code == 0 && out.contains(QStringLiteral("ended COMPLETED")), qPrintable(out));
        const auto events = testing::readEvents(m_dir.filePath("shared/runs/" + name + "/events.jsonl"));
        QCOMPARE(std::count_if(events.begin(), events.end(), [](const QJsonObject& e) { return e["type"].toString() == "step"; }),
                 2 * 6);
        const QString commands = QString::fromUtf8(testing::readFile(login.commandLog()));
        for (const char* ran : {"sinfo -h", "sbatch --test-only", "sbatch --parsable", "squeue -h", "scontrol -o show job"})
            QVERIFY2(commands.contains(QLatin1String(ran)), qPrintable(ran + QStringLiteral(" not run there:\n") + commands));

        // --detach, then `runs follow`: it asks the login node the run's profile names.
        const QString later = runName(QStringLiteral("over-ssh-later"));
        std::tie(code, out) = here(launch + QStringList{"--target", "slurm:login", "--run_name", later, "--detach"});
        QVERIFY2(code == 0, qPrintable(out));
        std::tie(code, out) = here({"runs", "follow", later, "--cluster_profiles", profiles});
        QVERIFY2(code == 0 && out.contains(QStringLiteral("SLURM's commands on login node root@127.0.0.1"))
                     && out.contains(QStringLiteral("ended COMPLETED")),
                 qPrintable(out));

        // A login node that does not answer: refused before anything is submitted.
        const QString refused = runName(QStringLiteral("unreachable"));
        std::tie(code, out) = here(launch + QStringList{"--target", "slurm:unreachable", "--run_name", refused});
        QCOMPARE(code, 2);
        QVERIFY2(out.contains(QStringLiteral("ssh to root@127.0.0.1 failed")), qPrintable(out));
        QVERIFY(!QFileInfo::exists(m_dir.filePath("shared/runs/" + refused)));
    }

    // `shardscope clusters`: the profiles (one "[name]" line each: the workbench reads them) and
    // SLURM's partitions; without a profiles file, what to write there.
    void clustersListsProfilesAndPartitions()
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(testing::shardscopeBinary(), {"clusters", "--cluster_profiles", m_profiles});
        p.waitForFinished(60000);
        const QString said = QString::fromUtf8(p.readAll());
        QVERIFY2(p.exitCode() == 0, qPrintable(said));
        for (const char* line : {"[default] partition (the cluster's default)", "[nope] partition nope", "[short] partition"})
            QVERIFY2(said.contains(QLatin1String(line)), qPrintable(said));
        QVERIFY2(said.contains(QStringLiteral("partitions (sinfo): debug (default) up 3 nodes")), qPrintable(said));
        p.start(testing::shardscopeBinary(), {"clusters", "--cluster_profiles", m_dir.filePath("none.ini")});
        p.waitForFinished(60000);
        QCOMPARE(p.exitCode(), 1);
        QVERIFY2(QString::fromUtf8(p.readAll()).contains(QStringLiteral("shared_folder = ")), "no hint what to write");
    }

    // #57 item 6: a node of the job lost (its slurmd killed: SLURM hears no more of it, marks it down
    // and requeues the job, which resumes on the other nodes). The launcher names the lost node as
    // it learns of it and at the end, `runs show` names it with its attempt, and the resumed attempt
    // says where it resumed from.
    void lostNodeIsNamed()
    {
        const QString recipe = QString(kRecipe).replace(QStringLiteral("max_steps: 6"),
                                                        QStringLiteral("max_steps: 300, checkpoint_every: 10"));
        QProcess p;
        startSubmit(p, QStringLiteral("lost-node"),
                    {"--num_processes", "2", "--num_machines", "2", "--", "--slow-rank", "0", "--slow-forward-ms", "300"},
                    QStringLiteral("slurm"), recipe);
        const QString dir = runDir(QStringLiteral("lost-node"));
        QTRY_VERIFY_WITH_TIMEOUT(stepsOf(dir + "/attempts/0/node1/events.jsonl") >= 12, 120000);
        // Node 1 of the job: the second of attempt 0's nodes.
        QString nodes;
        for (const QByteArray& line : testing::readFile(dir + "/attempts/0/attempt.txt").split('\n'))
            if (line.startsWith("nodes="))
                nodes = QString::fromUtf8(line.mid(6));
        QProcess names;
        names.start(QStringLiteral("scontrol"), {"show", "hostnames", nodes});
        QVERIFY(names.waitForFinished(30000));
        const QStringList hosts = QString::fromUtf8(names.readAll()).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(hosts.size(), 2);
        const QString lost = hosts[1];
        QString said;
        QVERIFY2(m_cluster.killNode(lost, &said), qPrintable(said));
        const auto run = finished(p, QStringLiteral("lost-node"), 400000);
        const bool back = m_cluster.startNode(lost, &said); // for the tests after this one
        QVERIFY2(back, qPrintable(said));
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("attempt 0 lost node %1 (down").arg(lost)), qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("in the history: completed (2 attempts)")), qPrintable(run.output));
        QVERIFY2(!run.output.contains(QStringLiteral("resumed after step 0 from \n")), qPrintable(run.output));
        QVERIFY2(run.output.contains(QStringLiteral("attempt 1 resumed after step "))
                     || run.output.contains(QStringLiteral("attempt 1 started over from step 0")),
                 qPrintable(run.output));
        const QString shown = runsShow(runName(QStringLiteral("lost-node")));
        QVERIFY2(shown.contains(QStringLiteral("SLURM lost node %1 (down").arg(lost)), qPrintable(shown));
        QCOMPARE(testing::rankZeroLosses(run).size(), 300);
    }

    // --dry-run prints the batch script and submits nothing.
    void dryRunPrintsTheScript()
    {
        const auto dry = submit(QStringLiteral("dry"), {"--num_processes", "2", "--num_machines", "2", "--dry-run"});
        QCOMPARE(dry.exitCode, 0);
        QVERIFY2(dry.output.contains(QStringLiteral("#SBATCH --nodes=2")) && dry.output.contains(QStringLiteral("not submitted")),
                 qPrintable(dry.output));
        QVERIFY2(dry.output.contains(QStringLiteral("--machine_rank \"$SLURM_NODEID\"")), qPrintable(dry.output));
        // It leaves nothing behind: the same name then submits (the workbench previews the script
        // under the name it launches with).
        QVERIFY(!QFileInfo::exists(dry.runDir));
        const auto real = submit(QStringLiteral("dry"), {"--num_processes", "2", "--num_machines", "2"});
        QVERIFY2(real.exitCode == 0, qPrintable(real.output));
    }
};

QTEST_GUILESS_MAIN(TestSlurmCluster)
#include "tst_slurm_cluster.moc"
