// #44 point 3: `shardscope runs diagnose FOLDER` reads PyTorch's own Flight Recorder dumps (any
// run's) and gives the verdict torchfrtrace gives on the same files: the collective ranks wait in,
// the rank that never issued it, the rank that issued another kind or size under its number, and
// nothing for a healthy run. The dumps are torch's own bytes (tests/tools/flight_dumps_reference.py
// make: real Gloo ranks, _dump_fr_trace), and torchfrtrace is torch's (the same script's
// torchfrtrace command, with torch 2.14's Gloo group-name bug repaired in a copy).

#include "tests/common/python_tool.h"
#include "tests/common/recipe_run.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <set>

namespace {

std::set<int> ranksOf(const QJsonValue& list)
{
    std::set<int> ranks;
    for (const auto v : list.toArray())
        ranks.insert(v.toInt());
    return ranks;
}

} // namespace

class TestTorchFlightDumps : public QObject {
    Q_OBJECT

private slots:
    void diagnoseGivesTorchfrtracesVerdict_data()
    {
        QTest::addColumn<QString>("fault");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("odd"); // the rank that misbehaves
        QTest::newRow("healthy, 2 ranks") << "none" << 2 << 1;
        QTest::newRow("skipped all_reduce, 2 ranks") << "skip" << 2 << 1;
        QTest::newRow("skipped all_reduce, 4 ranks") << "skip" << 4 << 2;
        QTest::newRow("all_gather among all_reduces, 4 ranks") << "kind" << 4 << 2;
        QTest::newRow("all_reduce of another size, 4 ranks") << "size" << 4 << 3;
    }
    void diagnoseGivesTorchfrtracesVerdict()
    {
        QFETCH(QString, fault);
        QFETCH(int, ranks);
        QFETCH(int, odd);
        QTemporaryDir dir;
        const QString dumps = dir.filePath("dumps");
        QString why;
        shardscope::testing::runTool({shardscope::testing::toolsDir() + "flight_dumps_reference.py", "make", dumps, "--ranks",
                                      QString::number(ranks), "--fault", fault, "--rank", QString::number(odd)},
                                     why, 180000);
        QVERIFY2(why.isEmpty(), qPrintable(why));
        const QJsonObject theirs = QJsonDocument::fromJson(
                                       shardscope::testing::runTool(
                                           {shardscope::testing::toolsDir() + "flight_dumps_reference.py", "torchfrtrace", dumps},
                                           why))
                                       .object();
        QVERIFY2(why.isEmpty(), qPrintable(why));

        const auto run = shardscope::testing::runShardscope(dir.filePath("home"), {"runs", "diagnose", dumps, "--json"});
        QVERIFY2(run.exitCode == 0, qPrintable(run.output));
        const QJsonObject ours = QJsonDocument::fromJson(run.output.toUtf8()).object();
        QVERIFY2(!ours.isEmpty(), qPrintable(run.output));
        const QString both = "shardscope: " + run.output + "\ntorchfrtrace: " + theirs["text"].toString();

        QCOMPARE(ours["seq"].toInt(), theirs["seq"].toInt());
        if (fault == "none") {
            QCOMPARE(ours["seq"].toInt(), 0);
            QVERIFY2(ranksOf(ours["missing_ranks"]).empty() && ranksOf(ours["mismatched_ranks"]).empty(), qPrintable(both));
            return;
        }
        QCOMPARE(ours["seq"].toInt(), 4);
        QCOMPARE(ours["kind"].toString(), theirs["collective"].toString());
        if (fault == "skip") {
            QVERIFY2(ranksOf(ours["missing_ranks"]) == ranksOf(theirs["missing_ranks"]), qPrintable(both));
            QVERIFY2(ranksOf(ours["missing_ranks"]) == std::set<int>{odd}, qPrintable(both));
            // The last rank's dump gone (it died first): that rank is named, not left out of the
            // world (the dumps say how many ranks the default group has).
            const QString last = QStringLiteral("%1/torch_fr_rank%2").arg(dumps).arg(ranks - 1);
            QVERIFY(QFile::remove(last));
            const auto without = shardscope::testing::runShardscope(dir.filePath("home"), {"runs", "diagnose", dumps});
            QVERIFY2(without.exitCode == 0, qPrintable(without.output));
            QVERIFY2(without.output.contains(QStringLiteral("rank %1 left no dump").arg(ranks - 1)), qPrintable(without.output));
            return;
        }
        // A mismatch: torchfrtrace takes the first rank's issue as the expected one and names the
        // others; here the first rank is with the majority, so both name the odd rank.
        QCOMPARE(theirs["error_type"].toString(),
                 fault == "kind" ? QStringLiteral("COLLECTIVE_TYPE_MISMATCH") : QStringLiteral("SIZE_OR_SYNTAX_MISMATCH"));
        QVERIFY2(ranksOf(ours["mismatched_ranks"]) == ranksOf(theirs["culprit_ranks"]), qPrintable(both));
        QVERIFY2(ranksOf(ours["mismatched_ranks"]) == std::set<int>{odd}, qPrintable(both));
    }
};

QTEST_GUILESS_MAIN(TestTorchFlightDumps)
#include "tst_torch_flight_dumps.moc"
