// Configure → Tune…: refused, with what to do, for a script run, a cluster target or a recipe not
// saved; the chosen files go beside the recipe (beside the history for a bundled example); one
// dialog, shown again while its tuner runs and made anew otherwise; "Use this" comes back.

#include "tests/ui/fake_launcher.h"
#include "ui/tune_dialog.h"
#include "ui/tune_starter.h"

#include <QDir>
#include <QLineEdit>
#include <QPointer>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using ui::TuneInputs;
using ui::TuneStarter;

namespace {

TuneInputs savedRecipe(const QString& dir)
{
    TuneInputs in;
    in.recipePath = QDir(dir).filePath(QStringLiteral("mine/recipe.yaml"));
    in.processes = 2;
    in.mixedPrecision = QStringLiteral("bf16");
    in.settingsFile = QDir(dir).filePath(QStringLiteral("home/workbench.ini"));
    return in;
}

} // namespace

class TestTuneStarter : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void refusals_data()
    {
        QTest::addColumn<int>("change");
        QTest::addColumn<QString>("said");
        QTest::newRow("script") << 0 << "tries the recipe in Shardscope's engine";
        QTest::newRow("cluster") << 1 << "choose \"This machine\"";
        QTest::newRow("never saved") << 2 << "Save the recipe first";
        QTest::newRow("edited") << 3 << "Save the recipe first";
    }

    void refusals()
    {
        QFETCH(int, change);
        QFETCH(QString, said);
        TuneInputs in = savedRecipe(m_dir.path());
        QVERIFY(ui::tuneRefusal(in).isEmpty());
        if (change == 0)
            in.scriptMode = true;
        else if (change == 1)
            in.target = QStringLiteral("slurm:lab");
        else if (change == 2)
            in.recipePath.clear();
        else
            in.recipeModified = true;
        QVERIFY2(ui::tuneRefusal(in).contains(said), qPrintable(ui::tuneRefusal(in)));
        QWidget page;
        TuneStarter starter(&page);
        QCOMPARE(starter.open(in), ui::tuneRefusal(in));
        QVERIFY(!starter.dialog());
    }

    void theChosenFilesGoBesideTheRecipe()
    {
        const TuneInputs mine = savedRecipe(m_dir.path());
        QCOMPARE(ui::tuneOutputFolder(mine), m_dir.filePath(QStringLiteral("mine")));
        TuneInputs bundled = mine;
        bundled.recipePath = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/recipes/demo-gpt.yaml");
        QCOMPARE(ui::tuneOutputFolder(bundled), m_dir.filePath(QStringLiteral("home/tuned")));
    }

    void oneDialogShownAgainWhileItRuns()
    {
        // A tuner that takes its time, then finds nothing.
        testing::FakeLauncher fake(m_dir.path(), testing::recordArguments() + "sleep 1\necho '{}'\n");
        QWidget page;
        TuneStarter starter(&page);
        const TuneInputs in = savedRecipe(m_dir.path());
        QCOMPARE(starter.open(in), QString());
        QPointer<ui::TuneDialog> first = starter.dialog();
        QVERIFY(first);
        QCOMPARE(first->parentWidget(), &page);
        QVERIFY(first->isVisible());
        QVERIFY(QFileInfo(m_dir.filePath(QStringLiteral("mine"))).isDir()); // made for the chosen files
        QSignalSpy finished(first.data(), &ui::TuneDialog::finished);
        QCOMPARE(first->start(QStringLiteral("300MB"), 60), QString());
        QVERIFY(first->running());
        QTRY_VERIFY(!fake.arguments().isEmpty());
        const QStringList args = fake.arguments();
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--recipe")) + 1), in.recipePath);
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--num_processes")) + 1), QStringLiteral("2"));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--mixed_precision")) + 1), QStringLiteral("bf16"));
        QCOMPARE(args.value(args.indexOf(QStringLiteral("--out")) + 1), m_dir.filePath(QStringLiteral("mine")));
        first->hide();
        QCOMPARE(starter.open(in), QString());
        QCOMPARE(starter.dialog(), first.data()); // the one running, shown again
        QVERIFY(first->isVisible());
        QVERIFY(finished.wait(20000));
        QVERIFY(!finished.first().first().toBool());
        QCOMPARE(first->statusText(), QStringLiteral("The tuner found no setup."));
        // Ended: Tune… makes a new one.
        QCOMPARE(starter.open(in), QString());
        QVERIFY(starter.dialog() != first.data());
        QTRY_VERIFY(!first);

        QSignalSpy used(&starter, &TuneStarter::useChosen);
        emit starter.dialog()->useChosen(QStringLiteral("c.yaml"), QStringLiteral("r.yaml"));
        QCOMPARE(used.count(), 1);
        QCOMPARE(used.first().at(0).toString(), QStringLiteral("c.yaml"));
        QCOMPARE(used.first().at(1).toString(), QStringLiteral("r.yaml"));
    }

    // The tuner's --json report in the dialog: each candidate a row (the best starred), the winner
    // offered by Use this, which opens the files it wrote.
    void theReportIsShownAndItsChoiceUsed()
    {
        testing::FakeLauncher fake(m_dir.path(), R"(cat <<'END'
{"best": "FULL_SHARD, micro-batch 2", "best_run": "tune-2", "config": "/t/best.yaml", "recipe": "/t/best-recipe.yaml",
 "trials_run": 2, "seconds": 31.0, "out_of_time": false,
 "candidates": [
  {"setup": "DDP, micro-batch 4", "estimate_bytes": 31457280, "rounds": 0, "dropped": "exceeds the budget", "run": ""},
  {"setup": "FULL_SHARD, micro-batch 2", "estimate_bytes": 10485760, "measured_bytes": 12582912, "tokens_per_s": 5000,
   "rounds": 2, "run": "tune-2"},
  {"setup": "SHARD_GRAD_OP, micro-batch 2", "estimate_bytes": 12582912, "measured_bytes": 13631488, "tokens_per_s": 4000,
   "rounds": 1, "run": "tune-3", "dropped": "slower half"}]}
END
)");
        QWidget page;
        TuneStarter starter(&page);
        QCOMPARE(starter.open(savedRecipe(m_dir.path())), QString());
        ui::TuneDialog* dialog = starter.dialog();
        QSignalSpy finished(dialog, &ui::TuneDialog::finished);
        QCOMPARE(dialog->start(QStringLiteral("14MB"), 60), QString());
        QVERIFY(finished.wait(20000));
        QVERIFY2(finished.first().first().toBool(), qPrintable(dialog->statusText()));
        QCOMPARE(dialog->trialRows(), 3);
        QCOMPARE(dialog->best(), QStringLiteral("FULL_SHARD, micro-batch 2"));
        QVERIFY2(dialog->statusText().startsWith(QStringLiteral("Best: FULL_SHARD, micro-batch 2 (2 trials in 31 s)")),
                 qPrintable(dialog->statusText()));
        QSignalSpy used(&starter, &TuneStarter::useChosen);
        auto* use = dialog->findChild<QPushButton*>(QStringLiteral("tuneUse"));
        QVERIFY(use->isEnabled());
        use->click();
        QCOMPARE(used.count(), 1);
        QCOMPARE(used.first().at(0).toString(), QStringLiteral("/t/best.yaml"));
        QCOMPARE(used.first().at(1).toString(), QStringLiteral("/t/best-recipe.yaml"));
    }

    void aTunerThatCannotStartSaysSo()
    {
        testing::FakeLauncher fake(m_dir.path(), "exit 0\n");
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        QWidget page;
        TuneStarter starter(&page);
        QCOMPARE(starter.open(savedRecipe(m_dir.path())), QString());
        QSignalSpy finished(starter.dialog(), &ui::TuneDialog::finished);
        QCOMPARE(starter.dialog()->start(QStringLiteral("14MB"), 60), QString());
        QTRY_COMPARE(finished.count(), 1);
        QVERIFY(!finished.first().first().toBool());
        QVERIFY2(starter.dialog()->statusText().startsWith(QStringLiteral("Cannot start ")),
                 qPrintable(starter.dialog()->statusText()));
        QVERIFY(!starter.dialog()->running());
    }
};

QTEST_MAIN(TestTuneStarter)
#include "tst_tune_starter.moc"
