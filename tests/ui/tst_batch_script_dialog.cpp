// A SLURM target's batch script: `shardscope launch --dry-run` of the request, shown as it was
// written; the launcher's refusal said instead; one script written at a time; Submit submits the
// shown request itself (no --dry-run, same run name), once.

#include "tests/ui/fake_launcher.h"
#include "ui/batch_script_dialog.h"
#include "ui/history_service.h"
#include "ui/launch_controller.h"

#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::BatchScriptDialog;
using ui::LaunchRequest;

namespace {

// A launcher that records its arguments and, for --dry-run, prints a batch script.
const QByteArray kDryRunner =
    shardscope::testing::recordArguments()
    + "case \"$*\" in *--dry-run*) printf '#!/bin/bash\\n#SBATCH --nodes=2\\n# not submitted\\n' ;; esac\n";

LaunchRequest clusterRequest()
{
    LaunchRequest request;
    request.recipeFile = QStringLiteral("/tmp/recipe.yaml");
    request.runName = QStringLiteral("demo-20250101-120000");
    request.numProcesses = 2;
    request.target = QStringLiteral("slurm:lab");
    return request;
}

} // namespace

class TestBatchScriptDialog : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void theDryRunsScriptIsShown()
    {
        FakeLauncher fake(m_dir.path(), kDryRunner);
        ui::HistoryService history;
        ui::LaunchController launcher(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString(), &history, nullptr);
        BatchScriptDialog dialog(&launcher);
        QCOMPARE(dialog.objectName(), QStringLiteral("batchScriptDialog"));
        QSignalSpy shown(&dialog, &BatchScriptDialog::scriptShown);
        QVERIFY(dialog.showScriptOf(clusterRequest()));
        QVERIFY(dialog.writing());
        QVERIFY(!dialog.showScriptOf(clusterRequest())); // one at a time
        QVERIFY(shown.wait(20000));
        QVERIFY(!dialog.writing());
        QVERIFY(dialog.isVisible());
        QCOMPARE(dialog.scriptText(), QStringLiteral("#!/bin/bash\n#SBATCH --nodes=2\n# not submitted\n"));
        QCOMPARE(dialog.findChild<QPlainTextEdit*>(QStringLiteral("batchScript"))->toPlainText(), dialog.scriptText());
        QVERIFY2(dialog.windowTitle().contains(QStringLiteral("demo-20250101-120000 (slurm:lab)")),
                 qPrintable(dialog.windowTitle()));
        const QStringList args = fake.arguments();
        QCOMPARE(args.value(0), QStringLiteral("launch"));
        QVERIFY(args.contains(QStringLiteral("--dry-run")));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--target")) + 1), QStringLiteral("slurm:lab"));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--run_name")) + 1), QStringLiteral("demo-20250101-120000"));
    }

    void aRefusalIsSaidNotShown()
    {
        FakeLauncher fake(m_dir.path(), "echo 'shardscope launch: error: clusters.ini has no profile [lab]' >&2\nexit 2\n");
        ui::HistoryService history;
        ui::LaunchController launcher(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString(), &history, nullptr);
        BatchScriptDialog dialog(&launcher);
        QSignalSpy failed(&dialog, &BatchScriptDialog::failed);
        QSignalSpy shown(&dialog, &BatchScriptDialog::scriptShown);
        QVERIFY(dialog.showScriptOf(clusterRequest()));
        QVERIFY(failed.wait(20000));
        QCOMPARE(failed.first().first().toString(),
                 QStringLiteral("shardscope launch: error: clusters.ini has no profile [lab]"));
        QCOMPARE(shown.count(), 0);
        QVERIFY(!dialog.isVisible());
    }

    void submitSubmitsTheShownRequestOnce()
    {
        FakeLauncher fake(m_dir.path(), kDryRunner);
        ui::HistoryService history;
        ui::LaunchController launcher(m_dir.filePath(QStringLiteral("history.sqlite")).toStdString(), &history, nullptr);
        BatchScriptDialog dialog(&launcher);
        QCOMPARE(dialog.submit(), QStringLiteral("No batch script is shown."));
        QSignalSpy shown(&dialog, &BatchScriptDialog::scriptShown);
        QVERIFY(dialog.showScriptOf(clusterRequest()));
        QVERIFY(shown.wait(20000));
        QFile::remove(fake.argsFile());
        QSignalSpy launched(&launcher, &ui::LaunchController::runLaunched);
        dialog.findChild<QPushButton*>(QStringLiteral("submitJob"))->click();
        QCOMPARE(launched.count(), 1);
        QCOMPARE(launched.first().first().toString(), QStringLiteral("demo-20250101-120000"));
        QTRY_VERIFY(!fake.arguments().isEmpty());
        const QStringList args = fake.arguments();
        QVERIFY(!args.contains(QStringLiteral("--dry-run")));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--run_name")) + 1), QStringLiteral("demo-20250101-120000"));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--target")) + 1), QStringLiteral("slurm:lab"));
        QVERIFY(!dialog.isVisible());
        QCOMPARE(dialog.submit(), QStringLiteral("No batch script is shown.")); // once
    }
};

QTEST_MAIN(TestBatchScriptDialog)
#include "tst_batch_script_dialog.moc"
