#include "ui/runs_page.h"

#include "storage/run_store.h"
#include "ui/cluster_catch_up.h"
#include "ui/format.h"
#include "ui/history_service.h"
#include "ui/run_filter_bar.h"
#include "ui/run_list_model.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QColorDialog>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <fstream>
#include <map>
#include <set>

namespace shardscope::ui {

RunsPage::RunsPage(std::filesystem::path databaseFile, QWidget* parent, HistoryService* history)
    : QWidget(parent), m_databaseFile(std::move(databaseFile)), m_history(history ? history : new HistoryService(this)),
      m_store(std::make_shared<HistoryConnection>(m_databaseFile, storage::StoreOptions{}))
{
    auto* layout = new QVBoxLayout(this);
    m_model = new RunListModel(this);
    m_proxy = new RunFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_filters = new RunFilterBar(m_model, m_proxy, this);
    layout->addWidget(m_filters);
    m_view = new QTableView(this);
    m_view->setObjectName(QStringLiteral("runTable"));
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(RunListModel::Id, Qt::DescendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->setAlternatingRowColors(true);
    m_view->setShowGrid(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 8);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->horizontalHeader()->setSectionResizeMode(RunListModel::Name, QHeaderView::Stretch);
    m_view->horizontalHeader()->setSectionResizeMode(RunListModel::Tags, QHeaderView::Interactive);
    m_view->setContextMenuPolicy(Qt::CustomContextMenu);
    // Runs a precision sweep has queued (they start one after another): not in the history yet.
    m_queued = new QLabel(this);
    m_queued->setObjectName(QStringLiteral("queuedRuns"));
    m_queued->setWordWrap(true);
    m_queued->hide();
    layout->addWidget(m_queued);
    layout->addWidget(m_view, 1);

    auto* buttons = new QHBoxLayout;
    auto addButton = [&](const QString& text, const QString& name, auto slot) {
        auto* button = new QPushButton(text, this);
        button->setObjectName(name);
        connect(button, &QPushButton::clicked, this, slot);
        buttons->addWidget(button);
        return button;
    };
    addButton(tr("Open"), QStringLiteral("openRun"), [this] {
        if (const auto id = currentRunId(); id > 0)
            emit runOpened(id);
    });
    addButton(tr("Compare"), QStringLiteral("compareRuns"), [this] { emit compareRequested(selectedRunIds()); });
    addButton(tr("Resume"), QStringLiteral("resumeRun"), [this] {
        if (const auto id = currentRunId(); id > 0)
            emit resumeRequested(id);
    })->setToolTip(tr("Go on with a failed or stopped run from its newest checkpoint, as the same run (its next attempt)"));
    buttons->addSpacing(16);
    addButton(tr("Rename…"), QStringLiteral("renameRun"), [this] { rename(); });
    addButton(tr("Colour…"), QStringLiteral("colorRun"), [this] { chooseColor(); });
    addButton(tr("Tags…"), QStringLiteral("tagRun"), [this] { editTags(); });
    addButton(tr("Notes…"), QStringLiteral("noteRun"), [this] { editNotes(); });
    addButton(tr("Export…"), QStringLiteral("exportRun"), [this] { exportCurrent(); });
    addButton(tr("Delete"), QStringLiteral("deleteRun"), [this] { removeSelected(); });
    buttons->addStretch(1);
    auto* group = new QCheckBox(tr("Group by sweep or tag"), this);
    group->setObjectName(QStringLiteral("groupRuns"));
    group->setToolTip(tr("The runs of one sweep (its sweep: tag), or of one first tag, side by side"));
    connect(group, &QCheckBox::toggled, this, [this](bool on) {
        m_proxy->setGrouped(on);
        m_view->setColumnHidden(RunListModel::Group, !on);
    });
    // The Group column only while grouped (a reset of the columns shows every section again).
    m_view->setColumnHidden(RunListModel::Group, true);
    connect(m_model, &QAbstractItemModel::modelReset, this,
            [this] { m_view->setColumnHidden(RunListModel::Group, !m_proxy->grouped()); });
    buttons->addWidget(group);
    // Config and recipe values as columns (W&B's run table): the keys that differ between runs.
    auto* columns = addButton(tr("Columns…"), QStringLiteral("settingColumns"), [] {});
    columns->setToolTip(tr("Show config or recipe values as columns: the keys whose values differ between the runs"));
    m_columnsMenu = new QMenu(columns);
    m_columnsMenu->setObjectName(QStringLiteral("settingColumnsMenu"));
    columns->setMenu(m_columnsMenu);
    connect(m_columnsMenu, &QMenu::aboutToShow, this, &RunsPage::fillColumnsMenu);
    addButton(tr("Refresh"), QStringLiteral("refreshRuns"), [this] { refresh(); });
    layout->addLayout(buttons);

    connect(m_view, &QTableView::doubleClicked, this,
            [this](const QModelIndex& index) { emit runOpened(index.data(RunListModel::RunIdRole).toLongLong()); });
    connect(m_view, &QTableView::customContextMenuRequested, this, &RunsPage::showContextMenu);
    auto* deleteAction = new QAction(this);
    deleteAction->setShortcut(QKeySequence::Delete);
    deleteAction->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    connect(deleteAction, &QAction::triggered, this, [this] { removeSelected(); });
    m_view->addAction(deleteAction);

    // Runs launched from a terminal or another window show up without a click.
    m_refreshTimer = new QTimer(this);
    m_refreshTimer->setInterval(3000);
    connect(m_refreshTimer, &QTimer::timeout, this, &RunsPage::refresh);
    m_refreshTimer->start();
    m_catchUp = new ClusterCatchUp(m_databaseFile, this);
    connect(m_catchUp, &ClusterCatchUp::finished, this, [this](const QString& said, int started) {
        if (started > 0)
            refresh();
        emit clusterCatchUpFinished(said, started);
    });
    refresh();
}

void RunsPage::catchUpWithClusterRuns() { m_catchUp->start(); }

void RunsPage::setQueuedRuns(const QStringList& names)
{
    m_queuedNames = names;
    QStringList shown;
    for (const auto& name : names)
        shown << elidedName(name).toHtmlEscaped();
    m_queued->setText(tr("<b>Queued</b> (a precision sweep runs its modes one after another; filter by its "
                         "<i>sweep:</i> tag to see it as one group): %1")
                          .arg(shown.join(QStringLiteral(", "))));
    m_queued->setToolTip(names.join(QLatin1Char('\n')));
    m_queued->setVisible(!names.isEmpty());
}

QStringList RunsPage::queuedRuns() const { return m_queuedNames; }

void RunsPage::refresh()
{
    const int generation = ++m_generation;
    struct Listed {
        std::vector<storage::RunSummary> runs;
        std::map<std::int64_t, RunListModel::Settings> settings; // of runs not seen before
        QString error;
    };
    std::set<std::int64_t> known;
    for (const auto& run : m_model->runs())
        if (m_model->hasSettings(run.id))
            known.insert(run.id);
    m_history->submit<std::shared_ptr<Listed>>(
        this,
        [handle = m_store, known] {
            auto listed = std::make_shared<Listed>();
            auto store = handle->get();
            if (!store) {
                listed->error = qs(store.error().message);
                return listed;
            }
            // Runs whose launcher died are marked interrupted, as every opener of the store does.
            (void)(*store)->markInterruptedRuns();
            if (auto runs = (*store)->listRuns(); !runs)
                listed->error = qs(runs.error().message);
            else
                listed->runs = std::move(*runs);
            // A run's config and recipe never change: read once per run.
            std::vector<std::int64_t> unseen;
            for (const auto& run : listed->runs)
                if (!known.count(run.id))
                    unseen.push_back(run.id);
            if (auto settings = (*store)->runSettings(unseen))
                for (auto& [id, values] : *settings)
                    for (auto& [key, value] : values)
                        listed->settings[id][qs(key)] = qs(value);
            return listed;
        },
        [this, generation](std::shared_ptr<Listed> listed) {
            if (m_generation != generation)
                return;
            m_model->addSettings(listed->settings);
            applyRuns(std::move(listed->runs), listed->error);
        });
}

void RunsPage::applyRuns(std::vector<storage::RunSummary> runs, const QString& error)
{
    if (!error.isEmpty()) {
        fail(error);
        return;
    }
    const auto selected = selectedRunIds();
    const bool first = m_model->rowCount() == 0;
    m_model->setRuns(std::move(runs));
    if (first)
        m_view->resizeColumnsToContents();
    m_filters->updateChoices();
    if (!selected.empty() && selectedRunIds().empty())
        selectRun(selected.front());
    emit runsLoaded();
}

void RunsPage::fillColumnsMenu()
{
    m_columnsMenu->clear();
    const QStringList shown = m_model->settingColumns();
    QStringList keys = m_model->differingSettings();
    for (const QString& key : shown) // a chosen key stays offered even if the runs now agree on it
        if (!keys.contains(key))
            keys << key;
    if (keys.isEmpty()) {
        m_columnsMenu->addAction(tr("(every run has the same config and recipe)"))->setEnabled(false);
        return;
    }
    for (const QString& key : keys) {
        QString label = key;
        label.replace(label.indexOf(QLatin1Char('.')), 1, QStringLiteral(": "));
        QAction* action = m_columnsMenu->addAction(label);
        action->setCheckable(true);
        action->setChecked(shown.contains(key));
        action->setData(key);
        connect(action, &QAction::toggled, this, [this, key](bool on) {
            QStringList columns = m_model->settingColumns();
            if (on && !columns.contains(key))
                columns << key;
            else if (!on)
                columns.removeAll(key);
            m_model->setSettingColumns(columns);
        });
    }
}

std::vector<std::int64_t> RunsPage::selectedRunIds() const
{
    std::vector<std::int64_t> ids;
    if (!m_view->selectionModel())
        return ids;
    for (const auto& index : m_view->selectionModel()->selectedRows())
        ids.push_back(index.data(RunListModel::RunIdRole).toLongLong());
    std::sort(ids.begin(), ids.end());
    return ids;
}

void RunsPage::selectRun(std::int64_t runId)
{
    const int row = m_model->rowOfRun(runId);
    if (row < 0)
        return;
    const auto index = m_proxy->mapFromSource(m_model->index(row, 0));
    if (index.isValid()) {
        m_view->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        m_view->setCurrentIndex(index);
    }
}

std::int64_t RunsPage::currentRunId() const
{
    const auto index = m_view->currentIndex();
    return index.isValid() ? index.data(RunListModel::RunIdRole).toLongLong() : 0;
}

void RunsPage::onStore(const QString& operation, bool tellUser, StoreOperation job)
{
    m_history->submit<QString>(
        this,
        [handle = m_store, job = std::move(job)] {
            auto store = handle->get();
            if (!store)
                return qs(store.error().message);
            auto done = job(**store);
            return done ? QString() : qs(done.error().message);
        },
        [this, operation, tellUser](QString error) {
            if (!error.isEmpty()) {
                fail(error);
                if (tellUser)
                    QMessageBox::warning(this, tr("Run history"), error);
            }
            refresh();
            emit operationFinished(operation, error);
        });
}

bool RunsPage::fail(const QString& message)
{
    m_lastError = message;
    emit errorOccurred(message);
    return false;
}

bool RunsPage::renameRun(std::int64_t runId, const QString& name)
{
    if (name.trimmed().isEmpty())
        return fail(tr("A run name cannot be empty."));
    onStore(QStringLiteral("rename"), m_fromDialog,
            [runId, name = name.toStdString()](storage::RunStore& s) { return s.renameRun(runId, name); });
    return true;
}

bool RunsPage::setRunColor(std::int64_t runId, const QColor& color)
{
    const std::string stored = color.isValid() ? color.name(QColor::HexRgb).toStdString() : std::string();
    onStore(QStringLiteral("colour"), m_fromDialog,
            [runId, stored](storage::RunStore& s) { return s.setRunColor(runId, stored); });
    return true;
}

bool RunsPage::setRunTags(std::int64_t runId, const QStringList& tags)
{
    std::vector<std::string> values;
    for (const auto& tag : tags)
        if (!tag.trimmed().isEmpty())
            values.push_back(tag.trimmed().toStdString());
    onStore(QStringLiteral("tags"), m_fromDialog, [runId, values](storage::RunStore& s) { return s.setTags(runId, values); });
    return true;
}

bool RunsPage::setRunNotes(std::int64_t runId, const QString& notes)
{
    onStore(QStringLiteral("notes"), m_fromDialog,
            [runId, notes = notes.toStdString()](storage::RunStore& s) { return s.setNotes(runId, notes); });
    return true;
}

bool RunsPage::deleteRun(std::int64_t runId)
{
    onStore(QStringLiteral("delete"), m_fromDialog, [runId](storage::RunStore& s) { return s.deleteRun(runId, true); });
    return true;
}

bool RunsPage::exportRun(std::int64_t runId, const QString& file)
{
    const bool json = file.endsWith(QLatin1String(".json"), Qt::CaseInsensitive);
    onStore(QStringLiteral("export"), m_fromDialog,
            [runId, json, path = file.toStdString()](storage::RunStore& s) -> Result<void> {
                std::ofstream out(path, std::ios::binary | std::ios::trunc);
                if (!out)
                    return makeError("cannot write " + path + "; choose a folder you can write to");
                auto done = json ? s.exportJson(runId, out) : s.exportCsv(runId, out);
                if (!done)
                    return done;
                out.close();
                if (!out)
                    return makeError("writing " + path + " failed (is the disk full?)");
                return {};
            });
    return true;
}

void RunsPage::showContextMenu(const QPoint& pos)
{
    if (!m_view->indexAt(pos).isValid())
        return;
    QMenu menu(this);
    menu.addAction(tr("Open"), this, [this] { emit runOpened(currentRunId()); });
    menu.addAction(tr("Compare selected"), this, [this] { emit compareRequested(selectedRunIds()); });
    menu.addSeparator();
    menu.addAction(tr("Rename…"), this, &RunsPage::rename);
    menu.addAction(tr("Colour…"), this, &RunsPage::chooseColor);
    menu.addAction(tr("Default colour"), this, [this] {
        for (const auto id : selectedRunIds())
            setRunColor(id, QColor());
    });
    menu.addAction(tr("Tags…"), this, &RunsPage::editTags);
    menu.addAction(tr("Notes…"), this, &RunsPage::editNotes);
    menu.addAction(tr("Export…"), this, &RunsPage::exportCurrent);
    menu.addSeparator();
    menu.addAction(tr("Delete"), this, &RunsPage::removeSelected);
    menu.exec(m_view->viewport()->mapToGlobal(pos));
}

void RunsPage::rename()
{
    const auto id = currentRunId();
    const auto* run = m_model->runAt(m_model->rowOfRun(id));
    if (!run)
        return;
    bool ok = false;
    const QString name = QInputDialog::getText(this, tr("Rename run"), tr("Name:"), QLineEdit::Normal, qs(run->name), &ok);
    const FromDialog asked(m_fromDialog);
    if (ok && !renameRun(id, name))
        QMessageBox::warning(this, tr("Rename run"), m_lastError);
}

void RunsPage::chooseColor()
{
    const auto id = currentRunId();
    if (id <= 0)
        return;
    const QColor color = QColorDialog::getColor(runColor(id), this, tr("Colour of the run on every page"));
    const FromDialog asked(m_fromDialog);
    if (color.isValid() && !setRunColor(id, color))
        QMessageBox::warning(this, tr("Run colour"), m_lastError);
}

void RunsPage::editTags()
{
    const auto id = currentRunId();
    const auto* run = m_model->runAt(m_model->rowOfRun(id));
    if (!run)
        return;
    QStringList tags;
    for (const auto& tag : run->tags)
        tags << qs(tag);
    bool ok = false;
    const QString text = QInputDialog::getText(this, tr("Tags"), tr("Tags, separated by commas:"), QLineEdit::Normal,
                                               tags.join(QStringLiteral(", ")), &ok);
    const FromDialog asked(m_fromDialog);
    if (ok && !setRunTags(id, text.split(QLatin1Char(','), Qt::SkipEmptyParts)))
        QMessageBox::warning(this, tr("Tags"), m_lastError);
}

void RunsPage::editNotes()
{
    const auto id = currentRunId();
    if (id <= 0)
        return;
    // The notes are read on the history thread; the dialog opens when they are here.
    m_history->submit<QString>(
        this,
        [handle = m_store, id] {
            auto store = handle->get();
            if (!store)
                return QString();
            auto details = (*store)->run(id);
            return details ? qs(details->notes) : QString();
        },
        [this, id](QString notes) {
            bool ok = false;
            const QString text = QInputDialog::getMultiLineText(this, tr("Notes"), tr("Notes for this run:"), notes, &ok);
            const FromDialog asked(m_fromDialog);
            if (ok)
                setRunNotes(id, text);
        });
}

QString RunsPage::deleteRefusal(const std::vector<std::int64_t>& ids) const
{
    QStringList live;
    for (const auto id : ids)
        if (const auto* run = m_model->runAt(m_model->rowOfRun(id)); run && !storage::isTerminal(run->status))
            live << QString::fromStdString(run->name);
    if (live.isEmpty())
        return {};
    return (live.size() == 1 ? tr("%1 is still running: stop it first (Stop on its Run page), then delete it.")
                             : tr("%1 are still running: stop them first (Stop on their Run pages), then delete them."))
               .arg(live.join(QStringLiteral(", ")))
           + tr(" A run whose launcher was killed shows as interrupted once the workbench is opened again, and can be "
                "deleted then.");
}

void RunsPage::removeSelected()
{
    const auto ids = selectedRunIds();
    if (ids.empty())
        return;
    // Refused before asking (it asked, then refused in the store's words).
    if (const QString refusal = deleteRefusal(ids); !refusal.isEmpty()) {
        QMessageBox::information(this, tr("Delete runs"), refusal);
        return;
    }
    if (QMessageBox::question(
            this, tr("Delete runs"),
            tr("Delete %n run(s) with their run directories? This cannot be undone.", nullptr, static_cast<int>(ids.size())))
        != QMessageBox::Yes)
        return;
    const FromDialog asked(m_fromDialog);
    for (const auto id : ids)
        if (!deleteRun(id))
            QMessageBox::warning(this, tr("Delete runs"), m_lastError);
}

void RunsPage::exportCurrent()
{
    const auto id = currentRunId();
    const auto* run = m_model->runAt(m_model->rowOfRun(id));
    if (!run)
        return;
    const QString file = QFileDialog::getSaveFileName(this, tr("Export run"), qs(run->name) + QStringLiteral(".json"),
                                                      tr("JSON (*.json);;CSV metrics (*.csv)"));
    const FromDialog asked(m_fromDialog);
    if (!file.isEmpty() && !exportRun(id, file))
        QMessageBox::warning(this, tr("Export run"), m_lastError);
}

} // namespace shardscope::ui
