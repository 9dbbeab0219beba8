#pragma once

// The workbench's main window: a mode bar on the left (Configure, Runs, Run, Compare, Trace), as
// in Qt Creator, and the page of the chosen mode on the right.

#include <QMainWindow>

class QListWidget;
class QStackedWidget;

namespace shardscope::ui {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class Mode { Configure, Runs, Run, Compare, Trace };

    explicit MainWindow(QWidget* parent = nullptr);

    Mode currentMode() const;
    void showMode(Mode mode);
    static QString modeName(Mode mode);
    static constexpr int kModeCount = 5;

signals:
    void modeChanged(shardscope::ui::MainWindow::Mode mode);

private:
    QWidget* makePlaceholderPage(Mode mode) const;

    QListWidget* m_modeBar = nullptr;
    QStackedWidget* m_pages = nullptr;
};

} // namespace shardscope::ui
