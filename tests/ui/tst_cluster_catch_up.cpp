// The cluster catch-up: `shardscope runs --home HOME follow --all --json` for the history's home,
// its words and the followers it started read from its answer; a history that is not a Shardscope
// home's asks nothing; one at a time; a launcher that cannot start says nothing.

#include "tests/ui/fake_launcher.h"
#include "ui/cluster_catch_up.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::ClusterCatchUp;

class TestClusterCatchUp : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void aHomeAsksForEveryRunNobodyFollows()
    {
        FakeLauncher fake(m_dir.path(),
                          shardscope::testing::recordArguments()
                              + "echo '{\"started\": [{\"run\": \"run-7\", \"pid\": 42, \"log\": \"f.log\"}], "
                                "\"said\": \"shardscope runs follow: following run-7 in the background (pid 42; its "
                                "output in f.log)\\n\"}'\n");
        ClusterCatchUp catchUp(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString());
        QSignalSpy finished(&catchUp, &ClusterCatchUp::finished);
        catchUp.start();
        QVERIFY(catchUp.running());
        catchUp.start(); // one is on its way: nothing more
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.count(), 1);
        const QString said = finished.first().first().toString();
        QCOMPARE(said, QStringLiteral("shardscope runs follow: following run-7 in the background (pid 42; its output in f.log)"));
        QCOMPARE(finished.first().at(1).toInt(), 1);
        QCOMPARE(fake.arguments(), (QStringList{QStringLiteral("runs"), QStringLiteral("--home"), m_dir.path(),
                                                QStringLiteral("follow"), QStringLiteral("--all"), QStringLiteral("--json")}));
        QVERIFY(!catchUp.running());
    }

    void aTestsHistoryIsNoHome()
    {
        FakeLauncher fake(m_dir.path(), shardscope::testing::recordArguments(), QStringLiteral("never-asked"));
        ClusterCatchUp catchUp(m_dir.filePath(QStringLiteral("runs.sqlite")).toStdString());
        QSignalSpy finished(&catchUp, &ClusterCatchUp::finished);
        catchUp.start();
        QCOMPARE(finished.count(), 1); // at once
        QVERIFY(finished.first().first().toString().isEmpty());
        QVERIFY(!catchUp.running());
        QTest::qWait(200);
        QVERIFY(!QFile::exists(fake.argsFile()));
    }

    void noLauncherSaysNothing()
    {
        FakeLauncher fake(m_dir.path(), "exit 0\n");
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        ClusterCatchUp catchUp(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString());
        QSignalSpy finished(&catchUp, &ClusterCatchUp::finished);
        catchUp.start();
        QTRY_COMPARE(finished.count(), 1);
        QVERIFY(finished.first().first().toString().isEmpty());
    }

    void followersStarted_data()
    {
        QTest::addColumn<QByteArray>("answer");
        QTest::addColumn<int>("started");
        QTest::newRow("one") << QByteArray(R"({"started": [{"run": "a", "pid": 1, "log": "x"}], "said": "following a"})") << 1;
        QTest::newRow("none") << QByteArray(R"({"started": [], "said": "every cluster run is followed or has ended"})") << 0;
        QTest::newRow("not json") << QByteArray("following a in the background") << 0;
        QTest::newRow("empty") << QByteArray() << 0;
    }

    void followersStarted()
    {
        QFETCH(QByteArray, answer);
        QFETCH(int, started);
        QCOMPARE(ClusterCatchUp::startedIn(QJsonDocument::fromJson(answer)), started);
    }
};

QTEST_MAIN(TestClusterCatchUp)
#include "tst_cluster_catch_up.moc"
