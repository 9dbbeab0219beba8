// Users' own scripts through the real `accelerate launch` of the project's venv, on 2 CPU ranks:
// the Accelerate example's step events from both ranks reach events.jsonl and the history; a rank
// that raises is the root cause and the other stops; a live run listens on loopback only, and
// Stop (SIGTERM to the launcher) leaves no process; the silent degradations of Accelerate on the CPU are refused before anything starts;
// a missing script and a Python without accelerate are clear errors; the Trainer example's run
// reaches the history with per-rank events; the Run page shows a script run's charts and command.
// A run profiled with torch.profiler has its traces
// imported after it: the Trace page shows both ranks' Gloo collectives.

#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "ui/metric_chart.h"
#include "ui/run_page.h"
#include "ui/trace_page.h"
#include "tests/common/files.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSet>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include <algorithm>
#include <map>
#include <set>

using namespace shardscope::storage;

namespace {

const QString kShardscope = QStringLiteral(SHARDSCOPE_BINARY_DIR "/app/shardscope");
const QString kVenvPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kAccelerateExample = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/examples/accelerate_train.py");
const QString kMisbehavingScript = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/misbehaving_train.py");
const QString kTrainerExample = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/examples/trainer_train.py");

using shardscope::testing::writeFile;

// A MULTI_CPU config of 2 ranks, as `shardscope config` writes it for a CPU machine.
QString cpuConfig(const QTemporaryDir& dir, const QByteArray& distributedType = "MULTI_CPU", bool useCpu = true)
{
    const QString path = dir.filePath("config-" + QString::number(qHash(distributedType)) + ".yaml");
    writeFile(path, "compute_environment: LOCAL_MACHINE\ndistributed_type: " + distributedType
                        + "\nmixed_precision: 'no'\nnum_machines: 1\nnum_processes: 2\nuse_cpu: " + (useCpu ? "true" : "false")
                        + "\n");
    return path;
}

// The script's data lives in the test's folder, so its ranks are found by that path in their
// command lines (no process may outlive a run).
QString dataFile(const QTemporaryDir& dir)
{
    const QString path = dir.filePath("data.txt");
    QFile::copy(kAccelerateExample, path);
    return path;
}

QProcessEnvironment environment(const QTemporaryDir& home)
{
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDSCOPE_HOME", home.path());
    env.insert("VIRTUAL_ENV", QFileInfo(kVenvPython).dir().absoluteFilePath(".."));
    return env;
}

int launch(const QTemporaryDir& home, const QStringList& args, QString* output)
{
    QProcess process;
    process.setProcessEnvironment(environment(home));
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(kShardscope, QStringList{"launch"} + args);
    if (!process.waitForFinished(240000))
        process.kill();
    *output = QString::fromUtf8(process.readAll());
    return process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
}

// Processes whose command line mentions `marker` (the test's folder).
QStringList processesMentioning(const QString& marker)
{
    QStringList found;
    const QByteArray needle = marker.toUtf8();
    for (const QString& pid : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (pid.toLongLong() <= 0 || pid.toLongLong() == QCoreApplication::applicationPid())
            continue;
        QFile cmdline("/proc/" + pid + "/cmdline");
        if (!cmdline.open(QIODevice::ReadOnly))
            continue;
        QByteArray text = cmdline.readAll();
        if (text.contains(needle))
            found << pid + ": " + QString::fromUtf8(text.replace('\0', ' '));
    }
    return found;
}

// The local addresses of the TCP sockets the processes `pids` listen on, as /proc/net/tcp{,6}
// writes them ("0100007F:1F90": 127.0.0.1:8080, the address's bytes in the machine's order).
QStringList listeningAddressesOf(const QStringList& pids)
{
    QSet<QString> inodes;
    for (const QString& pid : pids)
        for (const QFileInfo& fd : QDir("/proc/" + pid + "/fd").entryInfoList(QDir::Files | QDir::System)) {
            const QString target = fd.symLinkTarget().section('/', -1);
            if (target.startsWith("socket:["))
                inodes.insert(target.mid(8).chopped(1));
        }
    QStringList addresses;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        QFile file(table);
        if (!file.open(QIODevice::ReadOnly))
            continue;
        file.readLine(); // the header
        while (!file.atEnd()) {
            const QStringList fields = QString::fromLatin1(file.readLine()).split(' ', Qt::SkipEmptyParts);
            if (fields.size() > 9 && fields[3] == "0A" && inodes.contains(fields[9])) // 0A: LISTEN
                addresses << fields[1];
        }
    }
    return addresses;
}

// 127.0.0.0/8, ::1 or ::ffff:127.x.y.z in /proc/net/tcp{,6}'s notation (little-endian words).
bool isLoopbackListener(const QString& address)
{
    const QString ip = address.section(':', 0, 0);
    if (ip.size() == 8)
        return ip.mid(6, 2) == "7F";
    return ip == "00000000000000000000000001000000" || (ip.startsWith("0000000000000000FFFF0000") && ip.mid(30, 2) == "7F");
}

// The Accelerate example on 2 ranks in `home`, named `name`, stepping until it is stopped.
void startEndlessRun(QProcess& launcher, const QTemporaryDir& home, const QString& name)
{
    launcher.setProcessEnvironment(environment(home));
    launcher.setProcessChannelMode(QProcess::MergedChannels);
    launcher.start(kShardscope, {"launch", "--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name", name,
                                 "--", "--steps", "100000", "--step_sleep", "0.05", "--data", dataFile(home)});
    QVERIFY(launcher.waitForStarted());
}

// Step events per rank in a run directory's events.jsonl.
std::map<int, int> stepEventsPerRank(const QString& runDir)
{
    std::map<int, int> steps;
    QFile events(runDir + "/events.jsonl");
    if (!events.open(QIODevice::ReadOnly))
        return steps;
    while (!events.atEnd()) {
        const auto e = QJsonDocument::fromJson(events.readLine()).object();
        if (e["type"] == "step")
            ++steps[e["rank"].toInt()];
    }
    return steps;
}

// The history of `home` holds one run, completed, of 2 MULTI_CPU ranks with `steps` losses each.
void expectCompletedTwoRankRun(const QTemporaryDir& home, size_t steps)
{
    auto store = RunStore::open(historyFile(home.path().toStdString()));
    QVERIFY(store.ok());
    auto runs = store->listRuns();
    QVERIFY(runs.ok());
    QCOMPARE(runs->size(), size_t(1));
    QCOMPARE(runs->front().status, RunStatus::Completed);
    QCOMPARE(runs->front().worldSize, 2);
    QCOMPARE(QString::fromStdString(runs->front().distributedType), QStringLiteral("MULTI_CPU"));
    for (int rank : {0, 1}) {
        auto loss = store->series(runs->front().id, rank, "loss");
        QVERIFY(loss.ok());
        QCOMPARE(loss->size(), steps);
    }
}

// The details of the one run the history of `home` holds, which ended as `status`. Checked with
// QVERIFY/QCOMPARE: the caller stops when QTest::currentTestFailed().
void readOnlyRun(const QTemporaryDir& home, RunStatus status, RunDetails& details)
{
    auto store = RunStore::open(historyFile(home.path().toStdString()));
    QVERIFY(store.ok());
    auto runs = store->listRuns();
    QVERIFY(runs.ok());
    QCOMPARE(runs->size(), size_t(1));
    QCOMPARE(runs->front().status, status);
    auto found = store->run(runs->front().id);
    QVERIFY(found.ok());
    details = std::move(*found);
}

bool venvHasAccelerate()
{
    QProcess probe;
    probe.start(kVenvPython, {"-c", "import accelerate, torch, shardscope"});
    return probe.waitForFinished(120000) && probe.exitStatus() == QProcess::NormalExit && probe.exitCode() == 0;
}

} // namespace

class TestScriptLaunch : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        if (!venvHasAccelerate())
            QSKIP("the project venv has no accelerate/torch/shardscope (scripts/setup.sh installs them)");
    }

    void accelerateExampleReportsEveryRank()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name", "acc", "--",
                                 "--steps", "6", "--data", dataFile(home)},
                                &out);
        QVERIFY2(code == 0, qPrintable(out));
        const QString runDir = home.filePath("runs/acc");
        const auto steps = stepEventsPerRank(runDir);
        QCOMPARE(steps.size(), size_t(2));
        QCOMPARE(steps.at(0), 6);
        QCOMPARE(steps.at(1), 6);
        // The exact command, shown and kept: the CPU path that really gives 2 ranks.
        QFile command(runDir + "/command.sh");
        QVERIFY(command.open(QIODevice::ReadOnly));
        const QByteArray text = command.readAll();
        QVERIFY2(text.contains("ACCELERATE_USE_CPU=1") && text.contains("--multi_gpu") && text.contains("--num_processes 2"),
                 text.constData());
        QVERIFY(out.contains("command: GLOO_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo ACCELERATE_USE_CPU=1"));
        QVERIFY(QFileInfo(runDir + "/logs/rank0.log").size() > 0); // the main process prints its summary
        QVERIFY(!QFileInfo::exists(runDir + "/.events")); // the named pipes are gone

        expectCompletedTwoRankRun(home, 6);
        if (QTest::currentTestFailed())
            return;
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QVERIFY(runs.ok());
        for (int rank : {0, 1}) {
            auto loss = store->series(runs->front().id, rank, "loss");
            QVERIFY(loss.ok());
            QCOMPARE(loss->back().step, std::int64_t(6));
            // The global loss is the mean over the ranks: equal on both.
            if (rank == 1) {
                auto first = store->series(runs->front().id, 0, "loss");
                QCOMPARE(first->back().value, loss->back().value);
            }
        }
        auto details = store->run(runs->front().id);
        QVERIFY(details->recipeText.find("accelerate_train.py") != std::string::npos);

        // The Run page shows the run as it shows an engine run: the loss of 6 steps, one memory
        // series per rank, and the command it ran.
        shardscope::ui::RunPage page;
        QSignalSpy finished(&page, &shardscope::ui::RunPage::runFinished);
        page.openStoreRun(historyFile(home.path().toStdString()), runs->front().id);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
        QCOMPARE(page.chart(QStringLiteral("loss"))->pointCount(0), 6);
        QCOMPARE(page.chart(QStringLiteral("memory"))->seriesCount(), 2);
        QVERIFY2(page.scriptCommand().contains("ACCELERATE_USE_CPU=1"), qPrintable(page.scriptCommand()));
    }

    void profiledRunShowsGlooCollectives()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name", "prof", "--",
                                 "--steps", "7", "--profile", "--data", dataFile(home)},
                                &out);
        QVERIFY2(code == 0, qPrintable(out));
        QVERIFY2(out.contains("torch.profiler traces of 2 ranks imported"), qPrintable(out));
        const QString runDir = home.filePath("runs/prof");
        QVERIFY(QFileInfo::exists(runDir + "/traces/merged.json"));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QVERIFY(runs.ok() && runs->size() == 1);
        auto details = store->run(runs->front().id);
        QVERIFY(details.ok());
        QCOMPARE(details->traces.size(), size_t(2)); // one `trace` event per rank
        std::vector<std::string> recorded;
        std::set<int> ranks;
        for (const auto& trace : details->traces) {
            recorded.push_back(trace.path);
            ranks.insert(trace.rank);
            QVERIFY2(trace.compute > 0, trace.path.c_str());
        }
        QCOMPARE(ranks, (std::set<int>{0, 1}));

        // The workbench opens the run's traces as it opens any run's.
        shardscope::ui::TracePage page;
        QSignalSpy loaded(&page, &shardscope::ui::TracePage::tracesLoaded);
        page.openFiles(shardscope::ui::findRunTraceFiles(runDir.toStdString(), recorded), "prof", 2);
        QVERIFY(loaded.wait(60000));
        QCOMPARE(page.view()->traces.size(), size_t(2));
        std::set<int> ranksWithAllReduce;
        for (const auto& row : page.collectiveModel()->rows())
            if (row.stats.kind == "all_reduce" && row.stats.count > 0)
                ranksWithAllReduce.insert(row.rank);
        QCOMPARE(ranksWithAllReduce, (std::set<int>{0, 1})); // DDP's gradient all-reduce through Gloo, on both ranks
        for (const auto& trace : page.view()->traces) {
            const bool gloo = std::any_of(trace.spans.begin(), trace.spans.end(), [](const auto& span) {
                return span.name.rfind("gloo:all_reduce", 0) == 0 && span.lane == shardscope::profiler::Lane::Communication;
            });
            QVERIFY2(gloo, qPrintable(QStringLiteral("rank %1 shows no gloo:all_reduce").arg(trace.rank)));
        }
    }

    void plainAccelerateLaunchRecordsTheRun()
    {
        // No Shardscope launcher: the real `accelerate launch` in a terminal. The reporter writes
        // each rank's events into the history's runs/ and rank 0 imports them at exit.
        QTemporaryDir home;
        QProcess process;
        auto env = environment(home);
        env.insert("ACCELERATE_USE_CPU", "1");
        env.insert("SHARDSCOPE_BIN", kShardscope);
        env.remove("SHARDSCOPE_EVENT_PIPES");
        process.setProcessEnvironment(env);
        process.setProcessChannelMode(QProcess::MergedChannels);
        process.start(kVenvPython, {"-m", "accelerate.commands.accelerate_cli", "launch", "--multi_gpu", "--num_processes", "2",
                                    "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                                    "--main_process_port", "0", kAccelerateExample, "--steps", "5", "--data", dataFile(home)});
        QVERIFY(process.waitForFinished(240000));
        const QString out = QString::fromUtf8(process.readAll());
        QVERIFY2(process.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains("shardscope: imported run"), qPrintable(out));
        expectCompletedTwoRankRun(home, 5);
        if (QTest::currentTestFailed())
            return;
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QVERIFY(runs.ok() && !runs->empty());
        QVERIFY2(runs->front().name.rfind("accelerate_train-", 0) == 0, runs->front().name.c_str());
    }

    void raisingRankIsTheRootCause()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name", "bad", "--",
                                 "--steps", "50", "--fail_rank", "1", "--fail_step", "3", "--data", dataFile(home)},
                                &out);
        QVERIFY2(code != 0, qPrintable(out));
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
        QVERIFY2(out.contains("injected failure on rank 1 at step 3"), qPrintable(out));
        RunDetails details;
        readOnlyRun(home, RunStatus::Failed, details);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(details.rootCauseRank.value_or(-1), 1);
        // The other rank stopped: nothing of the run is left.
        QTRY_VERIFY_WITH_TIMEOUT(processesMentioning(home.path()).isEmpty(), 10000);
    }

    // A rank that dies without a Python exception (a native crash, here after its training) reports
    // no error: only torchrun saw how it ended, and its report names the rank, signal and pid.
    // #43 point 1: a rank that calls sys.exit(0) mid-training (its reporter says "completed" from
    // its exit handler) is the root cause, not the peer that then lost it ("rank 0 failed first").
    void rankThatQuitsWithCodeZeroIsTheRootCause()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kMisbehavingScript, "--run_name", "quit", "--",
                                 "--steps", "30", "--quit", "1:5", "--step_sleep", "0.05", "--data-folder", home.path()},
                                &out);
        QVERIFY2(code == 1, qPrintable(out));
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
        QVERIFY2(out.contains("rank 1 exited with code 0 before the end of the run and the others lost it: it left early"),
                 qPrintable(out));
        RunDetails details;
        readOnlyRun(home, RunStatus::Failed, details);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(details.rootCauseRank.value_or(-1), 1);
        QTRY_VERIFY_WITH_TIMEOUT(processesMentioning(home.path()).isEmpty(), 10000);
    }

    void crashedRankIsNamedFromTorchrunsReport()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name", "crash", "--",
                                 "--steps", "4", "--abort_rank", "1", "--data", dataFile(home)},
                                &out);
        QVERIFY2(code == 128 + SIGABRT, qPrintable(out));
        QVERIFY2(out.contains("rank 1 failed first (root cause)"), qPrintable(out));
        QVERIFY2(out.contains("killed by SIGABRT"), qPrintable(out));
        QVERIFY2(out.contains("last lines of rank 1's log") && out.contains("rank 1 aborts (--abort_rank)"), qPrintable(out));
        // It had reported the end of its training: said, with what such an end most likely means.
        const QString onItsWayOut = "rank 1 had reported that it finished its training before it ended";
        QVERIFY2(out.contains(onItsWayOut), qPrintable(out));
        QVERIFY2(out.contains("pytorch/pytorch#190489") && out.contains("accelerator.end_training()"), qPrintable(out));
        RunDetails details;
        readOnlyRun(home, RunStatus::Failed, details);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(details.rootCauseRank.value_or(-1), 1);
        QCOMPARE(details.exitCode.value_or(-1), 128 + SIGABRT);
        QVERIFY2(QString::fromStdString(details.error).contains(onItsWayOut), details.error.c_str());
        // The pid named is the rank's own (as its hello event gave it), not accelerate launch's.
        QCOMPARE(details.ranks.size(), size_t(2));
        const auto& rank1 = details.ranks[1];
        QCOMPARE(rank1.info.rank, 1);
        QVERIFY(rank1.info.pid > 0);
        QVERIFY2(out.contains(QString("rank 1 (pid %1) killed by SIGABRT").arg(rank1.info.pid)), qPrintable(out));
        QCOMPARE(rank1.exitCode.value_or(-1), 128 + SIGABRT);
        // Rank 0 finished its steps first: it exited 0, or torchrun stopped it when rank 1 died.
        const int rank0 = details.ranks[0].exitCode.value_or(-1);
        QVERIFY2(rank0 == 0 || rank0 == 128 + SIGTERM, qPrintable(out));
    }

    void stopEndsTheRunWithNoProcessLeftAndListensOnLoopbackOnly()
    {
        QTemporaryDir home;
        QProcess launcher;
        startEndlessRun(launcher, home, "stop");
        QTRY_VERIFY_WITH_TIMEOUT(stepEventsPerRank(home.filePath("runs/stop")).size() == 2, 120000);
        const QStringList running = processesMentioning(home.path());
        QVERIFY(running.size() >= 3); // accelerate launch and its 2 ranks
        // A run on one machine listens on loopback only (#43 point 5): torchrun's store in
        // accelerate launch, the ranks' Gloo pairs; nothing a network neighbour could reach.
        QStringList pids;
        for (const QString& process : running)
            pids << process.section(':', 0, 0);
        // #44: PyTorch's own Flight Recorder dumps (a timeout's) go into the run folder.
        bool dumpsIntoTheRun = false;
        for (const QString& pid : pids) {
            QFile environ("/proc/" + pid + "/environ");
            if (environ.open(QIODevice::ReadOnly)
                && environ.readAll().split('\0').contains(
                    ("TORCH_FR_DUMP_TEMP_FILE=" + home.filePath("runs/stop/flight/torch_fr_rank")).toUtf8()))
                dumpsIntoTheRun = true;
        }
        QVERIFY(dumpsIntoTheRun);
        const QStringList listening = listeningAddressesOf(pids);
        QVERIFY2(!listening.isEmpty(), qPrintable(running.join("\n"))); // the store at least
        for (const QString& address : listening)
            QVERIFY2(isLoopbackListener(address), qPrintable(address + " is not loopback; listening: " + listening.join(", ")));
        launcher.terminate(); // the workbench's Stop
        QVERIFY(launcher.waitForFinished(60000));
        const QString out = QString::fromUtf8(launcher.readAll());
        QVERIFY2(launcher.exitCode() == 130, qPrintable(out));
        const QStringList left = processesMentioning(home.path());
        QVERIFY2(left.isEmpty(), qPrintable(left.join("\n")));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QCOMPARE(runs->size(), size_t(1));
        QCOMPARE(runs->front().status, RunStatus::Cancelled);
    }

    // accelerate launch killed from outside (#43 point 10): the run failed with its signal, named
    // as what it is ("rank 1 (pid of accelerate launch) killed by SIGKILL" before), no rank blamed.
    void killedAccelerateLaunchIsNamedNotARank()
    {
        QTemporaryDir home;
        QProcess launcher;
        startEndlessRun(launcher, home, "killed");
        QTRY_VERIFY_WITH_TIMEOUT(stepEventsPerRank(home.filePath("runs/killed")).size() == 2, 120000);
        pid_t accelerate = 0;
        for (const QString& process : processesMentioning(home.path()))
            if (process.contains("accelerate_loopback.py"))
                accelerate = process.section(':', 0, 0).toInt();
        QVERIFY(accelerate > 0);
        QCOMPARE(kill(accelerate, SIGKILL), 0);
        QVERIFY(launcher.waitForFinished(60000));
        const QString out = QString::fromUtf8(launcher.readAll());
        QVERIFY2(launcher.exitCode() == 128 + SIGKILL, qPrintable(out));
        QVERIFY2(out.contains(QString("error: accelerate launch (pid %1) was killed by SIGKILL").arg(accelerate)),
                 qPrintable(out));
        QVERIFY2(!out.contains(QString("(pid %1)").arg(accelerate) + " killed"), qPrintable(out));
        const QStringList left = processesMentioning(home.path());
        QVERIFY2(left.isEmpty(), qPrintable(left.join("\n")));
        RunDetails details;
        readOnlyRun(home, RunStatus::Failed, details);
        if (QTest::currentTestFailed())
            return;
        QVERIFY(!details.rootCauseRank);
        QVERIFY2(QString::fromStdString(details.error).contains("accelerate launch"), details.error.c_str());
        QProcess show;
        show.setProcessEnvironment(environment(home));
        show.start(kShardscope, {"runs", "show", "killed"});
        QVERIFY(show.waitForFinished(30000));
        QVERIFY2(show.exitCode() == 0, show.readAllStandardError().constData());
    }

    void silentDegradationsAreRefused_data()
    {
        QTest::addColumn<QByteArray>("distributedType");
        QTest::addColumn<QString>("reason");
        QTest::newRow("MULTI_GPU with use_cpu") << QByteArray("MULTI_GPU") << "independent single-process runs";
        QTest::newRow("FSDP on the CPU") << QByteArray("FSDP\nfsdp_config:\n  fsdp_version: 2") << "unsharded, as MULTI_CPU";
        QTest::newRow("DeepSpeed on the CPU") << QByteArray("DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2") << "unsharded";
    }

    void silentDegradationsAreRefused()
    {
        QFETCH(QByteArray, distributedType);
        QFETCH(QString, reason);
        QTemporaryDir home;
        QString out;
        QCOMPARE(launch(home, {"--config_file", cpuConfig(home, distributedType), "--script", kAccelerateExample}, &out), 2);
        QVERIFY2(out.contains(reason), qPrintable(out));
        QVERIFY2(out.contains("set distributed_type: MULTI_CPU"), qPrintable(out)); // the fix
        QVERIFY(!QFileInfo::exists(home.filePath("runs"))); // refused before anything was made
    }

    void badInputsAreClearErrors()
    {
        QTemporaryDir home;
        QString out;
        QCOMPARE(launch(home, {"--config_file", cpuConfig(home), "--script", home.filePath("missing.py")}, &out), 2);
        QVERIFY2(out.contains("missing.py does not exist"), qPrintable(out));
        // A real Python that has no accelerate: the system one without its site-packages.
        const QString bare = home.filePath("bare-python");
        writeFile(bare, "#!/bin/sh\nexec python3 -I -S \"$@\"\n");
        QFile::setPermissions(bare, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        QCOMPARE(launch(home, {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--python", bare}, &out), 2);
        QVERIFY2(out.contains("cannot run `accelerate launch`") && out.contains("No module named"), qPrintable(out));
        QVERIFY2(out.contains("--python"), qPrintable(out));
        QCOMPARE(launch(home,
                        {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--python",
                         home.filePath("no-such-python")},
                        &out),
                 2);
        QVERIFY2(out.contains("is not an executable"), qPrintable(out));
        QCOMPARE(launch(home, {"--script", kAccelerateExample, "--recipe", "x.yaml"}, &out), 2);
        QVERIFY2(out.contains("give one"), qPrintable(out));
        // --max_steps is a recipe's: a script would ignore it silently.
        QCOMPARE(launch(home, {"--config_file", cpuConfig(home), "--script", kAccelerateExample, "--max_steps", "5"}, &out), 2);
        QVERIFY2(out.contains("pass it after --"), qPrintable(out));
        QVERIFY(!QFileInfo::exists(home.filePath("runs")));
    }

    // #45 point 3: the workbench started without an active environment (./scripts/run.sh, a
    // desktop) and a python3 without accelerate: Shardscope's own environment runs the script
    // (it failed, speaking of --python).
    void noActiveEnvironmentFallsBackToShardscopesOwn()
    {
        QTemporaryDir home;
        const QString bin = home.filePath("bin");
        QVERIFY(QDir().mkpath(bin));
        writeFile(bin + "/python3", "#!/bin/sh\nexec /usr/bin/python3 -I -S \"$@\"\n"); // no site-packages: no accelerate
        QFile::setPermissions(bin + "/python3", QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        auto env = environment(home);
        env.remove("VIRTUAL_ENV");
        env.insert("PATH", bin + ":" + env.value("PATH"));
        QProcess process;
        process.setProcessEnvironment(env);
        process.setProcessChannelMode(QProcess::MergedChannels);
        process.start(kShardscope, {"launch", "--config_file", cpuConfig(home), "--script", kAccelerateExample, "--run_name",
                                    "own", "--", "--steps", "3", "--data", dataFile(home)});
        QVERIFY(process.waitForFinished(240000));
        const QString out = QString::fromUtf8(process.readAll());
        QVERIFY2(process.exitCode() == 0, qPrintable(out));
        QVERIFY2(out.contains(QDir::cleanPath(kVenvPython) + " "), qPrintable(out)); // the command's interpreter
    }

    void trainerExampleReportsEveryRank()
    {
        QTemporaryDir home;
        QString out;
        const int code = launch(home,
                                {"--config_file", cpuConfig(home), "--script", kTrainerExample, "--run_name", "trainer", "--",
                                 "--max_steps", "4", "--eval_steps", "2", "--data", dataFile(home)},
                                &out);
        QVERIFY2(code == 0, qPrintable(out));
        auto store = RunStore::open(historyFile(home.path().toStdString()));
        QVERIFY(store.ok());
        auto runs = store->listRuns();
        QCOMPARE(runs->size(), size_t(1));
        QCOMPARE(runs->front().status, RunStatus::Completed);
        for (int rank : {0, 1}) {
            auto loss = store->series(runs->front().id, rank, "loss");
            QVERIFY(loss.ok());
            QCOMPARE(loss->size(), size_t(4));
        }
        auto evals = store->evals(runs->front().id);
        QVERIFY(evals.ok());
        std::map<int, std::set<std::int64_t>> evalSteps; // rank -> steps of its eval loss
        for (const auto& e : *evals)
            if (e.name == "loss")
                evalSteps[e.rank].insert(e.step);
        QCOMPARE(evalSteps[0], (std::set<std::int64_t>{2, 4}));
        QCOMPARE(evalSteps[1], (std::set<std::int64_t>{2, 4}));
    }
};

QTEST_MAIN(TestScriptLaunch) // a QApplication: the Trace page is a widget
#include "tst_script_launch.moc"
