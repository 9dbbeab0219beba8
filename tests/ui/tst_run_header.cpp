// The Run page's header: the status line (precision, ranks, a cluster job and what its scheduler
// says while it lives), the progress (step of the target, elapsed, ETA while live), the controls
// enabled where they apply (Stop for a live run with its launcher, Diagnose once at a time,
// Resume for a run of this history that ended short, Try model for a finished language model),
// and its controls' signals (Resume once, smoothing set without an echo).

#include "ui/run_header.h"

#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QtTest>

using namespace shardscope;
using storage::RunStatus;
using ui::RunHeader;
using ui::RunInfo;

namespace {

constexpr double kNow = 1'700'000'000.0;

RunInfo liveRun()
{
    RunInfo info;
    info.runId = 7;
    info.name = "demo-gpt";
    info.status = RunStatus::Running;
    info.startedAt = kNow - 100;
    info.maxSteps = 10;
    info.runDir = "/runs/demo-gpt";
    info.distributedType = "MULTI_CPU";
    info.mixedPrecision = "bf16";
    info.worldSize = 2;
    info.launcher.pid = 4242;
    return info;
}

QPushButton* button(const RunHeader& header, const char* name) { return header.findChild<QPushButton*>(QLatin1String(name)); }

} // namespace

class TestRunHeader : public QObject {
    Q_OBJECT

private slots:
    void aLiveRunsProgressAndControls()
    {
        RunHeader header;
        header.showRun(liveRun(), 5, false, kNow);
        QCOMPARE(header.findChild<QLabel*>(QStringLiteral("runTitle"))->text(), QStringLiteral("demo-gpt"));
        const QString status = header.statusLine();
        QVERIFY2(status.contains(QStringLiteral(">running<")) && status.contains(QStringLiteral("MULTI_CPU"))
                     && status.contains(QStringLiteral("precision bf16")) && status.contains(QStringLiteral("2 ranks")),
                 qPrintable(status));
        QCOMPARE(header.progressLine(), QStringLiteral("step 5/10 · elapsed 1m 40s · ETA 1m 40s"));
        QVERIFY(button(header, "stopButton")->isEnabled());
        QVERIFY(button(header, "diagnoseButton")->isEnabled());
        QVERIFY(!button(header, "resumeButton")->isEnabled());
        QVERIFY(!button(header, "tryModelButton")->isEnabled());
        header.showRun(liveRun(), 5, true, kNow); // a diagnosis on its way
        QVERIFY(!button(header, "diagnoseButton")->isEnabled());
        RunInfo unknownLauncher = liveRun();
        unknownLauncher.launcher.pid = 0;
        header.showRun(unknownLauncher, 5, false, kNow);
        QVERIFY(!button(header, "stopButton")->isEnabled());
    }

    void aTargetOverriddenShowsTheStepOnly()
    {
        RunHeader header;
        header.showRun(liveRun(), 12, false, kNow); // --max_steps ran past the recipe's 10
        QCOMPARE(header.progressLine(), QStringLiteral("step 12 · elapsed 1m 40s"));
        RunInfo notStarted = liveRun();
        notStarted.startedAt.reset();
        notStarted.status = RunStatus::Pending;
        header.showRun(notStarted, -1, false, kNow);
        QVERIFY(header.progressLine().isEmpty());
    }

    void aClusterJobSaysWhatItsSchedulerSays()
    {
        RunHeader header;
        RunInfo job = liveRun();
        job.job = "slurm:123";
        job.statusDetail = "pending (Resources): nodes busy";
        job.status = RunStatus::Pending;
        header.showRun(job, -1, false, kNow);
        QVERIFY2(header.statusLine().endsWith(QStringLiteral(" · slurm:123 · pending (Resources): nodes busy")),
                 qPrintable(header.statusLine()));
        job.status = RunStatus::Completed;
        job.endedAt = kNow - 10;
        header.showRun(job, 10, false, kNow);
        QVERIFY2(header.statusLine().endsWith(QStringLiteral(" · slurm:123")), qPrintable(header.statusLine()));
        QCOMPARE(header.progressLine(), QStringLiteral("step 10/10 · elapsed 1m 30s")); // ended: no ETA
        QVERIFY(!button(header, "resumeButton")->isEnabled()); // a cluster run resumes by its requeue
    }

    void anEndedRunResumesOnceAndTriesItsModel()
    {
        RunHeader header;
        RunInfo failed = liveRun();
        failed.status = RunStatus::Failed;
        failed.endedAt = kNow;
        header.showRun(failed, 5, false, kNow);
        QVERIFY(!button(header, "stopButton")->isEnabled());
        QVERIFY(!button(header, "diagnoseButton")->isEnabled());
        QVERIFY(button(header, "resumeButton")->isEnabled());
        QSignalSpy resumed(&header, &RunHeader::resumeRequested);
        button(header, "resumeButton")->click();
        QCOMPARE(resumed.count(), 1);
        QVERIFY(!button(header, "resumeButton")->isEnabled());

        RunInfo done = liveRun();
        done.status = RunStatus::Completed;
        done.endedAt = kNow;
        header.showRun(done, 10, false, kNow);
        QVERIFY(!button(header, "resumeButton")->isEnabled());
        QVERIFY(!button(header, "tryModelButton")->isEnabled()); // not a language model's
        done.writesText = true;
        header.showRun(done, 10, false, kNow);
        QVERIFY(button(header, "tryModelButton")->isEnabled());
        QSignalSpy tried(&header, &RunHeader::tryModelRequested);
        button(header, "tryModelButton")->click();
        QCOMPARE(tried.count(), 1);
    }

    void theControlsSignals()
    {
        RunHeader header;
        QSignalSpy smoothing(&header, &RunHeader::smoothingChosen);
        auto* slider = header.findChild<QSlider*>(QStringLiteral("smoothing"));
        slider->setValue(50);
        QCOMPARE(smoothing.count(), 1);
        QCOMPARE(smoothing.first().first().toDouble(), 0.5);
        header.setSmoothing(0.3); // set from the page: no echo
        QCOMPARE(slider->value(), 30);
        QCOMPARE(smoothing.count(), 1);
        QSignalSpy xAxis(&header, &RunHeader::xAxisChosen);
        header.findChild<QComboBox*>(QStringLiteral("xAxisMode"))->setCurrentIndex(2);
        QCOMPARE(xAxis.count(), 1);
        QCOMPARE(xAxis.first().first().toInt(), 2);
        auto* follow = button(header, "followButton");
        QVERIFY(follow->isChecked());
        header.setFollowing(false);
        QVERIFY(!follow->isChecked());
        QSignalSpy followAgain(&header, &RunHeader::followRequested);
        follow->click();
        QCOMPARE(followAgain.count(), 1);
    }
};

QTEST_MAIN(TestRunHeader)
#include "tst_run_header.moc"
