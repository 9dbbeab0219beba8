// A cluster run's submission record (app/cluster/submission): written whole, read back as it was
// written; what another machine's `runs follow DIR` must not trust (a missing or mistyped field, a
// job that is not SLURM's, a FIFO in its place) is an error naming the file and the key.

#include "app/cluster/submission.h"
#include "tests/common/files.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

using namespace shardscope;
using namespace shardscope::cluster;

class TestSubmission : public QObject {
    Q_OBJECT
private slots:
    void roundTrip()
    {
        QTemporaryDir dir;
        const Submission written{"llama-2n", "slurm:4711",     "gpu",   2,        8,    "FSDP",
                                 "bf16",     {"sweep", "a b"}, "alice", "login1", 1.7e9};
        QVERIFY(writeSubmission(dir.path().toStdString(), written));
        QVERIFY(!QFile::exists(dir.filePath("run.json.partial")));
        const auto read = readSubmission(dir.path().toStdString());
        QVERIFY2(read, read ? "" : read.error().message.c_str());
        QCOMPARE(read->name, written.name);
        QCOMPARE(read->job, written.job);
        QCOMPARE(read->profile, std::string("gpu"));
        QCOMPARE(read->numMachines, 2);
        QCOMPARE(read->numProcesses, 8);
        QCOMPARE(read->distributedType, std::string("FSDP"));
        QCOMPARE(read->mixedPrecision, std::string("bf16"));
        QCOMPARE(read->tags, written.tags);
        QCOMPARE(read->user, std::string("alice"));
        QCOMPARE(read->host, std::string("login1"));
        QCOMPARE(read->submittedAt, 1.7e9);
        QVERIFY(!currentUser().empty());
    }

    void refusesWhatASubmissionDoesNotWrite_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("said");
        const QByteArray good = R"("name": "r", "job": "slurm:12", "num_machines": 2, "num_processes": 4,
            "distributed_type": "MULTI_CPU", "mixed_precision": "no", "user": "u", "host": "h")";
        QTest::newRow("not an object") << QByteArray("[1, 2]") << "is not a JSON object";
        QTest::newRow("missing job") << QByteArray(R"({"name": "r"})") << "job is missing, not a string";
        QTest::newRow("nodes as text") << "{" + QByteArray(good).replace("\"num_machines\": 2", "\"num_machines\": \"2\"") + "}"
                                       << "num_machines is \"2\", not a count";
        QTest::newRow("no ranks") << "{" + QByteArray(good).replace("\"num_processes\": 4", "\"num_processes\": 0") + "}"
                                  << "num_processes is 0, not a count";
        QTest::newRow("another scheduler") << "{" + QByteArray(good).replace("slurm:12", "k8s:12") + "}"
                                           << "job is \"k8s:12\", not a SLURM job";
        QTest::newRow("job id not a number") << "{" + QByteArray(good).replace("slurm:12", "slurm:12;rm") + "}"
                                             << "not a SLURM job";
        QTest::newRow("tags as text") << "{" + good + R"(, "tags": "a")" + "}"
                                      << "tags is \"a\", not a list";
    }
    void refusesWhatASubmissionDoesNotWrite()
    {
        QFETCH(QByteArray, json);
        QFETCH(QString, said);
        QTemporaryDir dir;
        testing::writeFile(dir.filePath("run.json"), json);
        const auto read = readSubmission(dir.path().toStdString());
        QVERIFY(!read);
        QVERIFY2(QString::fromStdString(read.error().message).contains(said), read.error().message.c_str());
        QVERIFY2(read.error().message.find("run.json") != std::string::npos, read.error().message.c_str());
    }

    // No file: says what the folder is not; a FIFO in its place is refused, not read (it would block).
    void missingOrNotAFile()
    {
        QTemporaryDir dir;
        auto read = readSubmission(dir.path().toStdString());
        QVERIFY(!read);
        QVERIFY2(read.error().message.find("is not a cluster run's folder") != std::string::npos, read.error().message.c_str());
        QCOMPARE(::mkfifo(dir.filePath("run.json").toUtf8().constData(), 0600), 0);
        read = readSubmission(dir.path().toStdString());
        QVERIFY(!read);
        QVERIFY2(read.error().message.find("is not a regular file") != std::string::npos, read.error().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestSubmission)
#include "tst_submission.moc"
