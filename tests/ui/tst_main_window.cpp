// The workbench's main window: five modes in Qt Creator's order, switched by the mode bar and by
// Ctrl+1..Ctrl+5, each change announced once.

#include "ui/main_window.h"

#include <QListWidget>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QtTest>

using shardscope::ui::MainWindow;

class TestMainWindow : public QObject {
    Q_OBJECT
private slots:
    void hasTheFiveModes()
    {
        MainWindow window;
        auto* bar = window.findChild<QListWidget*>(QStringLiteral("modeBar"));
        QVERIFY(bar);
        const QStringList expected{"Configure", "Runs", "Run", "Compare", "Trace"};
        QCOMPARE(bar->count(), expected.size());
        for (int i = 0; i < expected.size(); ++i)
            QCOMPARE(bar->item(i)->text(), expected[i]);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Configure);
    }

    void shortcutsSwitchModes()
    {
        MainWindow window;
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QSignalSpy spy(&window, &MainWindow::modeChanged);
        QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Run);
        QCOMPARE(spy.count(), 1);
        QTest::keyClick(&window, Qt::Key_5, Qt::ControlModifier);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Trace);
        auto* pages = window.findChild<QStackedWidget*>(QStringLiteral("pages"));
        QCOMPARE(pages->currentWidget()->objectName(), QStringLiteral("page_Trace"));
        QCOMPARE(spy.count(), 2);
    }

    void modeBarClicksSwitchPages()
    {
        MainWindow window;
        auto* bar = window.findChild<QListWidget*>(QStringLiteral("modeBar"));
        bar->setCurrentRow(1);
        QCOMPARE(window.currentMode(), MainWindow::Mode::Runs);
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
