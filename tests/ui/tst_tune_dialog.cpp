// #47: Configure → Tune… with the real `shardscope tune`: the Llama demo at 2 CPU ranks under a
// memory budget between FULL_SHARD's and DDP's estimates. The dialog shows every candidate (the
// ruled-out ones with the reason), a chart of the trials, the best marked; "Use this" opens the
// config and recipe the tuner wrote (new files, the user's untouched) in the page.

#include "tests/common/demo_recipes.h"
#include "ui/configure_page.h"
#include "ui/config_form.h"
#include "ui/tune_dialog.h"

#include <QComboBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <qcustomplot.h>

using shardscope::ui::ConfigurePage;
using shardscope::ui::TuneDialog;

class TestTuneDialog : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        qputenv("HF_HOME", (m_tmp.path() + QStringLiteral("/hf")).toUtf8());
        qputenv("SHARDSCOPE_HOME", (m_tmp.path() + QStringLiteral("/home")).toUtf8());
    }

    void tuneShowsTheTrialsAndUsesTheChoice()
    {
        const QString recipe = m_tmp.filePath(QStringLiteral("llama.yaml"));
        {
            QFile file(recipe);
            QVERIFY(file.open(QIODevice::WriteOnly));
            file.write(shardscope::testing::llamaDemoRecipe(40).toUtf8());
        }
        const QByteArray userRecipe = shardscope::testing::llamaDemoRecipe(40).toUtf8();
        ConfigurePage page((m_tmp.path() + QStringLiteral("/history.sqlite")).toStdString());
        auto* type = qobject_cast<QComboBox*>(page.form()->fieldEditor(QStringLiteral("distributed_type")));
        QVERIFY(type);
        type->setCurrentIndex(type->findData(QStringLiteral("MULTI_CPU")));
        auto* processes = qobject_cast<QLineEdit*>(page.form()->fieldEditor(QStringLiteral("num_processes")));
        QVERIFY(processes);
        processes->selectAll();
        QTest::keyClick(processes, Qt::Key_Backspace);
        QTest::keyClicks(processes, QStringLiteral("2"));
        QVERIFY(page.openRecipeFile(recipe));

        auto* button = page.findChild<QPushButton*>(QStringLiteral("tuneButton"));
        QVERIFY(button);
        button->click();
        TuneDialog* dialog = page.tuneDialog();
        QVERIFY(dialog);
        dialog->findChild<QLineEdit*>(QStringLiteral("tuneMemoryBudget"))->setText(QStringLiteral("14MB"));
        dialog->findChild<QSpinBox*>(QStringLiteral("tuneTimeBudget"))->setValue(40);
        QSignalSpy finished(dialog, &TuneDialog::finished);
        dialog->findChild<QPushButton*>(QStringLiteral("tuneStart"))->click();
        QVERIFY(dialog->running());
        QVERIFY(finished.wait(300000));
        QVERIFY2(finished.first().first().toBool(), qPrintable(dialog->statusText()));

        auto* table = dialog->findChild<QTableWidget*>(QStringLiteral("tuneTable"));
        QVERIFY(dialog->trialRows() > 3);
        bool ddpRuledOut = false, bestMarked = false;
        for (int row = 0; row < table->rowCount(); ++row) {
            const QString setup = table->item(row, 0)->text(), result = table->item(row, 5)->text();
            ddpRuledOut = ddpRuledOut
                          || (setup.startsWith(QStringLiteral("DDP")) && result.contains(QStringLiteral("exceeds the budget")));
            bestMarked = bestMarked || (setup.startsWith(QStringLiteral("★")) && result == QStringLiteral("best"));
        }
        QVERIFY(ddpRuledOut);
        QVERIFY(bestMarked);
        auto* chart = dialog->findChild<QCustomPlot*>(QStringLiteral("tuneChart"));
        QVERIFY(chart && chart->graph(0)->dataCount() + chart->graph(1)->dataCount() > 0);
        QCOMPARE(chart->graph(1)->dataCount(), 1);

        const QString config = dialog->chosenConfig(), chosenRecipe = dialog->chosenRecipe();
        QVERIFY(QFile::exists(config) && QFile::exists(chosenRecipe));
        QVERIFY(chosenRecipe != recipe);
        QFile original(recipe);
        QVERIFY(original.open(QIODevice::ReadOnly));
        QCOMPARE(original.readAll(), userRecipe); // the user's recipe as it was
        dialog->findChild<QPushButton*>(QStringLiteral("tuneUse"))->click();
        QCOMPARE(page.configPath(), config);
        QCOMPARE(page.recipePath(), chosenRecipe);
    }

    void tuneWantsASavedRecipe()
    {
        ConfigurePage page((m_tmp.path() + QStringLiteral("/history2.sqlite")).toStdString());
        page.setRecipeText(QStringLiteral("name: unsaved\n"));
        QVERIFY(page.tune().contains(QStringLiteral("Save the recipe first")));
        QVERIFY(!page.tuneDialog());
    }
};

QTEST_MAIN(TestTuneDialog)
#include "tst_tune_dialog.moc"
