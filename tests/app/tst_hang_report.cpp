// #22 hang diagnosis: what the flight records of a run's ranks say, on records made by hand: the
// collective ranks wait in, the rank that never entered it, a rank that issued something else
// under the same number, a rank that did not answer, and a run where nothing waits.

#include "app/launcher/hang_report.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <thread>

using namespace shardscope;
using protocol::CollectiveRecord;
using protocol::FlightRecord;

namespace {

constexpr std::chrono::milliseconds kPatience{2000};

// `rank` issued default_pg's collectives 1..issued (all_reduce of 4 KiB float32), completed all
// but those from `pendingFrom` on.
FlightRecord record(int rank, std::int64_t issued, std::int64_t pendingFrom, const char* phase = "backward")
{
    FlightRecord r;
    r.rank = rank;
    r.request = 7;
    r.time = 1000;
    r.step = 3;
    r.phase = phase;
    r.issued["default_pg"] = issued;
    for (std::int64_t seq = 1; seq <= issued; ++seq) {
        CollectiveRecord c{"default_pg", seq, "all_reduce", 4096, "float32", 3, "backward", 900.0 + static_cast<double>(seq), {}};
        if (seq < pendingFrom)
            c.completedAt = 901.0 + static_cast<double>(seq);
        r.collectives.push_back(c);
    }
    return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

} // namespace

class TestHangReport : public QObject {
    Q_OBJECT
private slots:
    void rankThatNeverEnteredIsNamed_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::newRow("2 ranks") << 2;
        QTest::newRow("4 ranks") << 4;
    }
    void rankThatNeverEnteredIsNamed()
    {
        QFETCH(int, ranks);
        const int skipper = 1;
        std::vector<std::optional<FlightRecord>> records;
        // The others issued #41 and #42 (asynchronous buckets) and wait in #41; the skipper
        // stopped after #40, which completed everywhere.
        for (int rank = 0; rank < ranks; ++rank)
            records.push_back(rank == skipper ? record(rank, 40, 41, "forward") : record(rank, 42, 41));
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.seq, std::int64_t(41));
        QCOMPARE(report.kind, std::string("all_reduce"));
        QCOMPARE(report.group, std::string("default_pg"));
        QCOMPARE(report.missingRanks, std::vector<int>{skipper});
        QCOMPARE(int(report.waitingRanks.size()), ranks - 1);
        QVERIFY(report.silentRanks.empty());
        QVERIFY2(has(report.text, "rank 1 never entered it: the last collective it issued in default_pg is #40"),
                 report.text.c_str());
        // Steps as the ranks run them: 3 done and in a backward or forward is step 4 (#43 point 10:
        // "after step 3" read as one step behind).
        QVERIFY2(has(report.text, "in all_reduce #41 of default_pg (4.00 KiB float32), issued in step 4's backward"),
                 report.text.c_str());
        QVERIFY2(has(report.text, "rank 1: last completed all_reduce #40 of default_pg (issued in step 4's backward); "
                                  "now in step 4's forward, in no collective"),
                 report.text.c_str());
        QVERIFY2(has(report.text, "rank 0: last completed all_reduce #40"), report.text.c_str());
        QVERIFY2(has(report.text, "waiting in all_reduce #41 of default_pg for 59.0 s"), report.text.c_str());
    }

    void positionIsTheStepBeingRun()
    {
        QCOMPARE(rankPosition(19, "forward"), std::string("step 20's forward"));
        QCOMPARE(rankPosition(0, "data"), std::string("step 1's data"));
        QCOMPARE(rankPosition(19, "checkpoint"), std::string("checkpoint after step 19"));
        QCOMPARE(rankPosition(0, "eval"), std::string("eval before step 1"));
        QCOMPARE(rankPosition(0, "setup"), std::string("setup"));
    }

    // Every rank entered it and it still waits: nobody is missing; the earliest pending is named.
    void deadlockWithoutAMissingRank()
    {
        std::vector<std::optional<FlightRecord>> records{record(0, 12, 12), record(1, 12, 11)};
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.seq, std::int64_t(11));
        QVERIFY(report.missingRanks.empty());
        QCOMPARE(report.waitingRanks, std::vector<int>{1});
    }

    // The same number, another collective: the ranks went down different paths.
    void mismatchIsSaid()
    {
        auto other = record(1, 41, 41);
        other.collectives.back().kind = "all_gather";
        other.collectives.back().bytes = 8192;
        std::vector<std::optional<FlightRecord>> records{record(0, 41, 41), other};
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.seq, std::int64_t(41));
        QCOMPARE(report.mismatchedRanks, std::vector<int>{1});
        QVERIFY2(has(report.text, "rank 1 issued all_gather #41 of default_pg (8.00 KiB float32) under the same number"),
                 report.text.c_str());
    }

    // Four ranks, one of them issues all_gather where three issue all_reduce (issued first, so the
    // report used to take its all_gather as the reference and call the three astray): the
    // majority decides.
    void mismatchNamesTheRankAgainstTheMajority()
    {
        std::vector<std::optional<FlightRecord>> records;
        for (int rank = 0; rank < 4; ++rank) {
            auto r = record(rank, 41, 41);
            if (rank == 1) {
                r.collectives.back().kind = "all_gather";
                r.collectives.back().issuedAt = 100; // the earliest issue of #41
            }
            records.push_back(r);
        }
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.mismatchedRanks, std::vector<int>{1});
        QCOMPARE(report.kind, std::string("all_reduce"));
        QVERIFY2(has(report.text, "rank 1 issued all_gather #41 of default_pg (4.00 KiB float32) under the same number as the "
                                  "others' all_reduce (4.00 KiB float32): the ranks took different paths"),
                 report.text.c_str());
        // Two ranks that disagree: no majority, and the report says so.
        auto other = record(1, 41, 41);
        other.collectives.back().kind = "all_gather";
        const HangReport two = analyseFlightRecords({record(0, 41, 41), other}, kPatience);
        QCOMPARE(two.mismatchedRanks.size(), std::size_t(1));
        QVERIFY2(has(two.text, "no majority says which is astray"), two.text.c_str());
    }

    void silentRankIsSaid()
    {
        std::vector<std::optional<FlightRecord>> records{record(0, 41, 41), std::nullopt};
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.silentRanks, std::vector<int>{1});
        QVERIFY2(has(report.text, "1 of 2 ranks answered"), report.text.c_str());
        QVERIFY2(has(report.text, "rank 1 did not answer within 2.0 s"), report.text.c_str());
    }

    void nothingPending()
    {
        std::vector<std::optional<FlightRecord>> records{record(0, 9, 10), record(1, 9, 10)};
        const HangReport report = analyseFlightRecords(records, kPatience);
        QCOMPARE(report.seq, std::int64_t(0));
        QVERIFY2(has(report.text, "no rank hangs: no collective is pending"), report.text.c_str());
    }

    // #45 point 10: Diagnose on a healthy run printed a dump without saying there was no hang. A
    // collective every rank is in, briefly, is what a live run shows at any moment.
    void healthyRunInFlightSaysNoHang()
    {
        std::vector<std::optional<FlightRecord>> records;
        for (int rank = 0; rank < 2; ++rank) {
            auto r = record(rank, 10, 10);
            r.collectives.back().issuedAt = r.time - 0.3;
            records.push_back(r);
        }
        const HangReport report = analyseFlightRecords(records, kPatience);
        QVERIFY2(has(report.text, "no rank hangs: every rank is in that collective and it has waited only 0.3 s"),
                 report.text.c_str());
        // A long wait of every rank is a deadlock, never "no hang".
        const HangReport stuck = analyseFlightRecords({record(0, 12, 12), record(1, 12, 11)}, kPatience);
        QVERIFY2(!has(stuck.text, "no rank hangs"), stuck.text.c_str());
    }

    // The request and answer files: a record answers only the request it was asked; an older
    // answer left in the folder is not taken for a new one.
    void gatherTakesOnlyAnswersToItsRequest()
    {
        QTemporaryDir dir;
        const std::filesystem::path flight = dir.filePath("flight").toStdString();
        std::filesystem::create_directories(flight);
        std::ofstream(protocol::flightRecordFile(flight, 0)) << protocol::flightRecordJson(record(0, 3, 4)); // request 7
        std::thread rank1([&] {
            // A rank answering: reads the request, writes its record with that number.
            for (int tries = 0; tries < 100; ++tries) {
                std::ifstream in(protocol::flightRequestFile(flight));
                std::int64_t request = 0;
                if (in >> request) {
                    auto r = record(1, 3, 4);
                    r.request = request;
                    std::ofstream(protocol::flightRecordFile(flight, 1)) << protocol::flightRecordJson(r);
                    return;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        });
        const auto records = gatherFlightRecords(flight, 2, std::chrono::milliseconds(600));
        rank1.join();
        QVERIFY(!records[0]); // its file answers an older request
        QVERIFY(records[1]);
        QCOMPARE(records[1]->rank, 1);
        QCOMPARE(records[1]->collectives.size(), std::size_t(3));
        QVERIFY(records[1]->collectives.back().completedAt);
    }

    void recordRoundTripsAndBadFilesAreSaid()
    {
        auto r = record(2, 5, 4);
        auto parsed = protocol::parseFlightRecord(protocol::flightRecordJson(r), "rank2.json");
        QVERIFY(parsed.ok());
        QCOMPARE(parsed->collectives.size(), std::size_t(5));
        QVERIFY(!parsed->collectives[4].completedAt);
        QCOMPARE(*parsed->collectives[0].completedAt, 902.0);
        QCOMPARE(parsed->issued.at("default_pg"), std::int64_t(5));
        auto bad = protocol::parseFlightRecord("{\"rank\": 1}", "flight/rank1.json");
        QVERIFY(!bad.ok());
        QVERIFY2(has(bad.error().message, "flight/rank1.json: not a flight record"), bad.error().message.c_str());
    }
};

QTEST_GUILESS_MAIN(TestHangReport)
#include "tst_hang_report.moc"
