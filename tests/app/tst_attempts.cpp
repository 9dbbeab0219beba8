// The attempts of a requeued SLURM job read back from the run folder (app/cluster/attempts): what
// each attempt.txt and node 0's plan say, and one events file of the whole run in which what a
// later attempt redid is left out and an earlier attempt's end is only a warning.

#include "app/cluster/attempts.h"
#include "app/cluster/slurm.h"
#include "engine/protocol/events.h"
#include "tests/common/files.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using namespace shardscope::cluster;

namespace {

QByteArray line(int rank, protocol::EventBody body)
{
    protocol::Event event;
    event.rank = rank;
    event.time = 1000;
    event.body = std::move(body);
    return QByteArray::fromStdString(protocol::encodeEvent(event)) + "\n";
}

QByteArray step(int rank, std::int64_t n)
{
    protocol::StepEvent s;
    s.step = n;
    s.loss = 1.0 / static_cast<double>(n);
    return line(rank, s);
}

} // namespace

class TestAttempts : public QObject {
    Q_OBJECT
private slots:
    void attemptsAreReadAndTheirEventsJoined()
    {
        QTemporaryDir dir;
        const std::filesystem::path run = dir.path().toStdString();
        auto folder = [&](int attempt, int node) {
            const QString path = QString::fromStdString(nodeRunDir(run, attempt, node).string());
            QDir().mkpath(path);
            return path;
        };
        // Attempt 0 saved step_4 at its warning but logged step 5 of a crash-free overlap (as after
        // a requeue without the agreed checkpoint); attempt 1 resumed from step_4 and finished.
        folder(0, 0);
        folder(1, 0);
        testing::writeFile(QString::fromStdString(attemptDir(run, 0).string()) + "/attempt.txt",
                           "job_id=12\nnodes=n[1-2]\nstarted=100\nended=160\nexit=75\n");
        QByteArray a0 = line(0, protocol::HelloEvent{});
        for (int s = 1; s <= 5; ++s)
            a0 += step(0, s);
        a0 += line(0, protocol::ErrorEvent{"peer", "lost rank 1"});
        a0 += line(0, protocol::DoneEvent{"checkpointed", 4, 1.0});
        testing::writeFile(folder(0, 0) + "/events.jsonl", a0);
        testing::writeFile(folder(0, 1) + "/events.jsonl", line(1, protocol::DoneEvent{"checkpointed", 4, 1.0}));
        testing::writeFile(QString::fromStdString(attemptDir(run, 1).string()) + "/attempt.txt",
                           "job_id=12\nnodes=n[2-3]\nstarted=175\n"); // its end not seen
        testing::writeFile(folder(1, 0) + "/plan.json",
                           QByteArray("{\"resume_from\": \"") + dir.path().toUtf8() + "/checkpoints/step_4\"}");
        QByteArray a1;
        for (int s = 5; s <= 8; ++s)
            a1 += step(0, s);
        a1 += line(0, protocol::DoneEvent{"completed", 8, 1.0});
        testing::writeFile(folder(1, 0) + "/events.jsonl", a1);
        testing::writeFile(folder(1, 1) + "/events.jsonl", line(1, protocol::DoneEvent{"completed", 8, 1.0}));

        const auto attempts = readAttempts(run);
        QCOMPARE(attempts.size(), std::size_t(2));
        QCOMPARE(attempts[0].jobId, std::int64_t(12));
        QCOMPARE(attempts[0].nodes, std::string("n[1-2]"));
        QCOMPARE(attempts[0].exitCode, 75);
        QCOMPARE(attempts[0].endedAt, 160.0);
        QCOMPARE(attempts[0].resumedStep, std::int64_t(0));
        QCOMPARE(attempts[1].resumedStep, std::int64_t(4));
        QCOMPARE(attempts[1].exitCode, -1);
        QCOMPARE(attempts[1].endedAt, 0.0);

        auto written = gatherAttemptEvents(run, 2, attempts);
        QVERIFY2(written.ok(), written.ok() ? "" : written.error().message.c_str());
        QList<std::int64_t> steps;
        QStringList dones, warnings;
        QFile joined(dir.filePath(QStringLiteral("events.jsonl")));
        QVERIFY(joined.open(QIODevice::ReadOnly));
        while (!joined.atEnd()) {
            auto event = protocol::decodeEvent(joined.readLine().trimmed().toStdString());
            QVERIFY(event.ok());
            if (const auto* s = std::get_if<protocol::StepEvent>(&event->body))
                steps << s->step;
            if (const auto* d = std::get_if<protocol::DoneEvent>(&event->body))
                dones << QString::fromStdString(d->status);
            if (const auto* l = std::get_if<protocol::LogEvent>(&event->body))
                warnings << QString::fromStdString(l->message);
            QVERIFY(!std::holds_alternative<protocol::ErrorEvent>(event->body)); // attempt 0's error is a warning now
        }
        QCOMPARE(steps, (QList<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8})); // attempt 0's step 5 left out: redone
        QCOMPARE(dones, (QStringList{"completed", "completed"}));
        QVERIFY2(warnings.filter(QStringLiteral("attempt 0 (job 12): peer: lost rank 1")).size() == 1,
                 qPrintable(warnings.join('\n')));
        QVERIFY2(warnings.filter(QStringLiteral("ended checkpointed after step 4; the job went on in attempt 1")).size() == 2,
                 qPrintable(warnings.join('\n')));

        // The last attempt's node without events is an error, naming it.
        QFile::remove(folder(1, 1) + "/events.jsonl");
        auto missing = gatherAttemptEvents(run, 2, attempts);
        QVERIFY(!missing.ok());
        QVERIFY2(missing.error().message.find("node 1 left no events in attempt 1") != std::string::npos,
                 missing.error().message.c_str());
        // The other nodes' are gathered all the same (a node that has not started yet while the job
        // is followed), and the file is replaced whole: no half-written file, no partial left.
        const QByteArray gathered = testing::readFile(dir.filePath(QStringLiteral("events.jsonl")));
        bool nodeZerosLastStep = false, nodeOnesEnd = false;
        for (const QByteArray& text : gathered.split('\n'))
            if (auto event = protocol::decodeEvent(text.toStdString())) {
                const auto* s = std::get_if<protocol::StepEvent>(&event->body);
                const auto* done = std::get_if<protocol::DoneEvent>(&event->body);
                nodeZerosLastStep = nodeZerosLastStep || (s && s->step == 8);
                nodeOnesEnd = nodeOnesEnd || (done && event->rank == 1 && done->status == "completed");
            }
        QVERIFY2(nodeZerosLastStep && !nodeOnesEnd, gathered.constData());
        QVERIFY(QDir(dir.path()).entryList({QStringLiteral("events.jsonl.partial-*")}).isEmpty());
        // Unseen nodes (the batch script's probe) are read with the attempt.
        testing::writeFile(QString::fromStdString(attemptDir(run, 1).string()) + "/unseen_folder.txt", "n3 n4 \n");
        QCOMPARE(readAttempts(run).back().nodesWithoutFolder, std::string("n3 n4"));
        QVERIFY(readAttempts(run).front().nodesWithoutFolder.empty());
    }
};

QTEST_GUILESS_MAIN(TestAttempts)
#include "tst_attempts.moc"
