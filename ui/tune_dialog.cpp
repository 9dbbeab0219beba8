#include "ui/tune_dialog.h"

#include "ui/run_launcher.h"
#include "ui/shardscope_command.h"

#include <QDialogButtonBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <qcustomplot.h>

namespace shardscope::ui {

namespace {

QString mebibytes(double bytes) { return QStringLiteral("%1 MiB").arg(bytes / (1024.0 * 1024.0), 0, 'f', 2); }

} // namespace

TuneDialog::TuneDialog(const QString& recipePath, int numProcesses, const QString& mixedPrecision, const QString& outDir,
                       QWidget* parent)
    : QDialog(parent), m_recipePath(recipePath), m_numProcesses(numProcesses), m_mixedPrecision(mixedPrecision), m_outDir(outDir)
{
    setObjectName(QStringLiteral("tuneDialog"));
    setWindowTitle(tr("Tune %1 on %2 ranks").arg(QFileInfo(recipePath).fileName()).arg(numProcesses));
    auto* layout = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    m_budget = new QLineEdit(this);
    m_budget->setObjectName(QStringLiteral("tuneMemoryBudget"));
    m_budget->setPlaceholderText(tr("e.g. 300MB or 40GB"));
    m_budget->setToolTip(tr("What a rank may use: model states on CPU ranks (host and device memory are one there), the "
                            "device's peak on GPUs"));
    form->addRow(tr("Memory budget per rank"), m_budget);
    m_time = new QSpinBox(this);
    m_time->setObjectName(QStringLiteral("tuneTimeBudget"));
    m_time->setRange(10, 7 * 24 * 3600);
    m_time->setValue(600);
    m_time->setSuffix(tr(" s"));
    m_time->setToolTip(tr("For all trials together: the tuner stops there and reports what it measured"));
    form->addRow(tr("Time budget"), m_time);
    layout->addLayout(form);
    m_status = new QLabel(tr("Each candidate the estimate lets through runs a short trial, one at a time; the slower half "
                             "stops after each round. Every trial is a run in the history."),
                          this);
    m_status->setObjectName(QStringLiteral("tuneStatus"));
    m_status->setWordWrap(true);
    layout->addWidget(m_status);
    m_table = new QTableWidget(0, 6, this);
    m_table->setObjectName(QStringLiteral("tuneTable"));
    m_table->setHorizontalHeaderLabels({tr("Setup"), tr("Estimate"), tr("Measured"), tr("Tokens/s"), tr("Run"), tr("Result")});
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    layout->addWidget(m_table, 2);
    m_chart = new QCustomPlot(this);
    m_chart->setObjectName(QStringLiteral("tuneChart"));
    m_chart->setMinimumHeight(180);
    m_chart->xAxis->setLabel(tr("measured memory per rank (MiB)"));
    m_chart->yAxis->setLabel(tr("tokens/s"));
    for (int g = 0; g < 2; ++g) {
        auto* graph = m_chart->addGraph();
        graph->setLineStyle(QCPGraph::lsNone);
        graph->setScatterStyle(QCPScatterStyle(g == 0 ? QCPScatterStyle::ssCircle : QCPScatterStyle::ssStar,
                                               g == 0 ? QColor(0x4c, 0x72, 0xb0) : QColor(0xdd, 0x84, 0x52), g == 0 ? 6 : 14));
        graph->setName(g == 0 ? tr("trials") : tr("best"));
    }
    m_chart->legend->setVisible(true);
    layout->addWidget(m_chart, 1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_start = buttons->addButton(tr("Start"), QDialogButtonBox::ActionRole);
    m_start->setObjectName(QStringLiteral("tuneStart"));
    m_use = buttons->addButton(tr("Use this"), QDialogButtonBox::AcceptRole);
    m_use->setObjectName(QStringLiteral("tuneUse"));
    m_use->setToolTip(tr("Open the chosen config and recipe (new files the tuner wrote) in Configure"));
    m_use->setEnabled(false);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_start, &QPushButton::clicked, this, [this] {
        if (const QString why = start(m_budget->text(), m_time->value()); !why.isEmpty())
            m_status->setText(why);
    });
    connect(m_use, &QPushButton::clicked, this, [this] {
        emit useChosen(chosenConfig(), chosenRecipe());
        accept();
    });
    layout->addWidget(buttons);
    m_command = new ShardscopeCommand(this);
    connect(m_command, &ShardscopeCommand::finished, this, &TuneDialog::ended);
    resize(900, 640);
}

QString TuneDialog::start(const QString& memoryBudget, int timeBudgetSeconds)
{
    if (m_command->running())
        return tr("The tuner is running.");
    if (memoryBudget.trimmed().isEmpty())
        return tr("Give a memory budget per rank (e.g. 300MB).");
    m_start->setEnabled(false);
    m_use->setEnabled(false);
    m_status->setText(tr("Tuning… (every trial appears in Runs as it runs)"));
    m_command->start({QStringLiteral("tune"), QStringLiteral("--recipe"), m_recipePath, QStringLiteral("--num_processes"),
                      QString::number(m_numProcesses), QStringLiteral("--memory_budget"), memoryBudget.trimmed(),
                      QStringLiteral("--time_budget"), QString::number(timeBudgetSeconds), QStringLiteral("--mixed_precision"),
                      m_mixedPrecision.isEmpty() ? QStringLiteral("no") : m_mixedPrecision, QStringLiteral("--out"), m_outDir,
                      QStringLiteral("--json")});
    return {};
}

bool TuneDialog::running() const { return m_command->running(); }

void TuneDialog::ended(const CommandAnswer& answer)
{
    const QJsonObject report = answer.json.object();
    if (!report.isEmpty())
        showReport(report);
    const bool ok = answer.succeeded() && !report.isEmpty() && !report.value("best").isNull();
    m_start->setEnabled(true);
    // A tuner that cannot start never finishes: its answer says so, and the dialog waits no more.
    if (!ok)
        m_status->setText(!answer.started          ? tr("Cannot start %1: %2").arg(launcherProgram(), answer.error)
                          : answer.error.isEmpty() ? tr("The tuner found no setup.")
                                                   : answer.error);
    emit finished(ok);
}

int TuneDialog::trialRows() const { return m_table->rowCount(); }

QString TuneDialog::statusText() const { return m_status->text(); }

void TuneDialog::showReport(const QJsonObject& report)
{
    m_report = report;
    const QJsonArray candidates = report.value("candidates").toArray();
    m_table->setRowCount(0);
    QVector<double> memory, speed, bestMemory, bestSpeed;
    for (const auto& v : candidates) {
        const QJsonObject c = v.toObject();
        const bool ran = c.value("rounds").toInt() > 0;
        const bool isBest = ran && c.value("run") == report.value("best_run");
        const int row = m_table->rowCount();
        m_table->insertRow(row);
        const QStringList cells{(isBest ? QStringLiteral("★ ") : QString()) + c.value("setup").toString(),
                                mebibytes(c.value("estimate_bytes").toDouble()),
                                ran ? mebibytes(c.value("measured_bytes").toDouble()) : QStringLiteral("-"),
                                ran ? QLocale().toString(c.value("tokens_per_s").toDouble(), 'f', 0) : QStringLiteral("-"),
                                c.value("run").toString(),
                                isBest ? tr("best") : c.value("dropped").toString()};
        for (int col = 0; col < cells.size(); ++col)
            m_table->setItem(row, col, new QTableWidgetItem(cells[col]));
        if (ran) {
            (isBest ? bestMemory : memory) << c.value("measured_bytes").toDouble() / (1024.0 * 1024.0);
            (isBest ? bestSpeed : speed) << c.value("tokens_per_s").toDouble();
        }
    }
    m_chart->graph(0)->setData(memory, speed);
    m_chart->graph(1)->setData(bestMemory, bestSpeed);
    m_chart->rescaleAxes();
    m_chart->xAxis->scaleRange(1.2);
    m_chart->yAxis->scaleRange(1.2);
    m_chart->replot();
    const bool chosen = !report.value("best").isNull();
    m_use->setEnabled(chosen);
    m_status->setText(chosen ? tr("Best: %1 (%2 trials in %3 s%4). Wrote %5 and %6.")
                                   .arg(report.value("best").toString())
                                   .arg(report.value("trials_run").toInt())
                                   .arg(report.value("seconds").toDouble(), 0, 'f', 0)
                                   .arg(report.value("out_of_time").toBool() ? tr(", stopped by the time budget") : QString())
                                   .arg(report.value("config").toString(), report.value("recipe").toString())
                             : tr("No setup finished a trial."));
}

} // namespace shardscope::ui
