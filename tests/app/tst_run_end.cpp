// The one decision of a run's end (app/runs/run_end.h), table-driven: recorded event lines (as
// ranks write them), a launcher's outcome, and SLURM's own text (squeue and scontrol lines as
// SLURM prints them) go in; the end state, the root cause, the exit code and the words come out.
// No process starts.

#include "app/cluster/slurm.h"
#include "app/runs/run_end.h"

#include <QtTest>

#include <csignal>
#include <sstream>

using namespace shardscope;
using namespace shardscope::runs;
using storage::RunStatus;

namespace {

// Recorded event lines (one per line, as events.jsonl holds them).
std::vector<protocol::Event> eventsOf(const std::string& lines)
{
    std::vector<protocol::Event> events;
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) {
            auto event = protocol::decodeEvent(line);
            if (!event)
                qFatal("not an event: %s (%s)", line.c_str(), event.error().message.c_str());
            events.push_back(*event);
        }
    return events;
}

std::string hello(int rank)
{
    return R"({"v":1,"type":"hello","rank":)" + std::to_string(rank) + R"(,"time":100,"pid":)" + std::to_string(4000 + rank)
           + R"(,"device":"cpu","world_size":2})"
             "\n";
}
std::string step(int rank, int n, double time)
{
    return R"({"v":1,"type":"step","rank":)" + std::to_string(rank) + R"(,"time":)" + std::to_string(time) + R"(,"step":)"
           + std::to_string(n)
           + R"(,"loss":2.5})"
             "\n";
}
std::string done(int rank, const std::string& status, double time)
{
    return R"({"v":1,"type":"done","rank":)" + std::to_string(rank) + R"(,"time":)" + std::to_string(time) + R"(,"status":")"
           + status
           + R"(","steps":6,"wall":1})"
             "\n";
}
std::string error(int rank, const std::string& kind, const std::string& message, double time)
{
    return R"({"v":1,"type":"error","rank":)" + std::to_string(rank) + R"(,"time":)" + std::to_string(time) + R"(,"kind":")"
           + kind + R"(","message":")" + message
           + R"("})"
             "\n";
}
std::string checkpoint(int rank, const std::string& path)
{
    return R"({"v":1,"type":"checkpoint","rank":)" + std::to_string(rank) + R"(,"time":150,"step":6,"path":")" + path
           + R"(","kind":"state"})"
             "\n";
}

RankExit exitOf(int rank, int code, int signal = 0, double at = 200, bool stopped = false)
{
    RankExit r;
    r.rank = rank;
    r.exitCode = code;
    r.signal = signal;
    r.exitedAt = at;
    r.stoppedByLauncher = stopped;
    return r;
}

RunEvidence launched(const std::string& lines, LaunchOutcome outcome)
{
    RunEvidence e;
    e.ranks = testimonyOf(eventsOf(lines));
    for (const auto& r : outcome.ranks)
        e.world.insert(r.rank);
    e.launch = Result<LaunchOutcome>(std::move(outcome));
    e.totalSteps = 6;
    e.logTail = [](int rank) { return "rank " + std::to_string(rank) + "'s last words\n"; };
    return e;
}

// A SLURM job's end from SLURM's own text: an `squeue -h -o %T|%r|%N` line while it still lists
// the job, else the `scontrol -o show job` record.
ClusterJobEnd slurmSays(const std::string& text, int perNode, std::vector<std::string> nodeNames)
{
    ClusterJobEnd job;
    if (text.rfind("JobId=", 0) == 0) {
        const auto record = cluster::parseScontrolRecord(text);
        const auto field = [&](const char* key) { return record.count(key) ? record.at(key) : std::string(); };
        job.state = field("JobState");
        job.nodes = field("NodeList");
        job.exitCode = field("ExitCode");
    } else {
        const auto state = cluster::parseSqueueLine(text);
        if (!state)
            qFatal("not an squeue line: %s", text.c_str());
        job.state = state->state;
        job.nodes = state->nodes;
    }
    job.processesPerNode = perNode;
    job.nodeNames = std::move(nodeNames);
    return job;
}

RunEvidence clusterJob(const std::string& lines, int world, ClusterJobEnd job)
{
    RunEvidence e;
    e.ranks = testimonyOf(eventsOf(lines));
    for (int r = 0; r < world; ++r)
        e.world.insert(r);
    e.job = std::move(job);
    return e;
}

struct Expected {
    RunStatus status;
    int exitCode = 0;
    int rootCause = -1; // -1: none
    std::string word;
    std::string errorHas; // a phrase the recorded error must hold ("" to skip)
};

} // namespace

Q_DECLARE_METATYPE(RunEvidence)
Q_DECLARE_METATYPE(Expected)

class TestRunEnd : public QObject {
    Q_OBJECT

private slots:
    void decidesTheEnd_data()
    {
        QTest::addColumn<RunEvidence>("evidence");
        QTest::addColumn<Expected>("expected");
        const std::string both = hello(0) + hello(1) + step(0, 6, 110) + step(1, 6, 110);

        // --- A launcher supervised the ranks ---
        {
            LaunchOutcome o;
            o.ranks = {exitOf(0, 0), exitOf(1, 0)};
            QTest::newRow("every rank finished") << launched(both + done(0, "completed", 120) + done(1, "completed", 120), o)
                                                 << Expected{RunStatus::Completed, 0, -1, "completed", ""};
            QTest::newRow("a rank exited 0 without finishing its steps")
                << launched(hello(0) + hello(1) + step(0, 6, 110) + step(1, 4, 110) + done(0, "completed", 120), o)
                << Expected{RunStatus::Failed, 1, 1, "failed",
                            "rank 1 exited with code 0 without reporting that it finished its steps (last step 4 of 6)"};
        }
        {
            // Rank 1 reported its own error first; rank 0, which lost it, exited first.
            LaunchOutcome o;
            o.exitCode = 1;
            o.rootCauseRank = 0;
            o.ranks = {exitOf(0, 1, 0, 130), exitOf(1, 1, 0, 131)};
            QTest::newRow("the first own error is the root cause")
                << launched(both + error(1, "exception", "corrupt shard", 120) + error(0, "peer", "connection reset", 125), o)
                << Expected{RunStatus::Failed, 1, 1, "failed", "exception: corrupt shard"};
        }
        {
            LaunchOutcome o;
            o.exitCode = 137;
            o.rootCauseRank = 1;
            o.ranks = {exitOf(0, 0, SIGTERM, 131, true), exitOf(1, 0, SIGKILL, 130)};
            QTest::newRow("a killed rank") << launched(both + error(0, "peer", "connection reset", 130.5), o)
                                           << Expected{RunStatus::Failed, 137, 1, "failed", "rank 1's last words"};
        }
        {
            LaunchOutcome o;
            o.cancelled = true;
            o.exitCode = 130;
            o.ranks = {exitOf(0, 0, SIGINT, 130, true), exitOf(1, 0, SIGINT, 130, true)};
            QTest::newRow("stopped") << launched(both, o) << Expected{RunStatus::Cancelled, 130, -1, "cancelled", ""};
            LaunchOutcome late = o; // the stop came as the ranks were leaving, every step trained
            late.ranks = {exitOf(0, 0, 0, 130, true), exitOf(1, 0, 0, 130, true)};
            QTest::newRow("stopped after every rank finished")
                << launched(both + done(0, "completed", 120) + done(1, "completed", 120), late)
                << Expected{RunStatus::Completed, 0, -1, "completed", ""};
            o.checkpointSignal = SIGUSR1;
            QTest::newRow("a time limit's warning, every rank saved")
                << launched(both + checkpoint(0, "/runs/a/checkpoints/step_6") + done(0, "checkpointed", 120)
                                + done(1, "checkpointed", 120),
                            o)
                << Expected{RunStatus::Cancelled, kCheckpointedExitCode, -1, "stopped with a checkpoint",
                            "stopped by SIGUSR1 after step 6 with a checkpoint to resume from: /runs/a/checkpoints/step_6"};
            QTest::newRow("a time limit's warning, a rank did not save")
                << launched(both + done(0, "checkpointed", 120), o)
                << Expected{RunStatus::Cancelled, 130, -1, "cancelled",
                            "stopped by SIGUSR1, but rank 1 did not report a saved checkpoint"};
        }
        {
            LaunchOutcome o;
            o.exitCode = 1;
            o.abortReason = "the loss has been NaN for 3 steps in a row since step 4";
            o.ranks = {exitOf(0, 0, SIGTERM, 130, true), exitOf(1, 0, SIGTERM, 130, true)};
            QTest::newRow("diverged") << launched(both, o)
                                      << Expected{RunStatus::Failed, 1, -1, "failed", "NaN for 3 steps in a row"};
        }
        {
            RunEvidence failedToStart;
            failedToStart.launch = Result<LaunchOutcome>(makeError("worker is not executable"));
            QTest::newRow("the launch itself failed") << failedToStart << Expected{RunStatus::Failed, 1, -1, "failed", ""};
            // A user's script without Shardscope's reporter says nothing: its exits are all there is.
            LaunchOutcome o;
            o.ranks = {exitOf(0, 0), exitOf(1, 0)};
            RunEvidence silentScript = launched("", o);
            silentScript.scriptRun = true;
            QTest::newRow("a script without the reporter")
                << silentScript << Expected{RunStatus::Completed, 0, -1, "completed", ""};
        }

        // --- A run known by its files (runs import) ---
        {
            RunEvidence e;
            e.world = {0, 1};
            e.ranks = testimonyOf(eventsOf(both + done(0, "completed", 120) + done(1, "completed", 120)));
            QTest::newRow("imported, completed") << e << Expected{RunStatus::Completed, 0, -1, "completed", ""};
            e.ranks = testimonyOf(eventsOf(both + done(0, "completed", 120)));
            QTest::newRow("imported, a rank never said")
                << e << Expected{RunStatus::Failed, 0, -1, "failed (unfinished)", "not every rank reported its end"};
            e.ranks = testimonyOf(eventsOf(both + error(0, "peer", "lost", 119) + error(1, "exception", "disk full", 120)));
            QTest::newRow("imported, an own error") << e << Expected{RunStatus::Failed, 0, 1, "failed", "exception: disk full"};
        }

        // --- A SLURM job, in SLURM's own words ---
        const std::vector<std::string> nodes = {"n1", "n2"};
        QTest::newRow("scancel") << clusterJob(
            both, 2,
            slurmSays("JobId=41 JobName=demo UserId=me(1000) JobState=CANCELLED Reason=None Dependency=(null) "
                      "NodeList=n[1-2] ExitCode=0:15",
                      1, nodes)) << Expected{RunStatus::Cancelled, 0, -1, "cancelled", "the job was cancelled (scancel)"};
        QTest::newRow("a node lost, its rank silent")
            << clusterJob(both + error(0, "peer", "connection reset by rank 1", 130), 2,
                          slurmSays("JobId=42 JobState=NODE_FAIL Reason=NodeDown NodeList=n[1-2] ExitCode=0:0", 1, nodes))
            << Expected{RunStatus::Failed, 0, 1, "failed", "rank 1 on n2 (node 1) ended without a word while its peers lost it"};
        QTest::newRow("an own error on a node")
            << clusterJob(both + error(1, "exception", "out of memory", 130) + error(0, "peer", "lost", 131), 2,
                          slurmSays("FAILED|NonZeroExitCode|n[1-2]", 1, nodes))
            << Expected{RunStatus::Failed, 0, 1, "failed", "rank 1 on n2 (node 1) failed first: exception: out of memory"};
        QTest::newRow("a time limit without a checkpoint")
            << clusterJob(both, 2, slurmSays("JobId=43 JobState=TIMEOUT Reason=TimeLimit NodeList=n[1-2] ExitCode=0:0", 1, nodes))
            << Expected{RunStatus::Failed, 0, 0, "failed", "time limit (TIMEOUT)"};
        QTest::newRow("the job failed before any rank started")
            << clusterJob("", 2, slurmSays("FAILED|NonZeroExitCode|n[1-2]", 1, nodes))
            << Expected{RunStatus::Failed, 0, -1, "failed", "no rank started: the job failed before its nodes' launchers"};
        QTest::newRow("every rank done, whatever SLURM says last") << clusterJob(
            both + done(0, "completed", 120) + done(1, "completed", 120), 2, slurmSays("CANCELLED|None|n[1-2]", 1, nodes))
                                                                   << Expected{RunStatus::Completed, 0, -1, "completed", ""};
        {
            ClusterJobEnd unseen = slurmSays("JobId=44 JobState=FAILED Reason=NonZeroExitCode NodeList=n[1-3] ExitCode=3:0", 1,
                                             {"n1", "n2", "n3"});
            unseen.nodesWithoutFolder = "n3";
            unseen.runDir = "/shared/runs/demo";
            QTest::newRow("a node cannot see the run folder")
                << clusterJob("", 3, unseen)
                << Expected{RunStatus::Failed, 0, -1, "failed", "node(s) n3 do not see the run folder /shared/runs/demo"};
        }
    }

    void decidesTheEnd()
    {
        QFETCH(RunEvidence, evidence);
        QFETCH(Expected, expected);
        const RunVerdict verdict = decideRunEnd(evidence);
        QCOMPARE(int(verdict.end.status), int(expected.status));
        QCOMPARE(verdict.end.exitCode.value_or(0), expected.exitCode);
        QCOMPARE(verdict.end.rootCauseRank.value_or(-1), expected.rootCause);
        QCOMPARE(verdict.word, expected.word);
        QVERIFY2(verdict.end.error.find(expected.errorHas) != std::string::npos, verdict.end.error.c_str());
        if (evidence.launch)
            QCOMPARE(verdict.launch.exitCode, expected.exitCode); // what the launcher exits with
    }

    void aCheckpointedStopNamesTheCheckpoint()
    {
        LaunchOutcome o;
        o.cancelled = true;
        o.checkpointSignal = SIGTERM;
        o.ranks = {exitOf(0, 0, 0, 130, true)};
        const RunVerdict verdict = decideRunEnd(
            launched(hello(0) + step(0, 3, 110) + checkpoint(0, "/r/checkpoints/step_3") + done(0, "checkpointed", 120), o));
        QCOMPARE(verdict.launch.exitCode, 128 + SIGTERM);
        QCOMPARE(verdict.launch.savedCheckpoint, std::string("/r/checkpoints/step_3"));
    }

    void testimonyOfEvents()
    {
        const Testimony t = testimonyOf(
            eventsOf(hello(0) + step(0, 3, 110) + error(0, "peer", "x", 111) + done(0, "failed", 112) + done(1, "", 113)));
        QVERIFY(t.heardFrom(0));
        QVERIFY(!t.heardFrom(2));
        QVERIFY(t.isEnding(1)); // a done without a status still says it ends
        QVERIFY(!t.endedWith(1, "completed"));
        QVERIFY(t.endedWith(0, "failed"));
        QCOMPARE(t.lastStepOf(0), std::int64_t(3));
        QVERIFY(t.isEnding(0));
        QCOMPARE(t.doneAt(0).value_or(0), 112.0);
        QCOMPARE(t.ranks.at(0).pid.value_or(0), std::int64_t(4000));
        QCOMPARE(int(t.errors.size()), 1);
        QCOMPARE(t.messageOf(0), std::string("x"));
    }
};

QTEST_APPLESS_MAIN(TestRunEnd)
#include "tst_run_end.moc"
