#include "ui/compare_page.h"

#include "ui/history_service.h"

#include "engine/plan/machine_probe.h"
#include "storage/config_diff.h"
#include "storage/run_store.h"
#include "ui/compare_models.h"
#include "ui/format.h"
#include "ui/metric_chart.h"
#include "ui/run_launcher.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <set>

namespace shardscope::ui {

namespace {

constexpr int kBuckets = 2000; // about two points per horizontal pixel of a wide chart

} // namespace

namespace {
// A viewer never changes a run's status (no recovery on open).
storage::StoreOptions viewerOptions()
{
    storage::StoreOptions options;
    options.markInterrupted = false;
    return options;
}
} // namespace

ComparePage::ComparePage(std::filesystem::path databaseFile, QWidget* parent, HistoryService* history)
    : QWidget(parent), m_databaseFile(std::move(databaseFile)), m_history(history ? history : new HistoryService(this)),
      m_store(std::make_shared<HistoryConnection>(m_databaseFile, viewerOptions()))
{
    auto* layout = new QHBoxLayout(this);
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    layout->addWidget(splitter);

    auto* left = new QWidget(splitter);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(new QLabel(tr("<b>Runs</b> (check to compare)"), left));
    m_picker = new QListWidget(left);
    m_picker->setObjectName(QStringLiteral("runPicker"));
    leftLayout->addWidget(m_picker, 1);
    auto* sweep = new QPushButton(tr("Precision sweep…"), left);
    sweep->setObjectName(QStringLiteral("precisionSweep"));
    sweep->setToolTip(tr("Launch one recipe in every precision mode and compare the runs"));
    leftLayout->addWidget(sweep);
    splitter->addWidget(left);

    auto* right = new QWidget(splitter);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel(tr("Metric"), right));
    m_metricBox = new QComboBox(right);
    m_metricBox->setObjectName(QStringLiteral("compareMetric"));
    m_metricBox->setMinimumContentsLength(20);
    bar->addWidget(m_metricBox);
    bar->addStretch(1);
    m_message = new QLabel(right);
    m_message->setObjectName(QStringLiteral("compareMessage"));
    bar->addWidget(m_message);
    rightLayout->addLayout(bar);

    auto* vsplit = new QSplitter(Qt::Vertical, right);
    m_chart = new MetricChart(tr("loss (rank 0) by step"), vsplit);
    m_chart->setObjectName(QStringLiteral("compareChart"));
    m_chart->setXLabel(tr("step"));
    vsplit->addWidget(m_chart);
    auto* tabs = new QTabWidget(vsplit);
    m_stats = new RunStatsModel(this);
    m_statsView = new QTableView(tabs);
    m_statsView->setObjectName(QStringLiteral("summaryTable"));
    m_statsView->setModel(m_stats);
    m_statsView->verticalHeader()->hide();
    m_statsView->horizontalHeader()->setStretchLastSection(true);
    m_statsView->setAlternatingRowColors(true);
    tabs->addTab(m_statsView, tr("Summary"));
    auto* diffPanel = new QWidget(tabs);
    auto* diffLayout = new QVBoxLayout(diffPanel);
    m_showIdentical = new QCheckBox(tr("Show identical keys"), diffPanel);
    m_showIdentical->setObjectName(QStringLiteral("showIdentical"));
    diffLayout->addWidget(m_showIdentical);
    m_diff = new ConfigDiffModel(this);
    m_diffView = new QTableView(diffPanel);
    m_diffView->setObjectName(QStringLiteral("diffTable"));
    m_diffView->setModel(m_diff);
    m_diffView->verticalHeader()->hide();
    m_diffView->horizontalHeader()->setStretchLastSection(true);
    m_diffView->setAlternatingRowColors(true);
    diffLayout->addWidget(m_diffView);
    tabs->addTab(diffPanel, tr("Config difference"));
    vsplit->addWidget(tabs);
    vsplit->setStretchFactor(0, 3);
    vsplit->setStretchFactor(1, 2);
    rightLayout->addWidget(vsplit, 1);
    splitter->addWidget(right);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({260, 1000});

    connect(m_picker, &QListWidget::itemChanged, this, [this] {
        std::vector<std::int64_t> ids;
        for (int i = 0; i < m_picker->count(); ++i)
            if (m_picker->item(i)->checkState() == Qt::Checked)
                ids.push_back(m_picker->item(i)->data(Qt::UserRole).toLongLong());
        if (ids != m_runIds) {
            m_runIds = ids;
            reloadComparison();
        }
    });
    connect(m_picker, &QListWidget::itemDoubleClicked, this,
            [this](QListWidgetItem* item) { emit runOpened(item->data(Qt::UserRole).toLongLong()); });
    connect(m_metricBox, &QComboBox::currentTextChanged, this, [this] { reloadComparison(); });
    connect(m_showIdentical, &QCheckBox::toggled, m_diff, &ConfigDiffModel::setShowIdentical);
    connect(sweep, &QPushButton::clicked, this, &ComparePage::showSweepDialog);

    // Live runs (a sweep in progress) are re-read every two seconds until they end.
    m_liveTimer = new QTimer(this);
    m_liveTimer->setInterval(2000);
    connect(m_liveTimer, &QTimer::timeout, this, [this] {
        checkSweep();
        reloadComparison();
    });
    // The run list stays current while the page is shown (new runs, runs that ended).
    m_listTimer = new QTimer(this);
    m_listTimer->setInterval(3000);
    connect(m_listTimer, &QTimer::timeout, this, &ComparePage::reloadRunList);
    reloadRunList();
}

ComparePage::~ComparePage() = default;

void ComparePage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    reloadRunList();
    m_listTimer->start();
}

void ComparePage::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    m_listTimer->stop();
}

void ComparePage::reloadRunList()
{
    using Listed = std::shared_ptr<Result<std::vector<storage::RunSummary>>>;
    m_history->submit<Listed>(
        this,
        [handle = m_store] {
            auto store = handle->get();
            if (!store)
                return std::make_shared<Result<std::vector<storage::RunSummary>>>(store.error());
            return std::make_shared<Result<std::vector<storage::RunSummary>>>((*store)->listRuns());
        },
        [this](Listed runs) {
            if (!*runs) {
                m_message->setText(qs(runs->error().message));
                return;
            }
            rememberRunColors(**runs);
            QStringList texts;
            for (const auto& run : **runs)
                texts << QStringLiteral("%1  %2 · %3 · %4")
                             .arg(run.id)
                             .arg(elidedName(qs(run.name)), qs(run.mixedPrecision), statusText(run.status));
            QStringList shown;
            for (int i = 0; i < m_picker->count(); ++i)
                shown << m_picker->item(i)->text();
            if (texts == shown)
                return; // nothing changed: keep the list (its scroll position, its selection)
            const QSignalBlocker blocker(m_picker);
            m_picker->clear();
            for (std::size_t i = 0; i < (*runs)->size(); ++i) {
                const auto& run = (**runs)[i];
                auto* item = new QListWidgetItem(texts[static_cast<qsizetype>(i)], m_picker);
                item->setToolTip(plainToolTip(qs(run.name)));
                item->setData(Qt::UserRole, QVariant::fromValue<qint64>(run.id));
                item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
                item->setCheckState(std::find(m_runIds.begin(), m_runIds.end(), run.id) != m_runIds.end() ? Qt::Checked
                                                                                                          : Qt::Unchecked);
            }
        });
}

void ComparePage::syncChecks()
{
    const QSignalBlocker blocker(m_picker);
    for (int i = 0; i < m_picker->count(); ++i) {
        const auto id = m_picker->item(i)->data(Qt::UserRole).toLongLong();
        m_picker->item(i)->setCheckState(std::find(m_runIds.begin(), m_runIds.end(), id) != m_runIds.end() ? Qt::Checked
                                                                                                           : Qt::Unchecked);
    }
}

void ComparePage::setRuns(const std::vector<std::int64_t>& runIds)
{
    m_runIds = runIds;
    reloadRunList();
    syncChecks();
    reloadComparison();
}

void ComparePage::setMetric(const QString& key)
{
    const int index = m_metricBox->findText(key);
    if (index >= 0)
        m_metricBox->setCurrentIndex(index);
}

// What the comparison shows, read on the history thread.
struct ComparePage::Comparison {
    std::vector<std::string> keys; // the union of the runs' metric keys
    QString metric; // the one charted
    std::vector<storage::RunStats> stats;
    QString error;
    QStringList names; // elided, for headers and legends
    QStringList fullNames;
    std::vector<std::int64_t> ids; // per run, as buckets
    std::vector<std::string> configs, recipes, ran; // ran: storage::ranAsYaml
    bool live = false;
    std::vector<std::vector<storage::SeriesBucket>> buckets; // per run, of `metric`, rank 0
};

void ComparePage::reloadComparison()
{
    const std::uint64_t generation = ++m_generation;
    m_history->submit<std::shared_ptr<Comparison>>(
        this,
        [handle = m_store, runIds = m_runIds, metric = m_metricBox->currentText()] {
            auto c = std::make_shared<Comparison>();
            auto store = handle->get();
            if (!store) {
                c->error = qs(store.error().message);
                return c;
            }
            storage::RunStore& s = **store;
            // Metric choices: the union of the runs' keys, loss first.
            std::set<std::string> keys;
            for (auto id : runIds)
                if (auto k = s.metricKeys(id))
                    keys.insert(k->begin(), k->end());
            c->keys.assign(keys.begin(), keys.end());
            c->metric = metric;
            if (c->metric.isEmpty() || !keys.count(c->metric.toStdString()))
                c->metric = keys.count("loss") ? QStringLiteral("loss") : (keys.empty() ? QString() : qs(*keys.begin()));
            for (auto id : runIds) {
                auto runStats = s.runStats(id);
                if (runStats)
                    c->stats.push_back(std::move(*runStats));
                else
                    c->error = qs(runStats.error().message);
                auto details = s.run(id);
                if (details) {
                    c->names << QStringLiteral("%1 (%2)").arg(elidedName(qs(details->summary.name))).arg(id);
                    c->fullNames << qs(details->summary.name);
                    c->configs.push_back(details->configText);
                    c->recipes.push_back(details->recipeText);
                    c->ran.push_back(storage::ranAsYaml(details->summary));
                    c->live = c->live || !storage::isTerminal(details->summary.status);
                }
                c->ids.push_back(id);
                auto buckets = s.downsampledSeries(id, 0, c->metric.toStdString(), kBuckets);
                c->buckets.push_back(buckets ? std::move(*buckets) : std::vector<storage::SeriesBucket>{});
            }
            return c;
        },
        [this, generation](std::shared_ptr<Comparison> c) {
            if (generation == m_generation) // an older answer: the runs or the metric changed since
                applyComparison(*c);
        });
}

void ComparePage::applyComparison(const Comparison& c)
{
    if (!c.error.isEmpty())
        m_message->setText(c.error);
    {
        const QSignalBlocker blocker(m_metricBox);
        m_metricBox->clear();
        for (const auto& key : c.keys)
            m_metricBox->addItem(qs(key));
        m_metricBox->setCurrentIndex(m_metricBox->findText(c.metric));
    }
    m_stats->setStats(c.stats);
    m_diff->setRows(c.names, buildConfigRows(c.configs, c.recipes, c.ran), c.fullNames);
    m_diffView->resizeColumnsToContents();
    m_statsView->resizeColumnsToContents();

    m_chart->removeSeries();
    m_chart->setFollowing(true);
    m_chart->setTitle(tr("%1 (rank 0) by step").arg(c.metric));
    for (std::size_t i = 0; i < c.buckets.size(); ++i) {
        const int series = m_chart->addSeries(i < static_cast<std::size_t>(c.names.size()) ? c.names[static_cast<int>(i)]
                                                                                           : QString(),
                                              runColor(i < c.ids.size() ? c.ids[i] : 0));
        QVector<double> xs, ys;
        for (const auto& b : c.buckets[i]) {
            // Both extremes of a bucket, in step order, so spikes survive the downsampling.
            if (b.count == 1 || b.minStep == b.maxStep) {
                xs << static_cast<double>(b.minStep);
                ys << b.minValue;
            } else if (b.minStep < b.maxStep) {
                xs << static_cast<double>(b.minStep) << static_cast<double>(b.maxStep);
                ys << b.minValue << b.maxValue;
            } else {
                xs << static_cast<double>(b.maxStep) << static_cast<double>(b.minStep);
                ys << b.maxValue << b.minValue;
            }
        }
        m_chart->appendPoints(series, xs, ys);
    }
    if (c.live || !m_sweepNames.isEmpty() || !m_sweepRunning.isEmpty())
        m_liveTimer->start();
    else
        m_liveTimer->stop();
    emit comparisonUpdated();
}

QString ComparePage::startPrecisionSweep(const LaunchRequest& base, const QStringList& modes)
{
    QString baseName = base.runName;
    if (baseName.isEmpty())
        baseName = QStringLiteral("sweep-%1").arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    QStringList errors;
    m_sweepNames.clear();
    m_sweepQueue.clear();
    m_sweepRunning.clear();
    for (const auto& mode : modes) {
        LaunchRequest request = base;
        request.runName = baseName + QLatin1Char('-') + mode;
        request.mixedPrecision = mode;
        request.tags << sweepTag(baseName); // one group in Runs (its tag filter)
        m_sweepQueue.push_back(request);
    }
    // One run at a time: runs sharing the machine's cores (or GPUs) would make their tokens/s and
    // wall times compare nothing (#21, problem 3), and a script may not cope with a second copy.
    launchNextQueued(errors);
    m_runIds.clear();
    const QString queued = m_sweepQueue.empty() ? QString() : tr(", %1 to follow one after another").arg(m_sweepQueue.size());
    m_message->setText(errors.isEmpty() ? tr("Sweep %1: %2 runs started%3").arg(baseName).arg(m_sweepNames.size()).arg(queued)
                                        : errors.join(QStringLiteral("; ")));
    if (!m_sweepNames.isEmpty())
        m_liveTimer->start();
    return errors.join(QStringLiteral("; "));
}

// Starts the queue's next run that can start; the reasons of those that could not go to `errors`.
void ComparePage::launchNextQueued(QStringList& errors)
{
    while (!m_sweepQueue.empty()) {
        const LaunchRequest request = m_sweepQueue.front();
        m_sweepQueue.erase(m_sweepQueue.begin());
        const auto result = launchDetached(request);
        if (result.started) {
            m_sweepNames << request.runName;
            m_sweepRunning = request.runName;
            emit sweepQueueChanged(queuedSweepNames());
            return;
        }
        errors << tr("%1: %2").arg(request.mixedPrecision, result.error);
    }
    emit sweepQueueChanged(queuedSweepNames());
}

QStringList ComparePage::queuedSweepNames() const
{
    QStringList names;
    for (const auto& request : m_sweepQueue)
        names << request.runName;
    return names;
}

void ComparePage::checkSweep()
{
    if (m_sweepNames.isEmpty() && m_sweepRunning.isEmpty())
        return;
    struct Seen {
        std::vector<std::pair<QString, std::int64_t>> resolved; // 0: not in the history yet
        bool runningEnded = false; // the sweep's current run
    };
    m_history->submit<std::shared_ptr<Seen>>(
        this,
        [handle = m_store, names = m_sweepNames, running = m_sweepRunning] {
            auto seen = std::make_shared<Seen>();
            auto store = handle->get();
            for (const auto& name : names) {
                auto id = store ? (*store)->resolveRun(name.toStdString()) : Result<std::int64_t>(store.error());
                seen->resolved.emplace_back(name, id ? *id : 0);
            }
            if (!running.isEmpty() && store)
                if (auto id = (*store)->resolveRun(running.toStdString()))
                    if (auto details = (*store)->run(*id))
                        seen->runningEnded = storage::isTerminal(details->summary.status);
            return seen;
        },
        [this, running = m_sweepRunning](std::shared_ptr<Seen> seen) {
            bool added = false;
            for (const auto& [name, id] : seen->resolved) {
                if (id == 0)
                    continue;
                m_sweepNames.removeAll(name);
                if (std::find(m_runIds.begin(), m_runIds.end(), id) == m_runIds.end()) {
                    m_runIds.push_back(id);
                    added = true;
                }
            }
            if (seen->runningEnded && running == m_sweepRunning) {
                m_sweepRunning.clear();
                QStringList errors;
                launchNextQueued(errors);
                if (!errors.isEmpty())
                    m_message->setText(errors.join(QStringLiteral("; ")));
                if (!m_sweepNames.isEmpty())
                    m_liveTimer->start();
            }
            if (added) {
                reloadRunList();
                syncChecks();
                reloadComparison();
            }
        });
}

void ComparePage::showSweepDialog()
{
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Precision sweep"));
    auto* form = new QFormLayout(&dialog);
    auto* recipe = new QLineEdit(&dialog);
    auto* browse = new QPushButton(tr("Browse…"), &dialog);
    auto* recipeRow = new QHBoxLayout;
    recipeRow->addWidget(recipe);
    recipeRow->addWidget(browse);
    connect(browse, &QPushButton::clicked, &dialog, [&] {
        const QString file = QFileDialog::getOpenFileName(&dialog, tr("Recipe or script"), {},
                                                          tr("Recipes and Accelerate scripts (*.yaml *.yml *.py)"));
        if (!file.isEmpty())
            recipe->setText(file);
    });
    recipe->setObjectName(QStringLiteral("sweepRecipe"));
    recipe->setPlaceholderText(tr("an engine recipe (.yaml) or your Accelerate script (.py)"));
    auto* config = new QLineEdit(&dialog);
    config->setPlaceholderText(tr("Accelerate config file (optional for a recipe, needed for a script)"));
    auto* scriptArgs = new QLineEdit(&dialog);
    scriptArgs->setPlaceholderText(tr("a script's arguments, as on a command line"));
    auto* python = new QLineEdit(&dialog);
    python->setPlaceholderText(tr("a script's Python (default: the active virtual environment, else python3)"));
    auto* processes = new QSpinBox(&dialog);
    processes->setRange(1, 64);
    processes->setValue(2);
    auto* steps = new QSpinBox(&dialog);
    steps->setRange(0, 10000000);
    steps->setSpecialValueText(tr("recipe's"));
    auto* name = new QLineEdit(&dialog);
    name->setPlaceholderText(tr("sweep-<date>-<time>"));
    auto* modesRow = new QHBoxLayout;
    std::vector<QCheckBox*> modeBoxes;
    for (const auto& mode : sweepPrecisionModes()) {
        auto* box = new QCheckBox(mode, &dialog);
        box->setChecked(true);
        if (mode == QLatin1String("fp8"))
            box->setToolTip(tr("fp8 matmuls: fast on Ada/Hopper GPUs, emulated (slower than bf16) on a CPU; "
                               "a script's fp8 (Accelerate's) runs only where an fp8 GPU is"));
        modesRow->addWidget(box);
        modeBoxes.push_back(box);
    }
    form->addRow(tr("Recipe or script"), recipeRow);
    form->addRow(tr("Config"), config);
    form->addRow(tr("Script arguments"), scriptArgs);
    form->addRow(tr("Python"), python);
    form->addRow(tr("Processes"), processes);
    form->addRow(tr("Max steps"), steps);
    form->addRow(tr("Name"), name);
    form->addRow(tr("Modes"), modesRow);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &dialog);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Launch"));
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    form->addRow(buttons);
    if (dialog.exec() != QDialog::Accepted || recipe->text().isEmpty())
        return;
    LaunchRequest request;
    const bool script = recipe->text().endsWith(QLatin1String(".py"));
    (script ? request.scriptFile : request.recipeFile) = recipe->text();
    if (script) {
        request.workerArgs = splitCommandLine(scriptArgs->text());
        request.python = python->text();
    }
    request.configFile = config->text();
    request.numProcesses = processes->value();
    if (steps->value() > 0 && !script) // a script takes its own step count, among its arguments
        request.maxSteps = steps->value();
    request.runName = name->text();
    // bf16-pure is a mode of the engine only; a script's fp8 is Accelerate's (torchao or Transformer
    // Engine in the script's Python), which needs an fp8 GPU: the engine's emulated fp8 is not it.
    const bool fp8Gpu = config::probeMachine().fp8Capable;
    QStringList modes;
    for (auto* box : modeBoxes)
        if (box->isChecked() && !(script && box->text() == QLatin1String("bf16-pure"))
            && !(script && box->text() == QLatin1String("fp8") && !fp8Gpu))
            modes << box->text();
    startPrecisionSweep(request, modes);
}

} // namespace shardscope::ui
