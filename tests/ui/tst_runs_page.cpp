// The Runs page: the history model passes QAbstractItemModelTester, the filter proxy keeps exactly
// the runs each filter (status, type, precision, tag, text) selects, and the page's actions
// (rename, tag, note, delete, export) change the store and show in the table.

#include "test_store.h"
#include "ui/format.h"
#include "ui/run_list_model.h"
#include "ui/runs_page.h"

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::SeedRun;
using shardscope::testing::seedRun;
using ui::RunFilterProxyModel;
using ui::RunListModel;

namespace {

std::vector<storage::RunSummary> sampleRuns()
{
    std::vector<storage::RunSummary> runs(5);
    const char* names[] = {"mlp-fp16", "mlp-bf16", "gpt-fsdp", "gpt-zero3", "mlp-baseline"};
    const char* types[] = {"MULTI_CPU", "MULTI_CPU", "FSDP", "DEEPSPEED", "NO"};
    const char* precisions[] = {"fp16", "bf16", "bf16", "fp16", "no"};
    const storage::RunStatus statuses[] = {storage::RunStatus::Completed, storage::RunStatus::Failed, storage::RunStatus::Running,
                                           storage::RunStatus::Completed, storage::RunStatus::Cancelled};
    for (int i = 0; i < 5; ++i) {
        auto& r = runs[static_cast<std::size_t>(i)];
        r.id = i + 1;
        r.name = names[i];
        r.distributedType = types[i];
        r.mixedPrecision = precisions[i];
        r.status = statuses[i];
        r.createdAt = 1.7e9 + i;
        r.startedAt = 1.7e9 + i;
        r.lastStep = 10 * (i + 1);
        r.lastLoss = 1.0 / (i + 1);
        r.runDir = std::string("/runs/") + names[i];
    }
    runs[0].tags = {"sweep", "baseline"};
    runs[1].tags = {"sweep"};
    runs[3].tags = {"zero"};
    return runs;
}

QStringList visibleNames(const QAbstractItemModel& model)
{
    QStringList names;
    for (int row = 0; row < model.rowCount(); ++row)
        names << model.index(row, RunListModel::Name).data().toString();
    names.sort();
    return names;
}

} // namespace

class TestRunsPage : public QObject {
    Q_OBJECT
private slots:
    void modelPassesTester()
    {
        RunListModel model;
        RunFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        model.setRuns(sampleRuns());
        QCOMPARE(model.rowCount(), 5);
        QCOMPARE(model.columnCount(), int(RunListModel::ColumnCount));
        proxy.setTextFilter(QStringLiteral("gpt"));
        proxy.sort(RunListModel::Loss);
        auto fewer = sampleRuns();
        fewer.pop_back();
        model.setRuns(fewer); // a reset
        model.setRuns(fewer); // same ids: in-place update
        QCOMPARE(proxy.rowCount(), 2);
        QCOMPARE(model.index(0, RunListModel::Status).data().toString(), QStringLiteral("completed"));
        QCOMPARE(model.index(1, RunListModel::Tags).data().toString(), QStringLiteral("sweep"));
    }

    // #21: each run's colour (the one Run and Compare draw it in) beside its name, and which
    // runs have traces to open in Trace (problem 11).
    void runsShowTheirColourAndTheirTraces()
    {
        RunListModel model;
        auto runs = sampleRuns();
        runs[2].traceCount = 2;
        model.setRuns(runs);
        for (int row = 0; row < model.rowCount(); ++row) {
            const auto id = model.index(row, RunListModel::Id).data(RunListModel::RunIdRole).toLongLong();
            QCOMPARE(model.index(row, RunListModel::Name).data(Qt::DecorationRole).value<QColor>(), ui::runColor(id));
        }
        QCOMPARE(model.index(2, RunListModel::Traces).data().toString(), QStringLiteral("2 file(s)"));
        QVERIFY(model.index(1, RunListModel::Traces).data().toString().isEmpty());
        QCOMPARE(model.headerData(RunListModel::Traces, Qt::Horizontal).toString(), QStringLiteral("Traces"));
    }

    void filters_data()
    {
        QTest::addColumn<int>("status"); // -1: any
        QTest::addColumn<QString>("type");
        QTest::addColumn<QString>("precision");
        QTest::addColumn<QString>("tag");
        QTest::addColumn<QString>("text");
        QTest::addColumn<QStringList>("expected");
        const QStringList all{"gpt-fsdp", "gpt-zero3", "mlp-baseline", "mlp-bf16", "mlp-fp16"};
        QTest::newRow("none") << -1 << ""
                              << ""
                              << ""
                              << "" << all;
        QTest::newRow("completed") << int(storage::RunStatus::Completed) << ""
                                   << ""
                                   << ""
                                   << "" << QStringList{"gpt-zero3", "mlp-fp16"};
        QTest::newRow("failed") << int(storage::RunStatus::Failed) << ""
                                << ""
                                << ""
                                << "" << QStringList{"mlp-bf16"};
        QTest::newRow("type case-insensitive") << -1 << "fsdp"
                                               << ""
                                               << ""
                                               << "" << QStringList{"gpt-fsdp"};
        QTest::newRow("precision bf16") << -1 << ""
                                        << "bf16"
                                        << ""
                                        << "" << QStringList{"gpt-fsdp", "mlp-bf16"};
        QTest::newRow("tag sweep") << -1 << ""
                                   << ""
                                   << "sweep"
                                   << "" << QStringList{"mlp-bf16", "mlp-fp16"};
        QTest::newRow("text in name") << -1 << ""
                                      << ""
                                      << ""
                                      << "MLP" << QStringList{"mlp-baseline", "mlp-bf16", "mlp-fp16"};
        QTest::newRow("text in tag") << -1 << ""
                                     << ""
                                     << ""
                                     << "zero" << QStringList{"gpt-zero3"};
        QTest::newRow("text in directory") << -1 << ""
                                           << ""
                                           << ""
                                           << "/runs/gpt-f" << QStringList{"gpt-fsdp"};
        QTest::newRow("combined") << int(storage::RunStatus::Completed) << ""
                                  << "fp16"
                                  << "sweep"
                                  << "mlp" << QStringList{"mlp-fp16"};
        QTest::newRow("nothing") << int(storage::RunStatus::Interrupted) << ""
                                 << ""
                                 << ""
                                 << "" << QStringList{};
    }

    void filters()
    {
        QFETCH(int, status);
        QFETCH(QString, type);
        QFETCH(QString, precision);
        QFETCH(QString, tag);
        QFETCH(QString, text);
        QFETCH(QStringList, expected);
        RunListModel model;
        model.setRuns(sampleRuns());
        RunFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        proxy.setStatusFilter(status < 0 ? std::nullopt : std::optional(static_cast<storage::RunStatus>(status)));
        proxy.setTypeFilter(type);
        proxy.setPrecisionFilter(precision);
        proxy.setTagFilter(tag);
        proxy.setTextFilter(text);
        QCOMPARE(visibleNames(proxy), expected);
    }

    void sortsByValueNotText()
    {
        auto runs = sampleRuns();
        runs[0].lastStep = 9;
        runs[1].lastStep = 100; // "100" < "9" as text
        RunListModel model;
        model.setRuns(runs);
        RunFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        proxy.sort(RunListModel::Steps, Qt::DescendingOrder);
        QCOMPARE(proxy.index(0, RunListModel::Name).data().toString(), QStringLiteral("mlp-bf16"));
    }

    void pageLoadsFiltersAndEdits()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto a = seedRun(db, {.name = "alpha", .mixedPrecision = "fp16", .tags = {"sweep"}});
        const auto b = seedRun(
            db, {.name = "beta", .mixedPrecision = "bf16", .status = storage::RunStatus::Failed, .failingRank = 1});
        seedRun(db, {.name = "gamma", .distributedType = "FSDP"});

        ui::RunsPage page(db);
        QSignalSpy loaded(&page, &ui::RunsPage::runsLoaded);
        QTRY_COMPARE(page.model()->rowCount(), 3);
        QAbstractItemModelTester tester(page.proxy(), QAbstractItemModelTester::FailureReportingMode::QtTest);

        // The widgets drive the proxy.
        auto* search = page.findChild<QLineEdit*>(QStringLiteral("runSearch"));
        QTest::keyClicks(search, QStringLiteral("alp"));
        QCOMPARE(page.proxy()->rowCount(), 1);
        search->clear();
        auto* precision = page.findChild<QComboBox*>(QStringLiteral("precisionFilter"));
        QVERIFY(precision->findData(QStringLiteral("bf16")) > 0); // choices come from the history
        precision->setCurrentIndex(precision->findData(QStringLiteral("bf16")));
        QCOMPARE(visibleNames(*page.proxy()), QStringList{"beta"});
        precision->setCurrentIndex(0);
        auto* status = page.findChild<QComboBox*>(QStringLiteral("statusFilter"));
        status->setCurrentIndex(status->findData(int(storage::RunStatus::Completed)));
        QCOMPARE(visibleNames(*page.proxy()), (QStringList{"alpha", "gamma"}));
        status->setCurrentIndex(0);

        // Edits land in the store and come back through the refresh.
        QVERIFY(page.renameRun(a, QStringLiteral("alpha-renamed")));
        QVERIFY(page.setRunTags(b, {QStringLiteral("keep"), QStringLiteral(" nan ")}));
        QVERIFY(page.setRunNotes(b, QStringLiteral("diverged at step 12")));
        QTRY_VERIFY(visibleNames(*page.model()).contains(QStringLiteral("alpha-renamed")));
        const int row = page.model()->rowOfRun(b);
        QTRY_COMPARE(page.model()->index(row, RunListModel::Tags).data().toString(), QStringLiteral("keep, nan"));
        auto store = storage::RunStore::open(db);
        QCOMPARE(store->run(b)->notes, std::string("diverged at step 12"));

        const QString csv = dir.filePath(QStringLiteral("alpha.csv"));
        QSignalSpy finished(&page, &ui::RunsPage::operationFinished);
        QVERIFY(page.exportRun(a, csv));
        QTRY_COMPARE(finished.count(), 1); // written on the history thread
        QCOMPARE(finished.first().at(1).toString(), QString());
        QFile file(csv);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(file.readLine().startsWith("run_id,rank,step,time,key,value"));
        QVERIFY(page.exportRun(a, dir.filePath(QStringLiteral("alpha.json"))));
        QVERIFY(page.exportRun(a, dir.filePath(QStringLiteral("no-such-folder/alpha.json"))));
        QTRY_COMPARE(finished.count(), 3);
        QCOMPARE(finished.at(1).at(1).toString(), QString());
        QVERIFY2(finished.at(2).at(1).toString().contains(QStringLiteral("cannot write")),
                 qPrintable(finished.at(2).at(1).toString()));

        QVERIFY(page.deleteRun(a));
        QTRY_COMPARE(page.model()->rowCount(), 2);
        QVERIFY(page.deleteRefusal({b}).isEmpty());

        // The Open button opens the current run.
        QSignalSpy opened(&page, &ui::RunsPage::runOpened);
        page.selectRun(b);
        QVERIFY(page.view()->currentIndex().isValid());
        QTest::mouseClick(page.findChild<QPushButton*>(QStringLiteral("openRun")), Qt::LeftButton);
        QCOMPARE(opened.count(), 1);
        QCOMPARE(opened.first().first().toLongLong(), b);
        // #45 point 2: Resume asks for the current run to go on (the main window launches it;
        // tst_run_page::resumeGoesOnWithTheSameRun drives that for real).
        QSignalSpy resumed(&page, &ui::RunsPage::resumeRequested);
        QTest::mouseClick(page.findChild<QPushButton*>(QStringLiteral("resumeRun")), Qt::LeftButton);
        QCOMPARE(resumed.count(), 1);
        QCOMPARE(resumed.first().first().toLongLong(), b);
    }

    // #45 point 10: deleting a running run asked, then refused in the store's jargon; now it is
    // refused before asking, saying what to do.
    // #45 point 11: config and recipe values as columns (W&B's run table). Columns… offers the
    // keys whose values differ between the runs; a chosen one is a column with each run's value,
    // sorted as a number where it is one.
    void settingsBecomeColumns()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        for (const auto& [name, lr] : {std::pair<const char*, const char*>{"slow", "0.0005"}, {"fast", "0.01"}, {"mid", "0.003"}})
            seedRun(db, {.name = name,
                         .recipeText = std::string("name: demo\noptimizer:\n  lr: ") + lr + "\ntraining:\n  max_steps: 100\n"});
        ui::RunsPage page(db);
        QTRY_COMPARE(page.model()->rowCount(), 3);
        QTRY_VERIFY(page.model()->differingSettings().contains(QStringLiteral("recipe.optimizer.lr")));
        QVERIFY(!page.model()->differingSettings().contains(QStringLiteral("recipe.training.max_steps"))); // the same in all
        auto* columns = page.findChild<QPushButton*>(QStringLiteral("settingColumns"));
        QVERIFY(columns && columns->menu());
        emit columns->menu()->aboutToShow();
        QAction* lr = nullptr;
        for (QAction* action : columns->menu()->actions())
            if (action->data().toString() == QStringLiteral("recipe.optimizer.lr"))
                lr = action;
        QVERIFY(lr && lr->isCheckable() && !lr->isChecked());
        QCOMPARE(lr->text(), QStringLiteral("recipe: optimizer.lr"));
        lr->setChecked(true);
        const int column = RunListModel::ColumnCount;
        QCOMPARE(page.model()->columnCount(), column + 1);
        QCOMPARE(page.model()->headerData(column, Qt::Horizontal).toString(), QStringLiteral("recipe: optimizer.lr"));
        QCOMPARE(page.model()->index(page.model()->rowOfRun(2), column).data().toString(), QStringLiteral("0.01"));
        page.proxy()->sort(column, Qt::AscendingOrder);
        QStringList order;
        for (int row = 0; row < page.proxy()->rowCount(); ++row)
            order << page.proxy()->index(row, RunListModel::Name).data().toString();
        QCOMPARE(order, (QStringList{"slow", "mid", "fast"})); // 0.0005 < 0.003 < 0.01, as numbers
        lr->setChecked(false);
        QCOMPARE(page.model()->columnCount(), column);
    }

    // #45 point 11: runs grouped by sweep or tag: the runs of one sweep side by side (groups in
    // name order, untagged last), sorted within it by the column chosen; the Group column says
    // which, and shows only while grouped.
    void runsGroupBySweepOrTag()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        seedRun(db, {.name = "a1", .tags = {"sweep:lr"}});
        seedRun(db, {.name = "plain"});
        seedRun(db, {.name = "b1", .tags = {"baseline"}});
        seedRun(db, {.name = "a2", .tags = {"keep", "sweep:lr"}});
        ui::RunsPage page(db);
        QTRY_COMPARE(page.model()->rowCount(), 4);
        auto* view = page.findChild<QTableView*>();
        QVERIFY(view->isColumnHidden(RunListModel::Group));
        auto* group = page.findChild<QCheckBox*>(QStringLiteral("groupRuns"));
        QVERIFY(group);
        group->setChecked(true);
        QVERIFY(!view->isColumnHidden(RunListModel::Group));
        page.proxy()->sort(RunListModel::Name, Qt::AscendingOrder);
        QStringList order, groups;
        for (int row = 0; row < page.proxy()->rowCount(); ++row) {
            order << page.proxy()->index(row, RunListModel::Name).data().toString();
            groups << page.proxy()->index(row, RunListModel::Group).data().toString();
        }
        QCOMPARE(order, (QStringList{"b1", "a1", "a2", "plain"}));
        QCOMPARE(groups, (QStringList{"baseline", "sweep:lr", "sweep:lr", ""}));
        group->setChecked(false);
        QVERIFY(view->isColumnHidden(RunListModel::Group));
        order.clear();
        for (int row = 0; row < page.proxy()->rowCount(); ++row)
            order << page.proxy()->index(row, RunListModel::Name).data().toString();
        QCOMPARE(order, (QStringList{"a1", "a2", "b1", "plain"}));
    }

    void runningRunIsRefusedInPlainWords()
    {
        QTemporaryDir dir;
        const auto db = std::filesystem::path(dir.path().toStdString()) / "history.sqlite";
        const auto live = seedRun(db, {.name = "live", .status = storage::RunStatus::Running});
        const auto done = seedRun(db, {.name = "done"});
        ui::RunsPage page(db);
        QTRY_COMPARE(page.model()->rowCount(), 2);
        const QString refusal = page.deleteRefusal({live, done});
        QVERIFY2(refusal.startsWith(QStringLiteral("live is still running: stop it first (Stop on its Run page)")),
                 qPrintable(refusal));
        QVERIFY(page.deleteRefusal({done}).isEmpty());
    }
};

QTEST_MAIN(TestRunsPage)
#include "tst_runs_page.moc"
