// What the command line refuses before it does anything (#43 point 10): an output file that
// exists is never overwritten without being asked (`runs export -o`, `--dump-params`), and a
// number an option takes is a finite number, refused with a message a person can read (CLI11's
// own check let NaN through and printed a 309-digit bound).

#include "tests/common/files.h"
#include "tests/common/recipe_run.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

namespace testing = shardscope::testing;

namespace {

testing::CliRun runCli(const QTemporaryDir& home, const QStringList& args) { return testing::runShardscope(home.path(), args); }

} // namespace

class TestCliChecks : public QObject {
    Q_OBJECT
private slots:
    void numbersAreFiniteAndSaidPlainly_data()
    {
        QTest::addColumn<QString>("option");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("says");
        QTest::newRow("NaN threshold") << "--straggler_threshold"
                                       << "nan"
                                       << "'nan' is not a number above 0";
        QTest::newRow("negative threshold") << "--straggler_threshold"
                                            << "-1"
                                            << "'-1' is not a number above 0";
        QTest::newRow("infinite timeout") << "--heartbeat_timeout"
                                          << "inf"
                                          << "'inf' is not a number of 0 or more";
        QTest::newRow("negative steps") << "--max_steps"
                                        << "-2"
                                        << "'-2' is not a number above 0";
        QTest::newRow("negative window") << "--straggler_window"
                                         << "-1"
                                         << "'-1' is not a number of 0 or more";
        QTest::newRow("NaN rendezvous") << "--rendezvous_timeout"
                                        << "nan"
                                        << "'nan' is not a number above 0";
    }
    void numbersAreFiniteAndSaidPlainly()
    {
        QFETCH(QString, option);
        QFETCH(QString, value);
        QFETCH(QString, says);
        QTemporaryDir home;
        testing::writeFile(home.filePath(QStringLiteral("r.yaml")),
                           "name: r\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n");
        const auto ran = runCli(home, {"launch", "--recipe", home.filePath(QStringLiteral("r.yaml")), option, value});
        QVERIFY2(ran.exitCode != 0, qPrintable(ran.output));
        QVERIFY2(ran.output.contains(says), qPrintable(ran.output));
        QVERIFY2(ran.output.size() < 400, qPrintable(ran.output)); // no 309-digit bound
        QVERIFY(!QDir(home.filePath(QStringLiteral("runs"))).exists()); // nothing started
    }

    void existingFilesAreNotOverwritten()
    {
        QTemporaryDir home;
        // A run to export: imported from a folder of events (no engine needed).
        const QString dir = home.filePath(QStringLiteral("one"));
        QVERIFY(QDir().mkpath(dir + "/events"));
        testing::writeFile(dir + "/events/rank0.jsonl",
                           "{\"v\":1,\"type\":\"step\",\"rank\":0,\"time\":1,\"step\":1,\"loss\":0.5}\n"
                           "{\"v\":1,\"type\":\"done\",\"rank\":0,\"time\":2,\"status\":\"completed\",\"steps\":1,\"wall\":1}\n");
        QCOMPARE(runCli(home, {"runs", "import", dir}).exitCode, 0);
        const QString mine = home.filePath(QStringLiteral("mine.csv"));
        testing::writeFile(mine, "the user's own file\n");
        const auto refused = runCli(home, {"runs", "export", "one", "-o", mine});
        QVERIFY2(refused.exitCode != 0 && refused.output.contains(QStringLiteral("exists; give another -o, or --yes")),
                 qPrintable(refused.output));
        QCOMPARE(testing::readFile(mine), QByteArray("the user's own file\n"));
        QCOMPARE(runCli(home, {"runs", "export", "one", "-o", mine, "--yes"}).exitCode, 0);
        QVERIFY(testing::readFile(mine).contains("loss"));

        // --dump-params: a new file or nothing.
        testing::writeFile(home.filePath(QStringLiteral("r.yaml")),
                           "name: r\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\n");
        const auto dump = runCli(home,
                                 {"launch", "--recipe", home.filePath(QStringLiteral("r.yaml")), "--", "--dump-params", mine});
        QVERIFY2(dump.exitCode != 0 && dump.output.contains(QStringLiteral("exists; --dump-params writes a new file")),
                 qPrintable(dump.output));
        QVERIFY(testing::readFile(mine).contains("loss")); // untouched
    }
};

QTEST_GUILESS_MAIN(TestCliChecks)
#include "tst_cli_checks.moc"
