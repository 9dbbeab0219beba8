// The launcher as a process supervisor, driven with tests/helpers/fake_rank (no torch needed):
// torchrun's environment, failure propagation with the root-cause rank, stopping the other ranks
// in time, escalation to SIGKILL, and launch errors reported as values.

#include "app/launcher/launcher.h"
#include "app/launcher/rendezvous.h"
#include "app/launcher/run_recorder.h"
#include "app/launcher/torchrun_report.h"
#include "tests/common/fake_launch.h"
#include "tests/common/env_file.h"

#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>

using namespace shardscope;

namespace {

using shardscope::testing::fakeLaunch;
using shardscope::testing::kFakeRank;

using shardscope::testing::readEnvFile;

bool processGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

void writeText(const QString& path, const std::string& text) { std::ofstream(path.toStdString()) << text; }

// Launches a script run of 2 ranks whose rank launcher prints `output` on its stderr and exits 1,
// as torchrun does when a rank fails.
Result<LaunchOutcome> launchPrinting(const QTemporaryDir& dir, const std::string& output)
{
    const QString outputFile = dir.filePath("output.txt");
    writeText(outputFile, output);
    LaunchOptions options;
    options.workerPath = "/bin/sh";
    options.workerArgs = {"-c", "cat \"$0\" >&2; exit 1", outputFile.toStdString()};
    options.numProcesses = 2;
    options.launcherStartsRanks = true;
    options.eventPipeDirectory = dir.filePath(".events").toStdString();
    options.logDirectory = dir.path().toStdString();
    return runLaunch(options);
}

} // namespace

class TestLauncher : public QObject {
    Q_OBJECT
private slots:
    void allRanksSucceed()
    {
        auto outcome = runLaunch(fakeLaunch(3, {}));
        QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().message.c_str());
        QCOMPARE(outcome->exitCode, 0);
        QVERIFY(!outcome->rootCauseRank);
        QCOMPARE(int(outcome->ranks.size()), 3);
        for (const auto& r : outcome->ranks) {
            QVERIFY(!r.failed());
            QVERIFY(processGone(r.pid));
        }
        QVERIFY(outcome->failureSummary().empty());
    }

    void environmentIsTorchruns()
    {
        QTemporaryDir dir;
        auto outcome = runLaunch(fakeLaunch(4, {"--out", dir.path().toStdString()}));
        QVERIFY(outcome.ok());
        QCOMPARE(outcome->exitCode, 0);
        QVERIFY(outcome->masterPort > 0);
        for (int rank = 0; rank < 4; ++rank) {
            auto env = readEnvFile(dir.filePath(QStringLiteral("rank%1.env").arg(rank)).toStdString());
            QCOMPARE(env["RANK"], std::to_string(rank));
            QCOMPARE(env["LOCAL_RANK"], std::to_string(rank));
            QCOMPARE(env["WORLD_SIZE"], std::string("4"));
            QCOMPARE(env["LOCAL_WORLD_SIZE"], std::string("4"));
            QCOMPARE(env["GROUP_RANK"], std::string("0"));
            QCOMPARE(env["MASTER_ADDR"], std::string("127.0.0.1"));
            QCOMPARE(env["MASTER_PORT"], std::to_string(outcome->masterPort));
            // Only rank 0 serves the TCPStore, on the socket the launcher bound for it.
            QCOMPARE(env.count("SHARDSCOPE_MASTER_LISTEN_FD"), size_t(rank == 0 ? 1 : 0));
            QCOMPARE(env["LISTEN_FD_OK"], std::string(rank == 0 ? "1" : ""));
        }
    }

    void failingRankStopsTheOthers_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("failingRank");
        QTest::addColumn<int>("code");
        QTest::newRow("2 ranks, rank 1 exits 7") << 2 << 1 << 7;
        QTest::newRow("4 ranks, rank 0 exits 3") << 4 << 0 << 3;
        QTest::newRow("4 ranks, rank 3 exits 42") << 4 << 3 << 42;
    }
    void failingRankStopsTheOthers()
    {
        QFETCH(int, ranks);
        QFETCH(int, failingRank);
        QFETCH(int, code);
        const auto start = std::chrono::steady_clock::now();
        auto outcome = runLaunch(
            fakeLaunch(ranks, {"--exit", std::to_string(failingRank) + ":" + std::to_string(code), "--hang"}));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY(outcome.ok());
        QCOMPARE(outcome->exitCode, code);
        QVERIFY(outcome->rootCauseRank);
        QCOMPARE(*outcome->rootCauseRank, failingRank);
        for (const auto& r : outcome->ranks) {
            QVERIFY(processGone(r.pid));
            if (r.rank == failingRank)
                continue;
            QVERIFY(r.stoppedByLauncher);
            QCOMPARE(r.signal, SIGINT); // the engine's "stop after this step"; the fake does not catch it
        }
        QVERIFY2(seconds < 5.0, qPrintable(QStringLiteral("took %1 s").arg(seconds)));
        const std::string summary = outcome->failureSummary();
        QVERIFY(summary.find("rank " + std::to_string(failingRank) + " failed first") != std::string::npos);
        QVERIFY(summary.find("exited with code " + std::to_string(code)) != std::string::npos);
    }

    void killedRankIsNamedWithItsSignal()
    {
        auto outcome = runLaunch(fakeLaunch(3, {"--kill-self", "1:" + std::to_string(SIGKILL), "--hang"}));
        QVERIFY(outcome.ok());
        QCOMPARE(outcome->exitCode, 128 + SIGKILL);
        QCOMPARE(*outcome->rootCauseRank, 1);
        QVERIFY(outcome->failureSummary().find("killed by SIGKILL") != std::string::npos);
    }

    void ranksIgnoringTheStopSignalAreKilled()
    {
        auto options = fakeLaunch(3, {"--exit", "0:5", "--hang", "--ignore-stop"});
        options.stopGrace = std::chrono::milliseconds(300);
        const auto start = std::chrono::steady_clock::now();
        auto outcome = runLaunch(options);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY(outcome.ok());
        QCOMPARE(outcome->exitCode, 5);
        QCOMPARE(outcome->ranks[1].signal, SIGKILL);
        QCOMPARE(outcome->ranks[2].signal, SIGKILL);
        QVERIFY(seconds < 3.0);
        for (const auto& r : outcome->ranks)
            QVERIFY(processGone(r.pid));
    }

    // A rank that sends nothing for the heartbeat timeout is the root cause; one that keeps
    // sending is not; every rank is stopped.
    void silentRankIsTakenAsHung()
    {
        auto options = fakeLaunch(3, {"--hang", "--beat", "0:50"});
        options.hangTimeout = std::chrono::milliseconds(600);
        options.startupGrace = std::chrono::milliseconds(0); // silent from the start
        options.stopGrace = std::chrono::milliseconds(500);
        int lines = 0;
        options.onEventLine = [&](int, std::string_view) { ++lines; };
        const auto start = std::chrono::steady_clock::now();
        auto outcome = runLaunch(options);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY(outcome.ok());
        QVERIFY(outcome->rootCauseRank);
        QVERIFY(*outcome->rootCauseRank != 0); // rank 0 kept beating
        QVERIFY(outcome->ranks[*outcome->rootCauseRank].hung);
        QVERIFY(!outcome->ranks[0].hung);
        QVERIFY(lines > 3);
        QVERIFY2(seconds < 3.0, qPrintable(QString::number(seconds)));
        QCOMPARE(outcome->exitCode, kHungExitCode); // whatever the stopped rank exited with
        QVERIFY2(outcome->failureSummary().find("hung (no event, not even a heartbeat, for 0.6 s since it started)")
                     != std::string::npos,
                 outcome->failureSummary().c_str());
        for (const auto& r : outcome->ranks)
            QVERIFY(processGone(r.pid));
    }

    // The root cause is the rank whose own error came first, not the first rank to exit; a
    // lost peer is never the cause; a signal with no error event counts from its exit.
    void rootCauseIsTheFirstOwnError()
    {
        LaunchOutcome outcome;
        outcome.ranks = {RankExit{}, RankExit{}};
        outcome.ranks[0].rank = 0;
        outcome.ranks[0].exitCode = 5; // lost its peer, exited first
        outcome.ranks[0].exitedAt = 100.0;
        outcome.ranks[1].rank = 1;
        outcome.ranks[1].exitCode = 4;
        outcome.ranks[1].stoppedByLauncher = true;
        outcome.ranks[1].exitedAt = 100.2;
        outcome.rootCauseRank = 0;
        outcome.exitCode = 5;
        outcome.blameFirstOwnError({{0, 100.05, "peer"}, {1, 99.9, "exception"}});
        QCOMPARE(outcome.rootCauseRank.value_or(-1), 1);
        QCOMPARE(outcome.exitCode, 4);

        LaunchOutcome killed = outcome; // rank 1 SIGKILLed with no event; rank 0 reports the peer loss
        killed.ranks[1] = RankExit{};
        killed.ranks[1].rank = 1;
        killed.ranks[1].signal = SIGKILL;
        killed.ranks[1].exitedAt = 99.0;
        killed.rootCauseRank = 0;
        killed.exitCode = 5;
        killed.blameFirstOwnError({{0, 100.05, "peer"}});
        QCOMPARE(killed.rootCauseRank.value_or(-1), 1);
        QCOMPARE(killed.exitCode, 128 + SIGKILL);

        // #43 point 1: rank 1 exits 0 before it finished its steps; rank 0 then loses it and fails.
        // Rank 1 is the root cause, not the peer that lost it.
        LaunchOutcome quit = outcome;
        quit.ranks[1] = RankExit{};
        quit.ranks[1].rank = 1;
        quit.ranks[1].exitedAt = 99.5;
        quit.rootCauseRank = 0;
        quit.exitCode = 5;
        quit.blameFirstOwnError({{0, 100.05, "peer"}}, [](int rank) { return rank == 1; });
        QCOMPARE(quit.rootCauseRank.value_or(-1), 1);
        QCOMPARE(quit.exitCode, 1);
        QVERIFY2(quit.reason.find("rank 1 exited with code 0 before the end of the run and the others lost it: it left early")
                     != std::string::npos,
                 quit.reason.c_str());
        LaunchOutcome finished = quit; // the same exit after reporting its end: not to blame
        finished.rootCauseRank = 0;
        finished.exitCode = 5;
        finished.reason.clear();
        finished.blameFirstOwnError({{0, 100.05, "peer"}}, [](int) { return false; });
        QCOMPARE(finished.rootCauseRank.value_or(-1), 0);

        LaunchOutcome hung = outcome; // a hang the launcher saw keeps its rank
        hung.ranks[0].hung = true;
        hung.rootCauseRank = 0;
        hung.exitCode = kHungExitCode;
        hung.blameFirstOwnError({{1, 99.9, "exception"}});
        QCOMPARE(hung.rootCauseRank.value_or(-1), 0);
    }

    // A script run's rank launcher (torchrun, under accelerate launch) exits 1 whichever rank
    // failed and however; its report, printed by torch 2.14 when rank 1 aborted and torchrun then
    // stopped rank 0, is what names them.
    // accelerate launch killed from outside (#43 point 10): it was named "rank 1 (pid of accelerate
    // launch) killed by SIGKILL" with rank 0 standing in as the root cause.
    void killedRankLauncherIsNamedNotARank()
    {
        QTemporaryDir dir;
        LaunchOptions options;
        options.workerPath = "/bin/sh";
        options.workerArgs = {"-c", "kill -KILL $$"};
        options.numProcesses = 2;
        options.launcherStartsRanks = true;
        options.eventPipeDirectory = dir.filePath(".events").toStdString();
        options.logDirectory = dir.path().toStdString();
        auto outcome = runLaunch(options);
        QVERIFY(outcome.ok());
        QCOMPARE(outcome->exitCode, 128 + SIGKILL);
        QVERIFY(!outcome->rootCauseRank);
        QVERIFY(!outcome->cancelled);
        QVERIFY(outcome->rankLauncherKilled);
        QCOMPARE(outcome->rankLauncherKilled->signal, SIGKILL);
        const std::string summary = outcome->failureSummary();
        QVERIFY2(summary.rfind("error: accelerate launch (pid " + std::to_string(outcome->rankLauncherKilled->pid)
                                   + ") was killed by SIGKILL",
                               0)
                     == 0,
                 summary.c_str());
        QVERIFY2(summary.find("no rank had failed") != std::string::npos, summary.c_str());
        for (const auto& r : outcome->ranks) {
            QVERIFY(r.stoppedByLauncher);
            QCOMPARE(r.pid, pid_t(0)); // not accelerate launch's pid under a rank's name
        }
        QVERIFY2(summary.find("rank 1 stopped by the launcher with SIGKILL") != std::string::npos, summary.c_str());
        QVERIFY2(summary.find("stands for it") == std::string::npos, summary.c_str());
    }

    void torchrunsReportNamesTheFailedRank()
    {
        QTemporaryDir dir;
        auto outcome = launchPrinting(dir, "[default0]:training...\n"
                                           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                                           "=======================================================\n"
                                           "t.py FAILED\n"
                                           "-------------------------------------------------------\n"
                                           "Failures:\n"
                                           "[1]:\n"
                                           "  time      : 2026-12-05_23:07:27\n"
                                           "  host      : localhost\n"
                                           "  rank      : 0 (local_rank: 0)\n"
                                           "  exitcode  : -15 (pid: 27172)  (SIGTERM)\n"
                                           "  error_file: <N/A>\n"
                                           "  traceback : Signal 15 (SIGTERM) received by PID 27172\n"
                                           "-------------------------------------------------------\n"
                                           "Root Cause (first observed failure):\n"
                                           "[0]:\n"
                                           "  time      : 2026-12-05_23:07:27\n"
                                           "  host      : localhost\n"
                                           "  rank      : 1 (local_rank: 1)\n"
                                           "  exitcode  : -6 (pid: 27173)  (SIGABRT)\n"
                                           "  error_file: <N/A>\n"
                                           "  traceback : Signal 6 (SIGABRT) received by PID 27173\n"
                                           "=======================================================\n");
        QVERIFY(outcome.ok());
        QCOMPARE(*outcome->rootCauseRank, 1);
        QCOMPARE(outcome->exitCode, 128 + SIGABRT);
        QCOMPARE(outcome->ranks[1].pid, pid_t(27173));
        QCOMPARE(outcome->ranks[1].signal, SIGABRT);
        QVERIFY(!outcome->ranks[1].stoppedByLauncher);
        QCOMPARE(outcome->ranks[0].pid, pid_t(27172));
        QVERIFY(outcome->ranks[0].stoppedByLauncher);
        const std::string summary = outcome->failureSummary();
        QVERIFY2(summary.find("rank 1 failed first") != std::string::npos, summary.c_str());
        QVERIFY2(summary.find("rank 1 (pid 27173) killed by SIGABRT") != std::string::npos, summary.c_str());
        QVERIFY2(summary.find("rank 0 (pid 27172) stopped by torchrun with SIGTERM") != std::string::npos, summary.c_str());
        // Every rank exits when torchrun does: at that equal time, no rank displaces its root cause.
        outcome->blameFirstOwnError({});
        QCOMPARE(*outcome->rootCauseRank, 1);
    }

    // One rank failed, the other had exited 0 before: the report lists only the failed one.
    void torchrunsReportLeavesOutRanksThatSucceeded()
    {
        QTemporaryDir dir;
        auto outcome = launchPrinting(
            dir,
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============\nd.py FAILED\n------------\nFailures:\n  <NO_OTHER_FAILURES>\n------------\n"
            "Root Cause (first observed failure):\n[0]:\n"
            "  time      : 2026-12-05_23:06:24\n  host      : localhost\n"
            "  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: 26859) \n"
            "  error_file: <N/A>\n  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
            "============\n");
        QVERIFY(outcome.ok());
        QCOMPARE(*outcome->rootCauseRank, 1);
        QCOMPARE(outcome->exitCode, 3);
        QVERIFY(!outcome->ranks[0].failed());
        QCOMPARE(outcome->ranks[1].exitCode, 3);
        // Without a report (accelerate failed before torchrun ran) rank 0 stands for the launcher,
        // and says so.
        outcome = launchPrinting(dir, "Traceback (most recent call last):\nValueError: bad config\n");
        QVERIFY(outcome.ok());
        QCOMPARE(*outcome->rootCauseRank, 0);
        QVERIFY(outcome->rootCauseStandsIn);
        QCOMPARE(outcome->exitCode, 1);
        QVERIFY2(outcome->failureSummary().find("no report of torchrun's names the rank") != std::string::npos,
                 outcome->failureSummary().c_str());
        // A report of ranks that are not these (another machine's local rank 5) changes nothing.
        outcome = launchPrinting(dir, "\nFailures:\n  <NO_OTHER_FAILURES>\n---\nRoot Cause (first observed failure):\n[0]:\n"
                                      "  rank      : 5 (local_rank: 5)\n  exitcode  : 0 (pid: 7)\n===\n");
        QVERIFY(outcome.ok());
        QCOMPARE(*outcome->rootCauseRank, 0);
        QCOMPARE(outcome->exitCode, 1); // never 0 for a failed launch
    }

    // The report's text, as torch formats it, in the cases a launch can leave it in.
    void torchrunReportIsReadOnlyFromItsFields()
    {
        const std::string entry0 = "[1]:\n  time      : 2026-12-05_23:06:06\n  host      : localhost\n"
                                   "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 26805) \n"
                                   "  error_file: /tmp/err.json\n  traceback : Traceback (most recent call last):\n"
                                   "    rank      : 3 (local_rank: 1)\n    exitcode  : -9 (pid: 1)\n"
                                   "  RuntimeError: boom\n";
        const std::string root = "Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-05_23:06:06\n"
                                 "  rank      : 1 (local_rank: 1)\n  exitcode  : -11 (pid: 26806)  (SIGSEGV)\n"
                                 "  error_file: <N/A>\n  traceback : Signal 11 (SIGSEGV) received by PID 26806\n"
                                 "============\n";
        auto report = parseTorchrunReport("x.py FAILED\n------------\nFailures:\n" + entry0 + "------------\n" + root);
        QVERIFY(report.whole);
        QCOMPARE(report.failures.size(), size_t(2)); // the indented lines of the traceback are not entries
        QCOMPARE(report.failures[0].rank, 1);
        QVERIFY(report.failures[0].rootCause);
        QCOMPARE(report.failures[0].exitCode, -11);
        QCOMPARE(report.failures[1].rank, 0);
        QCOMPARE(report.failures[1].exitCode, 1);
        QCOMPARE(report.failures[1].pid, pid_t(26805));
        // Its beginning cut off (a long traceback): the root cause is still read, the rest is not.
        report = parseTorchrunReport("ck (most recent call last):\n  File \"x.py\"\n------------\n" + root);
        QVERIFY(!report.whole);
        QCOMPARE(report.failures.size(), size_t(1));
        QCOMPARE(report.failures[0].pid, pid_t(26806));
        // An earlier report's list is not this one's.
        report = parseTorchrunReport("x.py FAILED\nFailures:\n" + entry0 + "============\nagain\n------------\n" + root);
        QVERIFY(!report.whole);
        QCOMPARE(report.failures.size(), size_t(1));
        // Its end cut off: nothing.
        QVERIFY(parseTorchrunReport("\nRoot Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n")
                    .failures.empty());
        QVERIFY(parseTorchrunReport("").failures.empty());
    }

    // The lines a failure report shows of a rank's log: its last ones that say something.
    void logTailSkipsBlankLinesAtTheEnd()
    {
        QTemporaryDir dir;
        const QString log = dir.filePath("rank1.log");
        writeText(log, "one\ntwo\n\nthree\nfour\n\n  \n");
        QCOMPARE(tailOfFile(log.toStdString(), 3), std::string("\nthree\nfour\n"));
        QCOMPARE(tailOfFile(log.toStdString(), 10), std::string("one\ntwo\n\nthree\nfour\n"));
        QCOMPARE(tailOfFile(dir.filePath("missing.log").toStdString(), 3), std::string());
    }

    void missingWorkerIsAnError()
    {
        auto options = fakeLaunch(2, {});
        options.workerPath = "/nonexistent/shardscope-worker";
        auto outcome = runLaunch(options);
        QVERIFY(!outcome.ok());
        QVERIFY(outcome.error().message.find("/nonexistent/shardscope-worker") != std::string::npos);
    }

    void takenPortIsAnError()
    {
        auto taken = listenOn("127.0.0.1", 0);
        QVERIFY(taken.ok());
        auto options = fakeLaunch(2, {});
        options.masterPort = taken->port;
        auto outcome = runLaunch(options);
        QVERIFY(!outcome.ok());
        QVERIFY2(outcome.error().message.find("already in use") != std::string::npos, outcome.error().message.c_str());
        QVERIFY(outcome.error().message.find(std::to_string(taken->port)) != std::string::npos);
        ::close(taken->fd);
    }

    void badAddressIsAnError()
    {
        auto options = fakeLaunch(1, {});
        options.masterAddr = "not-an-address";
        auto outcome = runLaunch(options);
        QVERIFY(!outcome.ok());
        QVERIFY(outcome.error().message.find("main_process_ip") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestLauncher)
#include "tst_launcher.moc"
