#include "app/gui/workbench_main.h"

#include "ui/main_window.h"

#include <QApplication>

namespace shardscope::gui {

int runWorkbench(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Shardscope"));
    QApplication::setOrganizationName(QStringLiteral("Shardscope"));
    ui::MainWindow window;
    window.show();
    return QApplication::exec();
}

} // namespace shardscope::gui
