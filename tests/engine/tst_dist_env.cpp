// DistEnv: reading torchrun's variables, and rejecting missing or malformed ones by name.

#include "engine/common/dist_env.h"

#include <QtTest>

#include <cstdlib>

using namespace shardscope;

class TestDistEnv : public QObject {
    Q_OBJECT
private slots:
    void init()
    {
        for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                                 "MASTER_PORT", "SHARDSCOPE_MASTER_LISTEN_FD"})
            qunsetenv(name); // Qt's environment lock: QtTest's watchdog thread reads the environment too
    }

    void roundTrip()
    {
        DistEnv env;
        env.rank = 3;
        env.localRank = 1;
        env.worldSize = 4;
        env.localWorldSize = 2;
        env.groupRank = 1;
        env.masterAddr = "127.0.0.2";
        env.masterPort = 12345;
        for (const auto& entry : env.toEnvironment()) {
            const auto eq = entry.find('=');
            qputenv(entry.substr(0, eq).c_str(), QByteArray::fromStdString(entry.substr(eq + 1)));
        }
        auto read = DistEnv::fromEnvironment();
        QVERIFY(read.ok());
        QCOMPARE(read->rank, 3);
        QCOMPARE(read->localRank, 1);
        QCOMPARE(read->worldSize, 4);
        QCOMPARE(read->localWorldSize, 2);
        QCOMPARE(read->groupRank, 1);
        QCOMPARE(read->masterAddr, std::string("127.0.0.2"));
        QCOMPARE(read->masterPort, 12345);
        QCOMPARE(read->masterListenFd, -1);
    }

    void errors_data()
    {
        QTest::addColumn<QString>("rank");
        QTest::addColumn<QString>("world");
        QTest::addColumn<QString>("port");
        QTest::addColumn<QString>("expected");
        QTest::newRow("no RANK") << ""
                                 << "2"
                                 << "1234"
                                 << "RANK is not set";
        QTest::newRow("RANK not a number") << "x1"
                                           << "2"
                                           << "1234"
                                           << "RANK='x1' is not an integer";
        QTest::newRow("RANK too large") << "2"
                                        << "2"
                                        << "1234"
                                        << "RANK=2 is not below WORLD_SIZE=2";
        QTest::newRow("WORLD_SIZE zero") << "0"
                                         << "0"
                                         << "1234"
                                         << "WORLD_SIZE=0 must be at least 1";
        QTest::newRow("port out of range") << "0"
                                           << "1"
                                           << "70000"
                                           << "MASTER_PORT=70000 is not a TCP port";
        QTest::newRow("no port") << "0"
                                 << "1"
                                 << ""
                                 << "MASTER_PORT is not set";
    }
    void errors()
    {
        QFETCH(QString, rank);
        QFETCH(QString, world);
        QFETCH(QString, port);
        QFETCH(QString, expected);
        auto set = [](const char* name, const QString& value) {
            if (!value.isEmpty())
                qputenv(name, value.toUtf8());
        };
        set("RANK", rank);
        set("WORLD_SIZE", world);
        set("MASTER_PORT", port);
        auto env = DistEnv::fromEnvironment();
        QVERIFY(!env.ok());
        QVERIFY2(env.error().message.find(expected.toStdString()) != std::string::npos, env.error().message.c_str());
    }
};

QTEST_APPLESS_MAIN(TestDistEnv)
#include "tst_dist_env.moc"
