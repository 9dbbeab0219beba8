// The Configure page's bottom: the problems and their summary (after a config that did not open),
// the fix offered, Launch enabled only without errors; a click on a problem names its field;
// the run kind shows the script's row and hides Profile; a cluster target shows Batch script… and
// hides Profile; the request says the target, the script and Profile as shown.

#include "tests/ui/fake_launcher.h"
#include "ui/diagnostic_model.h"
#include "ui/launch_panel.h"
#include "ui/script_panel.h"
#include "ui/target_choice.h"

#include <QCheckBox>
#include <QLabel>
#include <QListView>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using ui::LaunchPanel;

namespace {

ui::ConfigureCheck twoProblems(bool withFix)
{
    ui::ConfigureCheck check;
    check.problems = {{config::Severity::Error, "num_processes", "num_processes: 0 is not a count of processes"},
                      {config::Severity::Warning, "mixed_precision", "mixed_precision: fp16 on CPU ranks is emulated"}};
    check.texts = {QStringLiteral("num_processes: 0 is not a count of processes"),
                   QStringLiteral("mixed_precision: fp16 on CPU ranks is emulated")};
    if (withFix)
        check.fix = config::ConfigFix{"run on CPU ranks: set use_cpu: true", {}};
    return check;
}

} // namespace

class TestLaunchPanel : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void problemsDisableLaunch()
    {
        LaunchPanel panel;
        auto* launch = panel.findChild<QPushButton*>(QStringLiteral("launchButton"));
        auto* summary = panel.findChild<QLabel*>(QStringLiteral("problemsSummary"));
        auto* fix = panel.findChild<QPushButton*>(QStringLiteral("applyFix"));
        panel.showCheck(twoProblems(true), QStringLiteral("x.yaml was not opened"));
        QVERIFY(!panel.canLaunch());
        QVERIFY(!launch->isEnabled());
        QCOMPARE(launch->toolTip(), QStringLiteral("1 error(s) to fix first"));
        QVERIFY2(
            summary->text().contains(QStringLiteral("x.yaml was not opened</span> <b>Problems:</b> 1 error(s), 1 warning(s)")),
            qPrintable(summary->text()));
        QVERIFY(!fix->isHidden());
        QCOMPARE(fix->text(), QStringLiteral("Fix: run on CPU ranks: set use_cpu: true"));
        QCOMPARE(panel.diagnostics()->rowCount(), 2);
        QSignalSpy fixed(&panel, &LaunchPanel::fixRequested);
        fix->click();
        QCOMPARE(fixed.count(), 1);

        panel.showCheck(ui::ConfigureCheck{}, QString());
        QVERIFY(panel.canLaunch());
        QVERIFY(fix->isHidden());
        QCOMPARE(summary->text(), QStringLiteral("<b>Problems:</b> none; the config on screen is valid."));
        QVERIFY(launch->toolTip().startsWith(QStringLiteral("Start `shardscope launch` with the config and the recipe")));
        panel.setScriptMode(true);
        panel.showCheck(ui::ConfigureCheck{}, QString());
        QVERIFY(launch->toolTip().startsWith(QStringLiteral("Start your script with `shardscope launch --script`")));
        QSignalSpy launched(&panel, &LaunchPanel::launchRequested);
        launch->click();
        QCOMPARE(launched.count(), 1);
    }

    void aProblemClickedNamesItsField()
    {
        LaunchPanel panel;
        panel.resize(900, 400);
        panel.show();
        panel.showCheck(twoProblems(false), QString());
        auto* view = panel.findChild<QListView*>(QStringLiteral("diagnostics"));
        QSignalSpy chosen(&panel, &LaunchPanel::diagnosticChosen);
        const QModelIndex second = panel.diagnostics()->index(1, 0);
        QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->visualRect(second).center());
        QCOMPARE(chosen.count(), 1);
        QCOMPARE(chosen.first().first().toString(), QStringLiteral("mixed_precision"));
    }

    void theRunKindAndTheScriptsRow()
    {
        LaunchPanel panel;
        auto* profile = panel.findChild<QCheckBox*>(QStringLiteral("profileRun"));
        QVERIFY(panel.scriptPanel()->isHidden());
        QVERIFY(!profile->isHidden());
        QSignalSpy changed(&panel, &LaunchPanel::runChanged);
        panel.setScriptMode(true);
        QVERIFY(panel.scriptMode());
        QCOMPARE(changed.count(), 1);
        QVERIFY(!panel.scriptPanel()->isHidden());
        QVERIFY(profile->isHidden()); // a script profiles itself
        panel.scriptPanel()->setScript(QStringLiteral("/work/train.py"), QStringLiteral("--steps 5 --lr '1e-3'"),
                                       QStringLiteral("/venv/bin/python"));
        ui::LaunchRequest request;
        panel.fillRequest(request);
        QCOMPARE(request.scriptFile, QStringLiteral("/work/train.py"));
        QCOMPARE(request.workerArgs, (QStringList{"--steps", "5", "--lr", "1e-3"}));
        QCOMPARE(request.python, QStringLiteral("/venv/bin/python"));
        QVERIFY(!request.profile);
        QVERIFY(request.target.isEmpty());

        panel.setScriptMode(false);
        QVERIFY(!profile->isHidden());
        profile->setChecked(true);
        ui::LaunchRequest engine;
        panel.fillRequest(engine);
        QVERIFY(engine.profile);
        QVERIFY(engine.scriptFile.isEmpty());
    }

    void aClusterTargetShowsItsBatchScript()
    {
        testing::FakeLauncher fake(m_dir.path(),
                                   "echo '{\"file\": \"c.ini\", \"profiles\": [{\"name\": \"lab\", \"partitions\": []}]}'\n");
        LaunchPanel panel;
        auto* batch = panel.findChild<QPushButton*>(QStringLiteral("batchScriptButton"));
        auto* profile = panel.findChild<QCheckBox*>(QStringLiteral("profileRun"));
        QVERIFY(batch->isHidden());
        QSignalSpy loaded(&panel, &LaunchPanel::targetsLoaded);
        panel.targetChoice()->refresh();
        QVERIFY(loaded.wait(20000));
        QVERIFY(panel.targetChoice()->setTarget(QStringLiteral("slurm:lab")));
        QVERIFY(!batch->isHidden());
        QVERIFY(profile->isHidden()); // a job does not profile yet
        profile->setChecked(true);
        ui::LaunchRequest request;
        panel.fillRequest(request);
        QCOMPARE(request.target, QStringLiteral("slurm:lab"));
        QVERIFY(!request.profile);
        QSignalSpy asked(&panel, &LaunchPanel::batchScriptRequested);
        batch->click();
        QCOMPARE(asked.count(), 1);
        QVERIFY(panel.targetChoice()->setTarget(QString()));
        QVERIFY(batch->isHidden());
        QVERIFY(!profile->isHidden());
    }

    void theMessageLine()
    {
        LaunchPanel panel;
        panel.showMessage(QStringLiteral("Saved x.yaml"), false);
        auto* line = panel.findChild<QLabel*>(QStringLiteral("configureMessage"));
        QCOMPARE(panel.message(), QStringLiteral("Saved x.yaml"));
        QVERIFY(line->styleSheet().isEmpty());
        panel.showMessage(QStringLiteral("cannot write x.yaml"), true);
        QVERIFY(line->styleSheet().contains(QStringLiteral("#c62828")));
    }
};

QTEST_MAIN(TestLaunchPanel)
#include "tst_launch_panel.moc"
