// Following a cluster job (app/cluster/job_watch): the nodes' events files read on as they grow,
// a line still being written left for later; and the end of a job decided from what the ranks
// said and SLURM's end state, naming the rank and node to blame.

#include "app/cluster/job_watch.h"
#include "tests/common/files.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using namespace shardscope::cluster;

namespace {

protocol::Event eventOf(int rank, protocol::EventBody body)
{
    protocol::Event event;
    event.rank = rank;
    event.time = 1000 + rank;
    event.body = std::move(body);
    return event;
}

void append(const QString& path, const QByteArray& bytes)
{
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Append));
    QCOMPARE(file.write(bytes), bytes.size());
}

QByteArray stepLine(int rank, std::int64_t step)
{
    protocol::StepEvent s;
    s.step = step;
    return QByteArray::fromStdString(protocol::encodeEvent(eventOf(rank, s))) + "\n";
}

} // namespace

class TestJobWatch : public QObject {
    Q_OBJECT
private slots:
    void tailReadsWhatTheNodesAdd()
    {
        QTemporaryDir dir;
        const std::filesystem::path run = dir.path().toStdString();
        EventsTail tail(run, 2);
        QList<QPair<int, int>> seen; // (rank, node)
        auto read = [&] { return tail.readNew([&](const protocol::Event& e, int node) { seen << qMakePair(e.rank, node); }); };
        QCOMPARE(read(), std::int64_t(0)); // nothing started yet
        const QString node0 = QString::fromStdString(nodeRunDir(run, 0, 0).string());
        const QString node1 = QString::fromStdString(nodeRunDir(run, 0, 1).string());
        QDir().mkpath(node0);
        QDir().mkpath(node1);
        const QByteArray line = stepLine(1, 1);
        append(node0 + "/events.jsonl", stepLine(0, 1));
        append(node1 + "/events.jsonl", line.left(10)); // half written
        QCOMPARE(read(), std::int64_t(1));
        append(node1 + "/events.jsonl", line.mid(10) + "not an event\n");
        append(node0 + "/events.jsonl", stepLine(0, 2));
        QCOMPARE(read(), std::int64_t(2));
        QCOMPARE(tail.malformed(), std::int64_t(1));
        // A requeued attempt's folder is read too.
        const QString again = QString::fromStdString(nodeRunDir(run, 1, 1).string());
        QDir().mkpath(again);
        append(again + "/events.jsonl", stepLine(1, 3));
        QCOMPARE(read(), std::int64_t(1));
        QCOMPARE(seen, (QList<QPair<int, int>>{{0, 0}, {0, 0}, {1, 1}, {1, 1}})); // node by node, each in its order
        QCOMPARE(read(), std::int64_t(0)); // nothing read twice
    }

    void endIsDecidedFromTheRanksAndSlurm()
    {
        const std::vector<std::string> nodes = {"n1", "n2"};
        const JobState failed{"FAILED", "NonZeroExitCode", "n[1-2]", "1:0"};
        // Rank 1 (on n2) went silent; rank 0 lost it.
        const std::vector<protocol::Event> lost = {eventOf(0, protocol::ErrorEvent{"peer", "connection reset by rank 1"})};
        auto end = jobEnd(failed, lost, 2, 1, nodes);
        QCOMPARE(end.status, storage::RunStatus::Failed);
        QCOMPARE(end.rootCauseRank.value_or(-1), 1);
        QVERIFY2(end.error.find("rank 1 on n2 (node 1) ended without a word while its peers lost it") != std::string::npos,
                 end.error.c_str());
        // A rank's own error is the root cause, with its node.
        const std::vector<protocol::Event> own = {eventOf(2, protocol::ErrorEvent{"oom", "out of memory"}),
                                                  eventOf(0, protocol::ErrorEvent{"peer", "lost"})};
        end = jobEnd(failed, own, 4, 2, nodes);
        QCOMPARE(end.rootCauseRank.value_or(-1), 2);
        QVERIFY2(end.error.find("rank 2 on n2 (node 1) failed first: oom: out of memory") != std::string::npos,
                 end.error.c_str());
        // Cancelled, and a time limit with no checkpoint.
        QCOMPARE(jobEnd({"CANCELLED by 0", "None", "", "0:15"}, lost, 2, 1, nodes).status, storage::RunStatus::Cancelled);
        end = jobEnd({"TIMEOUT", "TimeLimit", "n[1-2]", "0:0"}, {}, 2, 1, nodes);
        QCOMPARE(end.status, storage::RunStatus::Failed);
        QVERIFY2(end.error.find("time limit (TIMEOUT)") != std::string::npos, end.error.c_str());
        // Every rank done is a success, whatever SLURM says of the job's last moments.
        const std::vector<protocol::Event> done = {eventOf(0, protocol::DoneEvent{"completed", 6, 1.0}),
                                                   eventOf(1, protocol::DoneEvent{"completed", 6, 1.0})};
        QCOMPARE(jobEnd({"CANCELLED", "None", "", ""}, done, 2, 1, nodes).status, storage::RunStatus::Completed);
    }
};

QTEST_GUILESS_MAIN(TestJobWatch)
#include "tst_job_watch.moc"
