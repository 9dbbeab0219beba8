#include "app/gui/workbench_main.h"

#include "storage/run_store.h"
#include "ui/compare_page.h"
#include "ui/main_window.h"
#include "ui/run_page.h"
#include "ui/runs_page.h"

#include <QApplication>
#include <QDir>
#include <QThread>
#include <QTimer>

#include <algorithm>

namespace shardscope::gui {

namespace {

// $SHARDSCOPE_SCREENSHOTS=<dir> (scripts/screenshots.sh): open the newest run in Run and every
// run whose name starts with $SHARDSCOPE_SCREENSHOT_COMPARE in Compare, save each page as
// <dir>/<mode>.png and quit. The pages render exactly as a user sees them, in a window of
// $SHARDSCOPE_SCREENSHOT_SIZE (WxH, default 1440x900), the Run page's charts smoothed by
// $SHARDSCOPE_SCREENSHOT_SMOOTHING (TensorBoard's weight; default none).
void takeScreenshots(ui::MainWindow& window, const QString& dir)
{
    QDir().mkpath(dir);
    const QString comparePrefix = qEnvironmentVariable("SHARDSCOPE_SCREENSHOT_COMPARE");
    std::vector<std::int64_t> compare;
    std::int64_t newest = 0;
    if (auto store = storage::RunStore::open(window.databaseFile())) {
        if (auto runs = store->listRuns()) {
            for (const auto& run : *runs) {
                // The run shown in Run: $SHARDSCOPE_SCREENSHOT_RUN by name, else the newest.
                if (QString::fromStdString(run.name) == qEnvironmentVariable("SHARDSCOPE_SCREENSHOT_RUN"))
                    newest = run.id + (std::int64_t{1} << 40);
                else if (newest < (std::int64_t{1} << 40))
                    newest = std::max(newest, run.id);
                if (!comparePrefix.isEmpty() && QString::fromStdString(run.name).startsWith(comparePrefix))
                    compare.push_back(run.id);
            }
        }
    }
    newest &= (std::int64_t{1} << 40) - 1;
    std::sort(compare.begin(), compare.end());
    auto shoot = [&window, dir](ui::MainWindow::Mode mode) {
        window.showMode(mode);
        if (mode == ui::MainWindow::Mode::Run && qEnvironmentVariableIsSet("SHARDSCOPE_SCREENSHOT_SMOOTHING"))
            window.runPage()->setSmoothing(qEnvironmentVariable("SHARDSCOPE_SCREENSHOT_SMOOTHING").toDouble());
        for (int i = 0; i < 10; ++i) {
            QApplication::processEvents();
            QThread::msleep(50);
        }
        window.grab().save(QDir(dir).filePath(ui::MainWindow::modeName(mode).toLower() + QStringLiteral(".png")));
    };
    // Runs are listed on a worker thread: give it a moment.
    QTimer::singleShot(1500, &window, [&window, shoot, compare, newest] {
        if (auto* view = window.runsPage())
            view->selectRun(newest);
        shoot(ui::MainWindow::Mode::Runs);
        window.openRun(newest);
        shoot(ui::MainWindow::Mode::Run);
        window.comparePage()->setRuns(compare);
        shoot(ui::MainWindow::Mode::Compare);
        shoot(ui::MainWindow::Mode::Configure);
        shoot(ui::MainWindow::Mode::Trace);
        QApplication::quit();
    });
}

} // namespace

int runWorkbench(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Shardscope"));
    QApplication::setOrganizationName(QStringLiteral("Shardscope"));
    ui::MainWindow window;
    const QString screenshots = qEnvironmentVariable("SHARDSCOPE_SCREENSHOTS");
    if (!screenshots.isEmpty()) {
        const QStringList size =
            qEnvironmentVariable("SHARDSCOPE_SCREENSHOT_SIZE", QStringLiteral("1440x900")).split(QLatin1Char('x'));
        window.resize(size.value(0).toInt() > 0 ? size.value(0).toInt() : 1440,
                      size.value(1).toInt() > 0 ? size.value(1).toInt() : 900);
        takeScreenshots(window, screenshots);
    }
    window.show();
    return QApplication::exec();
}

} // namespace shardscope::gui
