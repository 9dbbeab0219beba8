// Runs in the store: the status lifecycle and its forbidden transitions, interrupted-run marking
// (dead pid, recycled pid, another boot; a live launcher and another host's are left alone),
// listing with filters and sorts, resolving by id or name, deleting (rows and directory, never
// outside the runs folder), exports, comparison and the YAML key-path difference.

#include "storage/config_diff.h"
#include "storage/run_store.h"
#include "storage/run_writer.h"
#include "storage_test_util.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace shardscope::storage;
using namespace storage_test;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(std::vector<std::string>)

namespace {

struct Fixture {
    QTemporaryDir dir;
    fs::path db() const { return fs::path(dir.path().toStdString()) / "history.sqlite"; }
    fs::path runs() const { return fs::path(dir.path().toStdString()) / "runs"; }
    RunStore open(StoreOptions options = {}) const
    {
        auto store = RunStore::open(db(), options);
        if (!store)
            qFatal("%s", store.error().message.c_str());
        return std::move(*store);
    }
};

std::int64_t create(RunStore& store, const std::string& name, const std::string& type = "MULTI_CPU",
                    const std::string& precision = "no", std::vector<std::string> tags = {})
{
    NewRun run;
    run.name = name;
    run.distributedType = type;
    run.mixedPrecision = precision;
    run.tags = std::move(tags);
    auto id = store.createRun(run);
    if (!id)
        qFatal("%s", id.error().message.c_str());
    return *id;
}

RunStatus statusOf(const RunStore& store, std::int64_t id)
{
    auto details = store.run(id);
    if (!details)
        qFatal("%s", details.error().message.c_str());
    return details->summary.status;
}

// A pid that certainly belongs to no process: a child that has exited and been reaped.
pid_t deadPid()
{
    const pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
    return child;
}

std::vector<std::string> names(const std::vector<RunSummary>& runs)
{
    std::vector<std::string> out;
    for (const auto& r : runs)
        out.push_back(r.name);
    return out;
}

} // namespace

class TestStorageRuns : public QObject {
    Q_OBJECT
private slots:
    void lifecycle_data()
    {
        QTest::addColumn<QStringList>("steps"); // what to do, in order; the last one is checked
        QTest::addColumn<bool>("lastSucceeds");
        QTest::addColumn<QString>("finalStatus");
        QTest::newRow("pending -> running") << QStringList{"start"} << true << "running";
        QTest::newRow("running -> completed") << QStringList{"start", "completed"} << true << "completed";
        QTest::newRow("running -> failed") << QStringList{"start", "failed"} << true << "failed";
        QTest::newRow("running -> cancelled") << QStringList{"start", "cancelled"} << true << "cancelled";
        QTest::newRow("pending -> failed (never started)") << QStringList{"failed"} << true << "failed";
        QTest::newRow("pending -> cancelled") << QStringList{"cancelled"} << true << "cancelled";
        QTest::newRow("running -> running refused") << QStringList{"start", "start"} << false << "running";
        QTest::newRow("completed -> running refused") << QStringList{"start", "completed", "start"} << false << "completed";
        QTest::newRow("completed -> failed refused") << QStringList{"start", "completed", "failed"} << false << "completed";
        QTest::newRow("ending as interrupted refused") << QStringList{"start", "interrupted"} << false << "running";
        QTest::newRow("ending as pending refused") << QStringList{"start", "pending"} << false << "running";
    }

    void lifecycle()
    {
        QFETCH(QStringList, steps);
        QFETCH(bool, lastSucceeds);
        QFETCH(QString, finalStatus);
        Fixture f;
        auto store = f.open();
        const auto id = create(store, "run");
        QCOMPARE(statusOf(store, id), RunStatus::Pending);
        bool ok = true;
        std::string message;
        for (const auto& step : steps) {
            shardscope::Result<void> rc;
            if (step == "start") {
                rc = store.markRunning(id);
            } else {
                RunEnd end;
                end.status = *parseRunStatus(step.toStdString());
                end.exitCode = 3;
                rc = store.finishRun(id, end);
            }
            ok = rc.ok();
            message = ok ? "" : rc.error().message;
        }
        QCOMPARE(ok, lastSucceeds);
        if (!ok)
            QVERIFY2(message.find("run " + std::to_string(id)) != std::string::npos
                         || message.find("completed, failed or cancelled") != std::string::npos,
                     message.c_str());
        QCOMPARE(QString::fromStdString(std::string(statusName(statusOf(store, id)))), finalStatus);
    }

    void finishRecordsExitCodesAndRootCause()
    {
        Fixture f;
        auto store = f.open();
        const auto id = create(store, "run");
        SS_VERIFY_OK(store.markRunning(id));
        RunEnd end;
        end.status = RunStatus::Failed;
        end.exitCode = 137;
        end.rootCauseRank = 1;
        end.error = "rank 1 was killed by SIGKILL";
        end.rankExitCodes = {{0, -15}, {1, 137}};
        SS_VERIFY_OK(store.finishRun(id, end));
        auto details = store.run(id);
        SS_VERIFY_OK(details);
        QCOMPARE(*details->exitCode, 137);
        QCOMPARE(*details->rootCauseRank, 1);
        QCOMPARE(details->error, end.error);
        QCOMPARE(int(details->ranks.size()), 2);
        QCOMPARE(*details->ranks[1].exitCode, 137);
        QVERIFY(details->summary.endedAt && details->summary.startedAt);
    }

    void markInterrupted_data()
    {
        QTest::addColumn<QString>("launcher");
        QTest::addColumn<bool>("startRunning");
        QTest::addColumn<QString>("expected");
        QTest::newRow("dead pid, running") << "dead" << true << "interrupted";
        QTest::newRow("dead pid, pending") << "dead" << false << "interrupted";
        QTest::newRow("recycled pid (other start time)") << "recycled" << true << "interrupted";
        QTest::newRow("other boot") << "otherBoot" << true << "interrupted";
        QTest::newRow("alive (this process)") << "self" << true << "running";
        QTest::newRow("other host: cannot tell") << "otherHost" << true << "running";
    }

    void markInterrupted()
    {
        QFETCH(QString, launcher);
        QFETCH(bool, startRunning);
        QFETCH(QString, expected);
        Fixture f;
        std::int64_t id = 0;
        {
            auto store = f.open();
            NewRun run;
            run.name = "run";
            LauncherIdentity identity = LauncherIdentity::current();
            QVERIFY(identity.startTicks > 0);
            QVERIFY(!identity.bootId.empty());
            if (launcher == "dead")
                identity.pid = deadPid();
            else if (launcher == "recycled")
                identity.startTicks -= 1;
            else if (launcher == "otherBoot")
                identity.bootId = "00000000-0000-0000-0000-000000000000";
            else if (launcher == "otherHost")
                identity.host = "some-other-machine";
            run.launcher = identity;
            auto created = store.createRun(run);
            SS_VERIFY_OK(created);
            id = *created;
            if (startRunning)
                SS_VERIFY_OK(store.markRunning(id));
            // Finished runs are never touched, whatever their launcher.
            NewRun done = run;
            done.name = "done";
            auto doneId = store.createRun(done);
            SS_VERIFY_OK(doneId);
            SS_VERIFY_OK(store.finishRun(*doneId, {}));
        }
        auto reopened = f.open(); // marking happens on open
        QCOMPARE(QString::fromStdString(std::string(statusName(statusOf(reopened, id)))), expected);
        if (expected == "interrupted") {
            auto details = reopened.run(id);
            QVERIFY(details->error.find("launcher") != std::string::npos);
            QVERIFY(details->summary.endedAt.has_value());
        }
        auto all = reopened.listRuns();
        QCOMPARE(all->front().name, std::string("done"));
        QCOMPARE(all->front().status, RunStatus::Completed);
    }

    void listFilters_data()
    {
        QTest::addColumn<QString>("filter");
        QTest::addColumn<std::vector<std::string>>("expected"); // in order
        QTest::newRow("all, newest first") << "" << std::vector<std::string>{"e", "d", "c", "b", "a"};
        QTest::newRow("status failed") << "status=failed" << std::vector<std::string>{"d", "b"};
        QTest::newRow("status completed or running") << "status=completed,running" << std::vector<std::string>{"e", "c", "a"};
        QTest::newRow("type fsdp (any case)") << "type=fsdp" << std::vector<std::string>{"d", "c"};
        QTest::newRow("precision bf16") << "precision=bf16" << std::vector<std::string>{"e", "c"};
        QTest::newRow("tag sweep") << "tag=sweep" << std::vector<std::string>{"d", "b"};
        QTest::newRow("text in name") << "text=lr" << std::vector<std::string>{"e"};
        QTest::newRow("text in notes") << "text=diverged" << std::vector<std::string>{"b"};
        QTest::newRow("text in a tag") << "text=swe" << std::vector<std::string>{"d", "b"};
        QTest::newRow("text % is literal") << "text=100%" << std::vector<std::string>{"a"};
        QTest::newRow("text _ is literal") << "text=x_y" << std::vector<std::string>{};
        QTest::newRow("quote in text is data") << "text=' OR 1=1 --" << std::vector<std::string>{};
        QTest::newRow("combined") << "status=failed;type=FSDP" << std::vector<std::string>{"d"};
        QTest::newRow("sort name asc") << "sort=name;asc" << std::vector<std::string>{"a", "b", "c", "d", "e"};
        QTest::newRow("sort steps desc") << "sort=steps" << std::vector<std::string>{"c", "a", "b", "e", "d"};
        QTest::newRow("sort loss asc (no loss last)") << "sort=loss;asc" << std::vector<std::string>{"a", "c", "b", "d", "e"};
        QTest::newRow("limit and offset") << "limit=2;offset=1" << std::vector<std::string>{"d", "c"};
    }

    void listFilters()
    {
        QFETCH(QString, filter);
        QFETCH(std::vector<std::string>, expected);
        Fixture f;
        {
            auto store = f.open();
            // a: completed, steps 50, loss 0.5; b: failed, steps 10, loss 2; c: completed, steps 90, loss 1;
            // d: failed, no steps; e: running, steps 5, no loss.
            const auto a = create(store, "a  100% done", "MULTI_CPU", "no");
            const auto b = create(store, "b", "MULTI_GPU", "fp16", {"sweep"});
            const auto c = create(store, "c", "FSDP", "bf16");
            const auto d = create(store, "d", "FSDP", "fp16", {"sweep", "x"});
            const auto e = create(store, "e lr=3e-4", "DEEPSPEED", "bf16");
            SS_VERIFY_OK(store.setNotes(b, "loss diverged at step 10"));
            struct Progress {
                std::int64_t id;
                std::int64_t steps;
                double loss;
            };
            for (auto [id, steps, loss] :
                 {Progress{a, 50, 0.5}, Progress{b, 10, 2.0}, Progress{c, 90, 1.0}, Progress{e, 5, std::nan("")}}) {
                SS_VERIFY_OK(store.markRunning(id));
                auto writer = RunWriter::open(f.db(), id);
                SS_VERIFY_OK(writer);
                if (std::isnan(loss))
                    (*writer)->addMetrics(0, steps, 0, {{"lr", 0.1}});
                else
                    (*writer)->addMetrics(0, steps, 0, {{"loss", loss}});
                SS_VERIFY_OK((*writer)->flush());
            }
            SS_VERIFY_OK(store.finishRun(a, {}));
            SS_VERIFY_OK(store.finishRun(b, {RunStatus::Failed, 1, 0, "boom", {}}));
            SS_VERIFY_OK(store.finishRun(c, {}));
            SS_VERIFY_OK(store.finishRun(d, {RunStatus::Failed, 1, 0, "boom", {}}));
            // Same-second creation: make created_at distinct so "newest first" is defined.
            for (auto [id, t] : {std::pair{a, 1.0}, {b, 2.0}, {c, 3.0}, {d, 4.0}, {e, 5.0}}) {
                auto stmt = store.database().prepare("UPDATE runs SET created_at = ? WHERE id = ?");
                stmt->bind(1, t).bind(2, id);
                SS_VERIFY_OK(stmt->run());
            }
        }
        auto store = f.open();
        RunFilter rf;
        for (const auto& part : filter.split(';', Qt::SkipEmptyParts)) {
            const auto key = part.section('=', 0, 0);
            const auto value = part.section('=', 1).toStdString();
            if (key == "status") {
                for (const auto& s : QString::fromStdString(value).split(','))
                    rf.statuses.push_back(*parseRunStatus(s.toStdString()));
            } else if (key == "type") {
                rf.distributedType = value;
            } else if (key == "precision") {
                rf.mixedPrecision = value;
            } else if (key == "tag") {
                rf.tag = value;
            } else if (key == "text") {
                rf.text = value;
            } else if (key == "sort") {
                rf.sort = value == "name" ? RunSort::Name : value == "steps" ? RunSort::Steps : RunSort::Loss;
            } else if (key == "asc") {
                rf.descending = false;
            } else if (key == "limit") {
                rf.limit = std::stoll(value);
            } else if (key == "offset") {
                rf.offset = std::stoll(value);
            }
        }
        auto runs = store.listRuns(rf);
        SS_VERIFY_OK(runs);
        std::vector<std::string> got;
        for (const auto& name : names(*runs))
            got.push_back(name.substr(0, 1));
        QCOMPARE(got, expected);
        QCOMPARE(queryInt(store.database(), "SELECT count(*) FROM runs"), std::int64_t(5)); // nothing dropped
    }

    void listShowsLiveSummary()
    {
        Fixture f;
        auto store = f.open();
        const auto id = create(store, "live", "MULTI_CPU", "no", {"t1", "t2"});
        SS_VERIFY_OK(store.markRunning(id));
        auto writer = RunWriter::open(f.db(), id);
        SS_VERIFY_OK(writer);
        for (int step = 0; step < 10; ++step)
            (*writer)->addMetrics(0, step, step, {{"loss", 10.0 - step}, {"lr", 0.1}});
        SS_VERIFY_OK((*writer)->flush());
        auto runs = store.listRuns();
        SS_VERIFY_OK(runs);
        QCOMPARE(*runs->front().lastStep, std::int64_t(9));
        QCOMPARE(*runs->front().lastLoss, 1.0);
        QCOMPARE(runs->front().tags, (std::vector<std::string>{"t1", "t2"}));
    }

    // The colour a user picks is kept with the run, read back by every list, and can be reset.
    void runColorIsStoredAndChecked()
    {
        Fixture f;
        auto store = f.open();
        const auto id = create(store, "coloured");
        auto colorOf = [&] {
            auto runs = store.listRuns();
            return runs ? runs->front().color : std::string("(list failed)");
        };
        QCOMPARE(colorOf(), std::string());
        SS_VERIFY_OK(store.setRunColor(id, "#A0B1C2"));
        QCOMPARE(colorOf(), std::string("#a0b1c2"));
        QCOMPARE(store.run(id)->summary.color, std::string("#a0b1c2"));
        for (const char* bad : {"red", "#12345", "#1234567", "#12345g", "a0b1c2#"}) {
            auto rc = store.setRunColor(id, bad);
            QVERIFY2(!rc.ok(), bad);
            QVERIFY2(rc.error().message.find("#rrggbb") != std::string::npos, rc.error().message.c_str());
        }
        QCOMPARE(colorOf(), std::string("#a0b1c2")); // a refused colour changes nothing
        QVERIFY(!store.setRunColor(id + 1, "#000000").ok()); // no such run
        SS_VERIFY_OK(store.setRunColor(id, ""));
        QCOMPARE(colorOf(), std::string());
    }

    void resolveRun_data()
    {
        QTest::addColumn<QString>("reference");
        QTest::addColumn<int>("expectedId"); // 0: an error
        QTest::addColumn<QString>("errorPart");
        QTest::newRow("id") << "2" << 2 << "";
        QTest::newRow("unique name") << "solo" << 1 << "";
        QTest::newRow("ambiguous name") << "twin" << 0 << "ids 2, 3";
        QTest::newRow("missing name") << "nope" << 0 << "runs list";
        QTest::newRow("missing id") << "42" << 0 << "no run 42";
    }

    void resolveRun()
    {
        QFETCH(QString, reference);
        QFETCH(int, expectedId);
        QFETCH(QString, errorPart);
        Fixture f;
        auto store = f.open();
        create(store, "solo");
        create(store, "twin");
        create(store, "twin");
        auto id = store.resolveRun(reference.toStdString());
        if (expectedId) {
            SS_VERIFY_OK(id);
            QCOMPARE(*id, std::int64_t(expectedId));
        } else {
            QVERIFY(!id.ok());
            QVERIFY2(id.error().message.find(errorPart.toStdString()) != std::string::npos, id.error().message.c_str());
        }
    }

    void deleteRemovesRowsAndDirectory()
    {
        Fixture f;
        auto store = f.open();
        const fs::path runDir = f.runs() / "7";
        fs::create_directories(runDir / "logs");
        std::ofstream(runDir / "logs" / "rank0.log") << "hello\n";
        NewRun run;
        run.name = "doomed";
        run.runDir = runDir.string();
        run.tags = {"x"};
        const auto id = *store.createRun(run);
        const auto keep = create(store, "keeper");
        for (auto r : {id, keep}) {
            SS_VERIFY_OK(store.markRunning(r));
            auto writer = RunWriter::open(f.db(), r);
            (*writer)->addRank({0, 1, "h", "cpu", "2", 0, 0});
            for (int step = 0; step < 100; ++step)
                (*writer)->addMetrics(0, step, step, {{"loss", 1.0}, {"lr", 0.5}});
            (*writer)->addEval({0, 10, 1, "loss", 0.5});
            (*writer)->addCheckpoint({0, 10, 1, "p", "state", 10});
            (*writer)->addTrace({0, 1, "t", "host", 1, 1, 1, 1, 0.5});
            SS_VERIFY_OK((*writer)->finish({}));
        }
        auto listed = store.listRuns();
        SS_VERIFY_OK(listed);
        for (const auto& r : *listed)
            QCOMPARE(r.traceCount, 1); // what Runs shows as "1 file(s)"
        SS_VERIFY_OK(store.deleteRun(id));
        QVERIFY(!fs::exists(runDir));
        QVERIFY(fs::exists(f.runs()));
        for (const char* table : {"metrics", "metric_blocks", "evals", "traces", "checkpoints", "run_ranks", "run_tags"}) {
            const std::string sql = std::string("SELECT count(*) FROM ") + table + " WHERE run_id = " + std::to_string(id);
            QCOMPARE(queryInt(store.database(), sql), std::int64_t(0));
            const std::string kept = std::string("SELECT count(*) > 0 FROM ") + table + " WHERE run_id = " + std::to_string(keep);
            QVERIFY2(queryInt(store.database(), kept) == 1 || std::string(table) == "run_tags", table);
        }
        QVERIFY(!store.run(id).ok());
        QCOMPARE(queryInt(store.database(), "SELECT count(*) FROM pragma_foreign_key_check"), std::int64_t(0));
    }

    void deleteRefusesOutsideRunsFolder_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::newRow("dot-dot escape") << "dotdot";
        QTest::newRow("absolute elsewhere") << "elsewhere";
        QTest::newRow("symlink inside pointing out") << "symlink";
        QTest::newRow("the runs folder itself") << "root";
    }

    void deleteRefusesOutsideRunsFolder()
    {
        QFETCH(QString, kind);
        Fixture f;
        auto store = f.open();
        const fs::path base = f.dir.path().toStdString();
        const fs::path victim = base / "precious";
        fs::create_directories(victim);
        std::ofstream(victim / "data") << "keep me\n";
        fs::create_directories(f.runs());
        fs::path runDir;
        if (kind == "dotdot") {
            runDir = f.runs() / ".." / "precious";
        } else if (kind == "elsewhere") {
            runDir = victim;
        } else if (kind == "symlink") {
            runDir = f.runs() / "5";
            fs::create_directory_symlink(victim, runDir);
        } else {
            runDir = f.runs();
            std::ofstream(f.runs() / "other-run-file") << "x\n";
        }
        NewRun run;
        run.name = "evil";
        run.runDir = runDir.string();
        const auto id = *store.createRun(run);
        SS_VERIFY_OK(store.finishRun(id, {}));
        auto rc = store.deleteRun(id);
        QVERIFY(!rc.ok());
        QVERIFY2(rc.error().message.find("not inside the runs folder") != std::string::npos, rc.error().message.c_str());
        QVERIFY(fs::exists(victim / "data"));
        QVERIFY(store.run(id).ok()); // a refused delete changes nothing
        if (kind == "root")
            QVERIFY(fs::exists(f.runs() / "other-run-file"));
        // --keep-files deletes the rows and leaves every file alone.
        SS_VERIFY_OK(store.deleteRun(id, false));
        QVERIFY(!store.run(id).ok());
        QVERIFY(fs::exists(victim / "data"));
    }

    // Run directories stored relative to the Shardscope home (as the v1 fixture has them).
    void deleteResolvesRelativeDirectoryAgainstHome()
    {
        Fixture f;
        auto store = f.open();
        fs::create_directories(f.runs() / "9");
        NewRun run;
        run.name = "relative";
        run.runDir = "runs/9";
        const auto id = *store.createRun(run);
        SS_VERIFY_OK(store.finishRun(id, {}));
        SS_VERIFY_OK(store.deleteRun(id));
        QVERIFY(!fs::exists(f.runs() / "9"));
        QVERIFY(fs::exists(f.runs()));
    }

    void deleteRefusesActiveRun()
    {
        Fixture f;
        auto store = f.open();
        const auto id = create(store, "busy");
        SS_VERIFY_OK(store.markRunning(id));
        auto rc = store.deleteRun(id);
        QVERIFY(!rc.ok());
        QVERIFY(rc.error().message.find("stop it first") != std::string::npos);
        QVERIFY(store.run(id).ok());
    }

    void exportCsvAndJson()
    {
        Fixture f;
        auto store = f.open();
        NewRun run;
        run.name = "exp \"quoted\"";
        run.configText = "distributed_type: MULTI_CPU\n";
        run.tags = {"a"};
        const auto id = *store.createRun(run);
        SS_VERIFY_OK(store.markRunning(id));
        {
            auto writer = RunWriter::open(f.db(), id);
            (*writer)->addRank({0, 11, "h0", "cpu", "2.5", 0, 0});
            (*writer)->addRank({1, 12, "h0", "cpu", "2.5", 1, 0});
            (*writer)->addMetrics(0, 1, 100.5, {{"loss", 2.5}, {"lr", 0.001}});
            (*writer)->addMetrics(1, 1, 100.5, {{"loss", 2.5}});
            (*writer)->addMetrics(0, 2, 101.25, {{"loss", std::nan("")}, {"lr", 0.002}});
            (*writer)->addEval({0, 2, 101.5, "accuracy", 0.75});
            SS_VERIFY_OK((*writer)->finish({}));
        }
        std::ostringstream csv;
        SS_VERIFY_OK(store.exportCsv(id, csv));
        const std::string r = std::to_string(id);
        QCOMPARE(csv.str(), "run_id,rank,step,time,key,value\n" + r + ",0,1,100.5,loss,2.5\n" + r + ",0,2,101.25,loss,nan\n" + r
                                + ",1,1,100.5,loss,2.5\n" + r + ",0,1,100.5,lr,0.001\n" + r + ",0,2,101.25,lr,0.002\n");

        std::ostringstream json;
        SS_VERIFY_OK(store.exportJson(id, json));
        QJsonParseError error;
        const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(json.str()), &error);
        QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
        const auto root = doc.object();
        QCOMPARE(root["run"].toObject()["name"].toString(), QString("exp \"quoted\""));
        QCOMPARE(root["run"].toObject()["status"].toString(), QString("completed"));
        QCOMPARE(root["run"].toObject()["config"].toString(), QString("distributed_type: MULTI_CPU\n"));
        QCOMPARE(root["ranks"].toArray().size(), 2);
        const auto metrics = root["metrics"].toArray();
        QCOMPARE(metrics.size(), 3); // loss rank 0, loss rank 1, lr rank 0
        const auto loss0 = metrics[0].toObject();
        QCOMPARE(loss0["key"].toString(), QString("loss"));
        QCOMPARE(loss0["step"].toArray().size(), 2);
        QCOMPARE(loss0["value"].toArray()[0].toDouble(), 2.5);
        QCOMPARE(loss0["value"].toArray()[1].toString(), QStringLiteral("NaN")); // #43 point 4: kept as what it is
        QCOMPARE(root["evals"].toArray()[0].toObject()["value"].toDouble(), 0.75);
        QCOMPARE(root["tags"].toArray()[0].toString(), QString("a"));
    }

    void compareRuns()
    {
        Fixture f;
        auto store = f.open();
        const char* configA = "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: bf16\n"
                              "fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_offload_params: false\n";
        const char* configB = "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: fp16\n"
                              "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: false\n"
                              "num_processes: 2\n";
        std::int64_t ids[2];
        for (int i = 0; i < 2; ++i) {
            NewRun run;
            run.name = i ? "fp16" : "bf16";
            run.configText = i ? configB : configA;
            run.recipeText = "optimizer:\n  lr: 0.001\n";
            ids[i] = *store.createRun(run);
            SS_VERIFY_OK(store.markRunning(ids[i]));
            auto writer = RunWriter::open(f.db(), ids[i]);
            for (int step = 0; step < 100; ++step) {
                for (int rank = 0; rank < 2; ++rank) {
                    const double loss = step == 50 ? 0.1 : 3.0 - step * 0.01 - i;
                    (*writer)->addMetrics(rank, step, step,
                                          {{"loss", loss},
                                           {"tokens_per_s", 1000.0 + i * 500 + (step % 2 ? 100 : -100)},
                                           {"skipped", (i == 1 && step % 10 == 0) ? 1.0 : 0.0},
                                           {"mem.rss", 1000.0 * (rank + 1) + step},
                                           {"mem.peak_allocated", i == 1 ? 5e9 * (rank + 1) : 0.0}});
                }
            }
            SS_VERIFY_OK((*writer)->finish({}));
        }
        auto comparison = store.compareRuns({ids[0], ids[1]});
        SS_VERIFY_OK(comparison);
        const auto& a = comparison->runs[0];
        const auto& b = comparison->runs[1];
        QCOMPARE(*a.steps, std::int64_t(99));
        QCOMPARE(*a.finalLoss, 3.0 - 99 * 0.01);
        QCOMPARE(*b.finalLoss, 3.0 - 99 * 0.01 - 1);
        QCOMPARE(*a.bestLoss, 0.1);
        QCOMPARE(*a.meanTokensPerS, 1000.0);
        QCOMPARE(*b.meanTokensPerS, 1500.0);
        QCOMPARE(a.skippedSteps, std::int64_t(0));
        QCOMPARE(b.skippedSteps, std::int64_t(10));
        // CPU run: peak = RSS; GPU-like run: the allocator's peak wins over RSS.
        QCOMPARE(a.peakMemory, (std::vector<std::pair<int, double>>{{0, 1099.0}, {1, 2099.0}}));
        QCOMPARE(b.peakMemory, (std::vector<std::pair<int, double>>{{0, 5e9}, {1, 1e10}}));

        std::vector<std::string> paths;
        for (const auto& d : comparison->differences)
            paths.push_back(d.file + ":" + d.keyPath);
        QCOMPARE(paths, (std::vector<std::string>{"config:mixed_precision", "config:fsdp_config.fsdp_sharding_strategy",
                                                  "config:num_processes"}));
        QCOMPARE(*comparison->differences[1].values[1], std::string("SHARD_GRAD_OP"));
        QVERIFY(!comparison->differences[2].values[0].has_value());

        QVERIFY(!store.compareRuns({ids[0]}).ok());
        QVERIFY(!store.compareRuns({ids[0], 999}).ok());
    }

    void flattenYaml_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QString>("expected"); // "path=value" lines
        QTest::newRow("scalars and nesting") << "a: 1\nb:\n  c: x\n  d:\n    e: 'quoted # not a comment'\nf: \"two words\"\n"
                                             << "a=1\nb.c=x\nb.d.e=quoted # not a comment\nf=two words\n";
        QTest::newRow("comments and documents") << "---\n# header\na: 1 # trailing\n\nb: 2\n...\n"
                                                << "a=1\nb=2\n";
        QTest::newRow("empty mapping and flow values") << "deepspeed_config: {}\ngpu_ids: all\nx: [1, 2]\nempty:\n"
                                                       << "deepspeed_config={}\ngpu_ids=all\nx=[1, 2]\nempty=\n";
        QTest::newRow("sequences") << "list:\n  - a\n  - b\nsame:\n- c\nitems:\n  - name: n1\n    v: 1\n  - name: n2\n"
                                   << "list[0]=a\nlist[1]=b\nsame[0]=c\nitems[0].name=n1\nitems[0].v=1\nitems[1].name=n2\n";
        QTest::newRow("block scalar") << "text: |\n  line one\n  line: two\nnext: 1\n"
                                      << "text=line one\nline: two\nnext=1\n";
        QTest::newRow("url value keeps its colon") << "url: http://host:80/x\n"
                                                   << "url=http://host:80/x\n";
    }

    void flattenYaml()
    {
        QFETCH(QString, yaml);
        QFETCH(QString, expected);
        std::string got;
        for (const auto& [path, value] : shardscope::storage::flattenYaml(yaml.toStdString()))
            got += path + "=" + value + "\n";
        QCOMPARE(QString::fromStdString(got), expected);
    }

    // Values that look like SQL are stored and found as data.
    void hostileTextIsData()
    {
        Fixture f;
        auto store = f.open();
        const std::string evil = "x'); DROP TABLE runs; --";
        const auto id = create(store, evil, evil, evil, {evil});
        SS_VERIFY_OK(store.setNotes(id, evil));
        RunFilter filter;
        filter.text = evil;
        filter.tag = evil;
        filter.distributedType = evil;
        auto runs = store.listRuns(filter);
        SS_VERIFY_OK(runs);
        QCOMPARE(int(runs->size()), 1);
        QCOMPARE(runs->front().name, evil);
        QCOMPARE(*store.resolveRun(evil), id);
    }
};

QTEST_APPLESS_MAIN(TestStorageRuns)
#include "tst_storage_runs.moc"
