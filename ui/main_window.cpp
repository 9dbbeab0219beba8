#include "ui/main_window.h"

#include "ui/format.h"
#include "ui/launch_controller.h"

#include "ui/history_service.h"

#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "ui/cluster_catch_up.h"
#include "ui/compare_page.h"
#include "ui/configure_page.h"
#include "ui/run_page.h"
#include "ui/runs_page.h"
#include "ui/trace_page.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QMessageBox>
#include <QListWidget>
#include <QSettings>
#include <QScreen>
#include <QGuiApplication>
#include <QStackedWidget>
#include <QStatusBar>
#include <QVBoxLayout>

#include <algorithm>

namespace shardscope::ui {

namespace {

std::filesystem::path defaultDatabase()
{
    auto home = storage::shardscopeHome();
    return home ? storage::historyFile(*home) : std::filesystem::path("history.sqlite");
}

} // namespace

QString MainWindow::pageHelp(Mode mode)
{
    switch (mode) {
    case Mode::Configure:
        return tr("Configure: the Accelerate config (the questions of `accelerate config`, the YAML it writes) and the "
                  "recipe to train, checked for this machine, with the per-rank memory each choice costs; then Launch.");
    case Mode::Runs:
        return tr("Runs: every run in the history. Search, tag, rename, delete; double-click opens one in Run, select "
                  "several to Compare.");
    case Mode::Run:
        return tr("Run: one run, live or finished: loss, learning rate, gradient norm, fp16 loss scale, throughput, "
                  "step time and memory per rank, and each rank's log. Hover a chart for its values.");
    case Mode::Compare:
        return tr("Compare: runs side by side: curves, final numbers and what differed in how they ran. A precision "
                  "sweep runs one recipe or script in every mode, one after another.");
    case Mode::Trace:
        return tr("Trace: where a step's time goes, per rank: compute, communication and how much of it is hidden "
                  "behind compute (Holistic Trace Analysis' definitions). Launch with Profile to record one.");
    }
    return {};
}

MainWindow::MainWindow(QWidget* parent, std::filesystem::path databaseFile)
    : QMainWindow(parent), m_databaseFile(databaseFile.empty() ? defaultDatabase() : std::move(databaseFile))
{
    setWindowTitle(tr("Shardscope"));

    auto* central = new QWidget(this);
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);

    m_modeBar = new QListWidget(central);
    m_modeBar->setObjectName(QStringLiteral("modeBar"));
    m_modeBar->setFixedWidth(120);
    m_modeBar->setFrameShape(QFrame::NoFrame);
    m_modeBar->setStyleSheet(QStringLiteral(
        "QListWidget#modeBar { background: #2f3136; color: #e0e0e0; font-weight: bold; padding-top: 8px; }"
        "QListWidget#modeBar::item { padding: 14px 10px; }"
        "QListWidget#modeBar::item:selected { background: #4a4d55; color: white; border-left: 3px solid #4f9cf0; }"));
    // Before the pages: the last to be asked anything, the first child destroyed (its answers
    // to pages are dropped with it).
    m_history = new HistoryService(this);
    m_pages = new QStackedWidget(central);
    m_pages->setObjectName(QStringLiteral("pages"));

    m_runsPage = new RunsPage(m_databaseFile, m_pages, m_history);
    m_runPage = new RunPage(m_pages, m_history);
    m_comparePage = new ComparePage(m_databaseFile, m_pages, m_history);
    m_configurePage = new ConfigurePage(m_databaseFile, m_pages, m_history);
    m_configurePage->restoreLastFiles();
    m_runPage->setLayoutSettingsFile(m_configurePage->settingsFile());
    m_tracePage = new TracePage(m_pages);

    for (int i = 0; i < kModeCount; ++i) {
        const auto mode = static_cast<Mode>(i);
        m_modeBar->addItem(modeName(mode));
        m_modeBar->item(i)->setToolTip(tr("%1 (%2)").arg(
            modeName(mode), QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)).toString(QKeySequence::NativeText)));
        QWidget* page = nullptr;
        switch (mode) {
        case Mode::Runs:
            page = m_runsPage;
            break;
        case Mode::Run:
            page = m_runPage;
            break;
        case Mode::Compare:
            page = m_comparePage;
            break;
        case Mode::Configure:
            page = m_configurePage;
            break;
        case Mode::Trace:
            page = m_tracePage;
            break;
        }
        page->setObjectName(QStringLiteral("page_%1").arg(modeName(mode)));
        m_pages->addWidget(page);
        // Ctrl+1 .. Ctrl+5 switch modes, as in Qt Creator.
        auto* action = new QAction(modeName(mode), this);
        action->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
        connect(action, &QAction::triggered, this, [this, mode] { showMode(mode); });
        addAction(action);
    }
    // The mode bar, and under it the window's shortcuts (they existed, and nothing showed them).
    auto* modeColumn = new QVBoxLayout;
    modeColumn->setContentsMargins(0, 0, 0, 0);
    modeColumn->addWidget(m_modeBar, 1);
    m_shortcutsHelp = new QLabel(central);
    m_shortcutsHelp->setObjectName(QStringLiteral("shortcutsHelp"));
    m_shortcutsHelp->setStyleSheet(QStringLiteral("QLabel#shortcutsHelp { color: #80868b; font-size: 9pt; }"));
    m_shortcutsHelp->setFixedWidth(m_modeBar->width());
    m_shortcutsHelp->setWordWrap(true);
    modeColumn->addWidget(m_shortcutsHelp);
    layout->addLayout(modeColumn);
    // Above the page: what it is for, in a line (new users asked for it).
    auto* pageColumn = new QVBoxLayout;
    pageColumn->setContentsMargins(8, 4, 0, 0);
    pageColumn->setSpacing(2);
    m_pageHelp = new QLabel(central);
    m_pageHelp->setObjectName(QStringLiteral("pageHelp"));
    m_pageHelp->setStyleSheet(QStringLiteral("QLabel#pageHelp { color: #5f6368; }"));
    m_pageHelp->setWordWrap(true);
    pageColumn->addWidget(m_pageHelp);
    pageColumn->addWidget(m_pages, 1);
    layout->addLayout(pageColumn, 1);
    setCentralWidget(central);

    addWindowActions();

    connect(m_modeBar, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row < 0)
            return;
        m_pages->setCurrentIndex(row);
        m_pageHelp->setText(pageHelp(static_cast<Mode>(row)));
        emit modeChanged(static_cast<Mode>(row));
    });
    connect(m_runsPage, &RunsPage::runOpened, this, &MainWindow::openRun);
    connectRunPageEnds();
    connect(m_comparePage, &ComparePage::runOpened, this, &MainWindow::openRun);
    connect(m_comparePage, &ComparePage::sweepQueueChanged, m_runsPage, &RunsPage::setQueuedRuns);
    connect(m_configurePage, &ConfigurePage::runOpened, this, &MainWindow::openRun);
    connect(m_configurePage, &ConfigurePage::runLaunched, m_runsPage, &RunsPage::refresh);
    connect(m_runsPage, &RunsPage::compareRequested, this, [this](const std::vector<std::int64_t>& ids) {
        m_comparePage->setRuns(ids);
        showMode(Mode::Compare);
    });
    connect(m_runsPage, &RunsPage::errorOccurred, this,
            [this](const QString& message) { statusBar()->showMessage(message, 10000); });
    connect(m_runsPage, &RunsPage::runsLoaded, m_runPage, &RunPage::updateRunColor); // a colour chosen in Runs
    connect(m_runPage, &RunPage::pollFailed, this, [this](const QString& message) { statusBar()->showMessage(message, 10000); });
    statusBar()->showMessage(tr("History: %1").arg(QString::fromStdString(m_databaseFile.string())));
    catchUpWithClusterRuns();

    restoreWindowGeometry();
    m_modeBar->setCurrentRow(0);
}

void MainWindow::addWindowActions()
{
    auto* openDir = new QAction(tr("Open run directory…"), this);
    openDir->setShortcut(QKeySequence::Open);
    connect(openDir, &QAction::triggered, this, &MainWindow::openRunDirectory);
    addAction(openDir);
    auto* openTrace = new QAction(tr("Open trace…"), this);
    openTrace->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_T));
    connect(openTrace, &QAction::triggered, this, [this] {
        showMode(Mode::Trace);
        m_tracePage->openTraceFileDialog();
    });
    addAction(openTrace);
    auto* refresh = new QAction(tr("Refresh"), this);
    refresh->setShortcut(QKeySequence::Refresh);
    connect(refresh, &QAction::triggered, m_runsPage, &RunsPage::refresh);
    addAction(refresh);
    showShortcuts();
}

void MainWindow::showShortcuts()
{
    // From the window's actions themselves, so the list cannot drift from what the keys do.
    QStringList lines{tr("Shortcuts:")};
    for (const QAction* action : actions())
        if (!action->shortcut().isEmpty())
            lines << QStringLiteral("%1  %2").arg(action->shortcut().toString(QKeySequence::NativeText),
                                                  action->text().remove(QLatin1Char('&')).remove(QStringLiteral("…")));
    m_shortcutsHelp->setText(lines.join(QLatin1Char('\n')));
}

void MainWindow::catchUpWithClusterRuns()
{
    // Cluster jobs go on while no workbench is open, and may have been submitted from another
    // machine: their followers start now, and their runs appear in Runs as they record.
    connect(m_runsPage, &RunsPage::clusterCatchUpFinished, this, [this](const QString& said, int started) {
        if (started > 0)
            statusBar()->showMessage(said, 30000);
    });
    m_runsPage->catchUpWithClusterRuns();
}

void MainWindow::connectRunPageEnds()
{
    // A profiled run's traces are written as its profile window ends: when a run seen live ends,
    // the Trace page looks again (it looked when the run opened, before there were any).
    connect(m_runPage, &RunPage::runFinished, this, [this] {
        if (m_runPage->runId() > 0 && m_runPage->sawRunLive())
            showRunTraces(m_runPage->runId());
    });
    // Resume, from Runs or the Run page: the launcher goes on with the run (--continue_run); its
    // page opens once the next attempt runs, and what went wrong otherwise goes to the status bar.
    m_resumes = new LaunchController(m_databaseFile, m_history, this);
    connect(m_resumes, &LaunchController::runOpened, this, &MainWindow::openRun);
    connect(m_resumes, &LaunchController::message, this,
            [this](const QString& text, bool error) { statusBar()->showMessage(text, error ? 30000 : 10000); });
    auto resume = [this](std::int64_t runId) {
        LaunchRequest request;
        request.continueRun = QString::number(runId);
        if (const QString refused = m_resumes->start(request); !refused.isEmpty())
            statusBar()->showMessage(refused, 30000);
    };
    connect(m_runsPage, &RunsPage::resumeRequested, this, resume);
    connect(m_runPage, &RunPage::resumeRequested, this, resume);
}

QString MainWindow::settingsFile() const { return qs((m_databaseFile.parent_path() / "workbench.ini").string()); }

QRect MainWindow::fittedGeometry(const QRect& wanted, const QRect& available)
{
    QRect fitted(wanted.topLeft(), wanted.size().boundedTo(available.size()));
    // Inside the screen: a geometry saved on a larger one, or partly off it, moves back in.
    fitted.moveLeft(std::clamp(fitted.left(), available.left(), available.right() - fitted.width() + 1));
    fitted.moveTop(std::clamp(fitted.top(), available.top(), available.bottom() - fitted.height() + 1));
    return fitted;
}

void MainWindow::restoreWindowGeometry()
{
    // Beside the history with the workbench's other settings (a big screen's geometry kept in
    // ~/.config came back on a laptop), and always inside the screen it opens on: a first start
    // opens at 1280x800 or 90 % of a smaller screen, centred.
    QSettings settings(settingsFile(), QSettings::IniFormat);
    const bool restored = restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    const QScreen* screen = QGuiApplication::primaryScreen();
    if (!screen)
        return;
    const QRect available = screen->availableGeometry();
    if (!restored) {
        const QSize first = QSize(1280, 800).boundedTo(available.size() * 0.9);
        setGeometry(QRect(available.center() - QPoint(first.width() / 2, first.height() / 2), first));
        return;
    }
    if (!isMaximized() && !isFullScreen())
        setGeometry(fittedGeometry(geometry(), available));
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    // A run goes on without the window (its launcher records it): say so before closing, and
    // how to stop it instead (closing said nothing, and users thought the run had stopped).
    if (const QString live = m_runPage->liveRunName(); !live.isEmpty()) {
        QMessageBox ask(QMessageBox::Question, tr("Close Shardscope?"),
                        tr("Run %1 is still running. It goes on without the workbench, and its launcher keeps "
                           "recording it: open Shardscope again to watch it. To end it, press Stop on its page "
                           "first.")
                            .arg(live),
                        QMessageBox::Cancel, this);
        ask.setObjectName(QStringLiteral("closeWhileRunning"));
        QPushButton* close = ask.addButton(tr("Close, the run goes on"), QMessageBox::AcceptRole);
        ask.setDefaultButton(QMessageBox::Cancel);
        ask.exec();
        if (ask.clickedButton() != close) {
            event->ignore();
            return;
        }
    }
    QSettings settings(settingsFile(), QSettings::IniFormat);
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    QMainWindow::closeEvent(event);
}

void MainWindow::openRun(std::int64_t runId)
{
    if (runId <= 0)
        return;
    m_runPage->openStoreRun(m_databaseFile, runId);
    showRunTraces(runId);
    showMode(Mode::Run);
}

void MainWindow::showRunTraces(std::int64_t runId)
{
    // The Trace page follows the open run: its per-rank files as the history recorded them
    // (`trace` events), else whatever its traces/ folder holds; looked up on the history thread.
    struct Found {
        QString name;
        std::vector<std::filesystem::path> files;
        int ranks = 0; // the run's, so a trace of another job is refused
    };
    m_history->submit<std::shared_ptr<Found>>(
        this,
        [file = m_databaseFile, runId, name = tr("run %1").arg(runId)] {
            auto found = std::make_shared<Found>();
            found->name = name;
            std::filesystem::path runDir;
            std::vector<std::string> recorded;
            storage::StoreOptions options;
            options.markInterrupted = false; // a viewer never changes a run's status
            if (auto store = storage::RunStore::open(file, options)) {
                if (auto details = store->run(runId)) {
                    runDir = details->summary.runDir;
                    found->name = QString::fromStdString(details->summary.name);
                    found->ranks = details->summary.worldSize;
                    for (const auto& trace : details->traces)
                        recorded.push_back(trace.path);
                }
            }
            found->files = findRunTraceFiles(runDir, recorded);
            return found;
        },
        [this](std::shared_ptr<Found> found) {
            if (!found->files.empty())
                m_tracePage->openFiles(std::move(found->files), found->name, found->ranks);
            else
                m_tracePage->clear();
        });
}

void MainWindow::openRunDirectory()
{
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open run directory"));
    if (dir.isEmpty())
        return;
    m_runPage->openRunDirectory(dir.toStdString());
    if (auto files = findRunTraceFiles(dir.toStdString()); !files.empty())
        m_tracePage->openFiles(std::move(files), QFileInfo(dir).fileName());
    else
        m_tracePage->clear();
    showMode(Mode::Run);
}

MainWindow::Mode MainWindow::currentMode() const { return static_cast<Mode>(m_pages->currentIndex()); }

void MainWindow::showMode(Mode mode) { m_modeBar->setCurrentRow(static_cast<int>(mode)); }

QString MainWindow::modeName(Mode mode)
{
    switch (mode) {
    case Mode::Configure:
        return tr("Configure");
    case Mode::Runs:
        return tr("Runs");
    case Mode::Run:
        return tr("Run");
    case Mode::Compare:
        return tr("Compare");
    case Mode::Trace:
        return tr("Trace");
    }
    return {};
}

} // namespace shardscope::ui
