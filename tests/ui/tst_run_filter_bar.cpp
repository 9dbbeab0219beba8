// The Runs page's filters: the type, precision and tag choices offer what the listed runs have
// and keep a choice made while the list changes (back to "Any" when it is gone); each choice and
// the search filter the table's proxy; the count says how many of the runs are shown.

#include "ui/run_filter_bar.h"
#include "ui/run_list_model.h"

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QtTest>

using namespace shardscope;
using storage::RunStatus;

namespace {

storage::RunSummary run(std::int64_t id, const char* name, RunStatus status, const char* type, const char* precision,
                        std::vector<std::string> tags)
{
    storage::RunSummary r;
    r.id = id;
    r.name = name;
    r.status = status;
    r.distributedType = type;
    r.mixedPrecision = precision;
    r.tags = std::move(tags);
    return r;
}

std::vector<storage::RunSummary> threeRuns()
{
    return {run(1, "ddp-fp16", RunStatus::Completed, "MULTI_GPU", "fp16", {"sweep:a"}),
            run(2, "fsdp-bf16", RunStatus::Failed, "FSDP", "bf16", {"sweep:a", "big"}),
            run(3, "cpu-demo", RunStatus::Running, "MULTI_CPU", "no", {})};
}

QStringList choices(const QComboBox* box)
{
    QStringList items;
    for (int i = 0; i < box->count(); ++i)
        items << box->itemData(i).toString();
    return items;
}

} // namespace

class TestRunFilterBar : public QObject {
    Q_OBJECT

private slots:
    void choicesAreWhatTheRunsHave()
    {
        ui::RunListModel model;
        ui::RunFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        ui::RunFilterBar bar(&model, &proxy);
        model.setRuns(threeRuns());
        bar.updateChoices();
        auto* type = bar.findChild<QComboBox*>(QStringLiteral("typeFilter"));
        auto* precision = bar.findChild<QComboBox*>(QStringLiteral("precisionFilter"));
        auto* tag = bar.findChild<QComboBox*>(QStringLiteral("tagFilter"));
        QCOMPARE(choices(type), (QStringList{QString(), "FSDP", "MULTI_CPU", "MULTI_GPU"}));
        QCOMPARE(choices(precision), (QStringList{QString(), "bf16", "fp16", "no"}));
        QCOMPARE(choices(tag), (QStringList{QString(), "big", "sweep:a"}));
        auto* count = bar.findChild<QLabel*>(QStringLiteral("runCount"));
        QCOMPARE(count->text(), QStringLiteral("3 of 3 runs"));

        tag->setCurrentIndex(tag->findData(QStringLiteral("sweep:a")));
        QCOMPARE(proxy.rowCount(), 2);
        QCOMPARE(count->text(), QStringLiteral("2 of 3 runs"));
        // The list changes: the choice stays while a run has it...
        auto more = threeRuns();
        more.push_back(run(4, "tp-bf16", RunStatus::Pending, "FSDP", "bf16", {"sweep:a"}));
        model.setRuns(more);
        bar.updateChoices();
        QCOMPARE(tag->currentData().toString(), QStringLiteral("sweep:a"));
        QCOMPARE(count->text(), QStringLiteral("3 of 4 runs"));
        // ...and is "Any tag" once none has it.
        model.setRuns({run(5, "alone", RunStatus::Completed, "NO", "no", {})});
        bar.updateChoices();
        QCOMPARE(tag->currentIndex(), 0);
        QCOMPARE(choices(tag), QStringList{QString()});
    }

    void statusPrecisionAndSearchFilter()
    {
        ui::RunListModel model;
        ui::RunFilterProxyModel proxy;
        proxy.setSourceModel(&model);
        ui::RunFilterBar bar(&model, &proxy);
        model.setRuns(threeRuns());
        bar.updateChoices();
        auto* count = bar.findChild<QLabel*>(QStringLiteral("runCount"));
        auto* status = bar.findChild<QComboBox*>(QStringLiteral("statusFilter"));
        status->setCurrentIndex(status->findData(static_cast<int>(RunStatus::Failed)));
        QCOMPARE(count->text(), QStringLiteral("1 of 3 runs"));
        status->setCurrentIndex(0);
        auto* precision = bar.findChild<QComboBox*>(QStringLiteral("precisionFilter"));
        precision->setCurrentIndex(precision->findData(QStringLiteral("no")));
        QCOMPARE(count->text(), QStringLiteral("1 of 3 runs"));
        precision->setCurrentIndex(0);
        bar.findChild<QLineEdit*>(QStringLiteral("runSearch"))->setText(QStringLiteral("bf16"));
        QCOMPARE(proxy.rowCount(), 1);
        QCOMPARE(proxy.index(0, 0).data(ui::RunListModel::RunIdRole).toLongLong(), 2);
        QCOMPARE(count->text(), QStringLiteral("1 of 3 runs"));
    }
};

QTEST_MAIN(TestRunFilterBar)
#include "tst_run_filter_bar.moc"
