// The launcher's handling of event lines: valid lines land in events.jsonl in order, malformed or
// truncated ones are counted, reported and skipped (never written, never fatal), error events are
// collected with their rank, and the progress line reflects rank 0's last step.

#include "app/launcher/run_monitor.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;

class TestRunMonitor : public QObject {
    Q_OBJECT
private slots:
    void skipsMalformedLinesAndKeepsTheRest()
    {
        QTemporaryDir dir;
        const QString events = dir.filePath("events.jsonl");
        RunMonitor monitor(events.toStdString(), 100, nullptr, false);
        int forwarded = 0;
        monitor.onEvent = [&](const protocol::Event&) { ++forwarded; };

        protocol::StepEvent step;
        step.step = 7;
        step.loss = 1.25;
        step.tokensPerS = 2000;
        const std::string good1 = protocol::encodeEvent({1, 0, 1.0, step});
        const std::string good2 = protocol::encodeEvent({1, 1, 2.0, protocol::ErrorEvent{"exception", "boom"}});
        monitor.onEventLine(0, good1);
        monitor.onEventLine(1, good1.substr(0, good1.size() / 2)); // truncated by a dying rank
        monitor.onEventLine(1, "garbage");
        monitor.onEventLine(1, good2);

        QCOMPARE(monitor.malformedLines(), 2);
        QCOMPARE(forwarded, 2);
        QCOMPARE(monitor.stepsDone(), 7);
        QCOMPARE(monitor.errorMessages().size(), size_t(1));
        QCOMPARE(QString::fromStdString(monitor.errorMessages()[0]), QStringLiteral("rank 1: exception: boom"));
        const QString progress = QString::fromStdString(monitor.progressLine());
        QVERIFY2(progress.startsWith("step 7/100 | loss 1.2500 | 2.0k tok/s"), qPrintable(progress));

        monitor.tick(); // events are flushed on the launcher's tick, not per line
        QFile file(events);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = file.readAll().split('\n');
        QCOMPARE(lines.size(), 3); // two lines and the empty rest after the last newline
        QCOMPARE(lines[0].toStdString(), good1);
        QCOMPARE(lines[1].toStdString(), good2);
    }

    void stepsFromOtherRanksDoNotDriveProgress()
    {
        RunMonitor monitor("", 10, nullptr, false);
        protocol::StepEvent step;
        step.step = 3;
        monitor.onEventLine(1, protocol::encodeEvent({1, 1, 1.0, step}));
        QCOMPARE(monitor.stepsDone(), 0);
    }
};

QTEST_APPLESS_MAIN(TestRunMonitor)
#include "tst_run_monitor.moc"
