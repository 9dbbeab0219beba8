// The cluster catch-up: `shardscope runs --home HOME follow --all` for the history's home, its
// words handed back as said (and read for the followers it started); a history that is not a
// Shardscope home's asks nothing; one at a time; a launcher that cannot start says nothing.

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
        FakeLauncher fake(m_dir.path(), shardscope::testing::recordArguments()
                                            + "echo 'shardscope runs follow: following run-7 in the background (pid 42; its "
                                              "output in f.log)'\n");
        ClusterCatchUp catchUp(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString());
        QSignalSpy finished(&catchUp, &ClusterCatchUp::finished);
        catchUp.start();
        QVERIFY(catchUp.running());
        catchUp.start(); // one is on its way: nothing more
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.count(), 1);
        const QString said = finished.first().first().toString();
        QCOMPARE(said, QStringLiteral("shardscope runs follow: following run-7 in the background (pid 42; its output in f.log)"));
        QVERIFY(ClusterCatchUp::startedFollowers(said));
        QCOMPARE(fake.arguments(), (QStringList{QStringLiteral("runs"), QStringLiteral("--home"), m_dir.path(),
                                                QStringLiteral("follow"), QStringLiteral("--all")}));
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
        QTest::addColumn<QString>("said");
        QTest::addColumn<bool>("started");
        QTest::newRow("one") << "shardscope runs follow: following a in the background (pid 1; its output in x)" << true;
        QTest::newRow("none") << "shardscope runs follow: every cluster run of c.ini's shared folders is followed or has ended"
                              << false;
        QTest::newRow("others") << "shardscope runs follow: 2 runs of other users left alone" << false;
        QTest::newRow("empty") << QString() << false;
    }

    void followersStarted()
    {
        QFETCH(QString, said);
        QFETCH(bool, started);
        QCOMPARE(ClusterCatchUp::startedFollowers(said), started);
    }
};

QTEST_MAIN(TestClusterCatchUp)
#include "tst_cluster_catch_up.moc"
