// The workbench killed mid-run. A real GUI process (this test binary re-executed with
// --gui-session: a MainWindow whose Configure page opens a config and a recipe and presses
// Launch, then follows the run on the Run page) is SIGKILLed after the run has recorded a few
// steps. The run, detached from the GUI, completes; a workbench opened afterwards shows all of it.
// Needs the real launcher ($SHARDSCOPE_LAUNCHER, set by tests/ui/CMakeLists.txt with the engine).

#include "storage/run_store.h"
#include "ui/configure_page.h"
#include "ui/main_window.h"
#include "ui/metric_chart.h"
#include "ui/run_page.h"

#include <QApplication>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <cstdio>
#include <filesystem>

using namespace shardscope;

namespace {

constexpr int kSteps = 300;

std::filesystem::path historyIn(const QString& home) { return std::filesystem::path(home.toStdString()) / "history.sqlite"; }

// The GUI process: launch from the Configure page and follow the run, until killed.
int guiSession(int argc, char** argv)
{
    QApplication app(argc, argv);
    const QString home = qEnvironmentVariable("SHARDSCOPE_HOME");
    ui::MainWindow window(nullptr, historyIn(home));
    window.show();
    auto* page = window.configurePage();
    QObject::connect(page, &ui::ConfigurePage::runOpened, [](std::int64_t id) {
        std::printf("opened %lld\n", static_cast<long long>(id));
        std::fflush(stdout);
    });
    if (!page->openConfigFile(QString::fromLocal8Bit(argv[2])) || !page->openRecipeFile(QString::fromLocal8Bit(argv[3])))
        return 3;
    if (const QString why = page->launch(); !why.isEmpty()) {
        std::printf("not launched: %s\n", qPrintable(why));
        return 2;
    }
    return QApplication::exec();
}

struct RunState {
    std::int64_t id = 0;
    storage::RunStatus status = storage::RunStatus::Pending;
    std::size_t steps = 0;
};

RunState readRun(const std::filesystem::path& db)
{
    RunState state;
    if (!std::filesystem::exists(db))
        return state;
    storage::StoreOptions options;
    options.markInterrupted = false; // looking, not judging: the launcher is alive
    auto store = storage::RunStore::open(db, options);
    if (!store)
        return state;
    auto runs = store->listRuns();
    if (!runs || runs->empty())
        return state;
    state.id = runs->front().id;
    state.status = runs->front().status;
    state.steps = static_cast<std::size_t>(runs->front().lastStep.value_or(0));
    return state;
}

} // namespace

class TestGuiKilled : public QObject {
    Q_OBJECT
private slots:
    void runOutlivesTheWorkbench()
    {
        if (qEnvironmentVariableIsEmpty("SHARDSCOPE_LAUNCHER"))
            QSKIP("set SHARDSCOPE_LAUNCHER to a `shardscope` built with the engine");
        QTemporaryDir home;
        QFile config(home.filePath("cpu.yaml"));
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                     "num_processes: 2\nnum_machines: 1\nmachine_rank: 0\nuse_cpu: true\n");
        config.close();
        QFile recipe(home.filePath("recipe.yaml"));
        QVERIFY(recipe.open(QIODevice::WriteOnly));
        recipe.write(QStringLiteral("name: gui-killed\nmodel: {type: gpt, n_layer: 2, n_embd: 64, n_head: 4, block_size: 64}\n"
                                    "data: {type: text}\ntraining: {per_device_batch_size: 8, max_steps: %1}\n")
                         .arg(kSteps)
                         .toUtf8());
        recipe.close();

        QProcess gui;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("SHARDSCOPE_HOME", home.path());
        gui.setProcessEnvironment(env);
        gui.start(QCoreApplication::applicationFilePath(), {"--gui-session", config.fileName(), recipe.fileName()});
        QVERIFY(gui.waitForStarted());
        // The workbench opened the run (its Run page is following it) and a few steps are in.
        QTRY_VERIFY_WITH_TIMEOUT(gui.readAllStandardOutput().contains("opened") || readRun(historyIn(home.path())).id > 0, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(readRun(historyIn(home.path())).steps >= 3, 60000);
        const RunState before = readRun(historyIn(home.path()));
        QVERIFY2(before.steps < kSteps, "the run ended before the workbench could be killed; make it longer");
        QCOMPARE(kill(pid_t(gui.processId()), SIGKILL), 0);
        QVERIFY(gui.waitForFinished(5000));
        QCOMPARE(gui.exitStatus(), QProcess::CrashExit);

        // The run goes on without the workbench and completes.
        QTRY_COMPARE_WITH_TIMEOUT(readRun(historyIn(home.path())).status, storage::RunStatus::Completed, 120000);
        const RunState after = readRun(historyIn(home.path()));
        QCOMPARE(after.id, before.id);
        QCOMPARE(after.steps, std::size_t(kSteps));

        // A workbench opened afterwards shows all of it.
        ui::MainWindow window(nullptr, historyIn(home.path()));
        window.openRun(after.id);
        QCOMPARE(window.currentMode(), ui::MainWindow::Mode::Run);
        QTRY_COMPARE_WITH_TIMEOUT(window.runPage()->info().status, storage::RunStatus::Completed, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(window.runPage()->chart(QStringLiteral("loss"))->pointCount(0), kSteps, 10000);
    }
};

int main(int argc, char** argv)
{
    if (argc == 4 && std::string_view(argv[1]) == "--gui-session")
        return guiSession(argc, argv);
    QApplication app(argc, argv);
    TestGuiKilled test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_gui_killed.moc"
