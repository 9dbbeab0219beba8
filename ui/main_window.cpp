#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QStackedWidget>

namespace shardscope::ui {

namespace {

QString modeDescription(MainWindow::Mode mode)
{
    switch (mode) {
    case MainWindow::Mode::Configure: return QObject::tr("Accelerate config and recipe: forms, YAML preview, memory estimate.");
    case MainWindow::Mode::Runs: return QObject::tr("Every past run, from the run history.");
    case MainWindow::Mode::Run: return QObject::tr("One run, live or finished: loss, loss scale, memory per rank, throughput.");
    case MainWindow::Mode::Compare: return QObject::tr("Runs side by side: metrics, config differences, precision sweep.");
    case MainWindow::Mode::Trace: return QObject::tr("Per-rank timelines and comm/compute overlap.");
    }
    return {};
}

} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
{
    setWindowTitle(tr("Shardscope"));
    resize(1280, 800);

    auto* central = new QWidget(this);
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);

    m_modeBar = new QListWidget(central);
    m_modeBar->setObjectName(QStringLiteral("modeBar"));
    m_modeBar->setFixedWidth(120);
    m_modeBar->setFrameShape(QFrame::NoFrame);
    m_pages = new QStackedWidget(central);
    m_pages->setObjectName(QStringLiteral("pages"));

    for (int i = 0; i < kModeCount; ++i) {
        const auto mode = static_cast<Mode>(i);
        m_modeBar->addItem(modeName(mode));
        m_pages->addWidget(makePlaceholderPage(mode));
        // Ctrl+1 .. Ctrl+5 switch modes, as in Qt Creator.
        auto* action = new QAction(modeName(mode), this);
        action->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
        connect(action, &QAction::triggered, this, [this, mode] { showMode(mode); });
        addAction(action);
    }
    layout->addWidget(m_modeBar);
    layout->addWidget(m_pages, 1);
    setCentralWidget(central);

    connect(m_modeBar, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row < 0)
            return;
        m_pages->setCurrentIndex(row);
        emit modeChanged(static_cast<Mode>(row));
    });
    m_modeBar->setCurrentRow(0);
}

MainWindow::Mode MainWindow::currentMode() const
{
    return static_cast<Mode>(m_pages->currentIndex());
}

void MainWindow::showMode(Mode mode)
{
    m_modeBar->setCurrentRow(static_cast<int>(mode));
}

QString MainWindow::modeName(Mode mode)
{
    switch (mode) {
    case Mode::Configure: return tr("Configure");
    case Mode::Runs: return tr("Runs");
    case Mode::Run: return tr("Run");
    case Mode::Compare: return tr("Compare");
    case Mode::Trace: return tr("Trace");
    }
    return {};
}

QWidget* MainWindow::makePlaceholderPage(Mode mode) const
{
    // The pages are bare until their issues land (configuration, storage, workbench, profiler);
    // each says what it will hold rather than pretending to work.
    auto* label = new QLabel(QStringLiteral("<h2>%1</h2><p>%2</p><p><i>%3</i></p>")
                                 .arg(modeName(mode), modeDescription(mode), tr("Not built yet.")));
    label->setAlignment(Qt::AlignCenter);
    label->setObjectName(QStringLiteral("page_%1").arg(modeName(mode)));
    return label;
}

} // namespace shardscope::ui
