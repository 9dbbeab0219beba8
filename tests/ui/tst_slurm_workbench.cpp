// #42: the workbench on a real SLURM cluster (two nodes started on this machine by
// scripts/slurm-cluster.sh, stopped by PID at the end): the Configure page's target choice offers
// the profiles of $SHARDSCOPE_HOME/clusters.ini, shows the batch script Launch would submit,
// submits it, and the Run page follows the job from pending (with SLURM's reason) through running
// to completed; Stop ends a running and a pending job. The real launcher and ranks run (SHARDSCOPE_LAUNCHER).

#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "tests/common/files.h"
#include "tests/common/slurm_lab.h"
#include "ui/cluster_profiles_dialog.h"
#include "ui/configure_page.h"
#include "ui/run_list_model.h"
#include "ui/run_page.h"
#include "ui/runs_page.h"

#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;

namespace {

const QByteArray kConfig = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                           "num_machines: 2\nnum_processes: 2\nmachine_rank: 0\nmain_process_ip: 127.0.0.1\n"
                           "main_process_port: 29500\nuse_cpu: true\n";
const char* const kRecipe = "name: slurm-gui\nseed: 5\nmodel: {type: gpt, n_layer: 2, n_embd: 32, n_head: 4, block_size: 32}\n"
                            "data: {type: text}\noptimizer: {type: adamw, lr: 0.003}\n"
                            "training: {per_device_batch_size: 2, max_steps: 6}\n";

QString runCommand(const QString& program, const QStringList& args)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    p.waitForFinished(60000);
    return QString::fromUtf8(p.readAll()).trimmed();
}

} // namespace

class TestSlurmWorkbench : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    testing::SlurmLab m_cluster;
    std::filesystem::path m_db;

    // Both nodes taken by a job of `seconds`, running when this returns: what is submitted next waits
    // (Resources). Its id.
    QString occupyTheNodes(int seconds)
    {
        const QString job = runCommand(QStringLiteral("sbatch"), {"--parsable", "-N", "2", "--exclusive", "--output=/dev/null",
                                                                  "--wrap", QStringLiteral("sleep %1").arg(seconds)});
        QElapsedTimer clock;
        clock.start();
        while (runCommand(QStringLiteral("squeue"), {"-h", "-j", job, "-o", "%T"}) != QStringLiteral("RUNNING")
               && clock.elapsed() < 30000)
            QTest::qWait(200);
        return job;
    }

    // A Configure page with the 2-node config and the recipe, its targets listed.
    void preparePage(ui::ConfigurePage& page)
    {
        QSignalSpy listed(&page, &ui::ConfigurePage::targetsLoaded);
        page.refreshTargets(); // as showing the page does
        QVERIFY(listed.wait(30000));
        QVERIFY2(page.targets().contains(QStringLiteral("slurm:lab")), qPrintable(page.targets().join(',')));
        const QString config = m_dir.filePath(QStringLiteral("two-nodes.yaml"));
        testing::writeFile(config, kConfig);
        QVERIFY(page.openConfigFile(config));
        page.setRecipeText(QString::fromUtf8(kRecipe));
        QVERIFY2(page.canLaunch(), qPrintable(page.findChild<QLabel*>(QStringLiteral("problemsSummary"))->text()));
        QVERIFY(page.setTarget(QStringLiteral("slurm:lab")));
        QVERIFY(page.findChild<QPushButton*>(QStringLiteral("batchScriptButton"))->isVisibleTo(&page));
    }

    // The batch script shown, then submitted from its dialog; the run the launcher recorded.
    std::int64_t showAndSubmit(ui::ConfigurePage& page)
    {
        QSignalSpy shown(&page, &ui::ConfigurePage::batchScriptShown);
        const QString refused = page.showBatchScript();
        [&] { QVERIFY2(refused.isEmpty(), qPrintable(refused)); }();
        [&] { QVERIFY(shown.wait(60000)); }();
        const QString script = page.batchScriptText();
        [&] {
            QVERIFY2(script.contains(QStringLiteral("#SBATCH --nodes=2")), qPrintable(script));
            QVERIFY2(script.contains(QStringLiteral("--machine_rank \"$SLURM_NODEID\"")), qPrintable(script));
            QVERIFY2(script.contains(QStringLiteral("not submitted")), qPrintable(script));
        }();
        QSignalSpy opened(&page, &ui::ConfigurePage::runOpened);
        const QString error = page.submitShownScript();
        [&] { QVERIFY2(error.isEmpty(), qPrintable(error)); }();
        [&] { QVERIFY2(opened.wait(60000), qPrintable(page.findChild<QLabel*>(QStringLiteral("configureMessage"))->text())); }();
        return opened.isEmpty() ? 0 : opened.first().first().value<std::int64_t>();
    }

private slots:
    void initTestCase()
    {
        if (const QString why = testing::SlurmLab::unavailable(); !why.isEmpty())
            QSKIP(qPrintable(why));
        const QString home = m_dir.filePath(QStringLiteral("home"));
        QDir().mkpath(home);
        qputenv("SHARDSCOPE_HOME", home.toUtf8());
        m_db = storage::historyFile(home.toStdString());
        QString said;
        QVERIFY2(m_cluster.start(m_dir.path(), 2, 2, 28817, &said), qPrintable(said));
        testing::writeFile(home + "/clusters.ini",
                           "[lab]\nshared_folder = " + m_dir.filePath(QStringLiteral("shared")).toUtf8() + "\n");
    }

    void cleanupTestCase()
    {
        QString said;
        QVERIFY2(m_cluster.stop(&said), qPrintable(said));
    }

    // The whole path: target, script, submission, pending (Resources) -> running -> completed.
    void targetScriptSubmitAndFollowToCompleted()
    {
        ui::ConfigurePage page(m_db);
        preparePage(page);
        occupyTheNodes(8);
        const std::int64_t runId = showAndSubmit(page);
        QVERIFY(runId > 0);

        ui::RunPage runPage;
        runPage.openStoreRun(m_db, runId);
        auto* status = runPage.findChild<QLabel*>(QStringLiteral("runStatus"));
        QStringList seen; // each distinct status line the page showed
        QElapsedTimer clock;
        clock.start();
        while (!storage::isTerminal(runPage.info().status) && clock.elapsed() < 240000) {
            QTest::qWait(100);
            if (seen.isEmpty() || seen.last() != status->text())
                seen << status->text();
        }
        const QString all = seen.join(QStringLiteral("\n"));
        QCOMPARE(runPage.info().status, storage::RunStatus::Completed);
        const auto pending = std::find_if(seen.begin(), seen.end(), [](const QString& s) {
            return s.contains(QStringLiteral(">pending<")) && s.contains(QStringLiteral("Resources"));
        });
        const auto running = std::find_if(seen.begin(), seen.end(),
                                          [](const QString& s) { return s.contains(QStringLiteral(">running<")); });
        QVERIFY2(pending != seen.end(), qPrintable(all));
        QVERIFY2(running != seen.end() && running > pending, qPrintable(all));
        QVERIFY2(running->contains(QStringLiteral("slurm:")) && running->contains(QStringLiteral("MULTI_CPU")), qPrintable(all));
        // Every step of both nodes reached the page (from the history, recorded as the nodes wrote them).
        auto* progress = runPage.findChild<QLabel*>(QStringLiteral("runProgress"));
        QTRY_VERIFY2_WITH_TIMEOUT(progress->text().contains(QStringLiteral("step 6/6")), qPrintable(progress->text()), 10000);
    }

    // #57 item 10: a 2-node config without main_process_ip/port (which the batch script gives each
    // node) is refused for this machine, and launched from Configure on a SLURM target: the batch
    // script shown, submitted, and the run followed to completed with its ranks' logs.
    void twoNodesLaunchFromConfigureWithoutARendezvous()
    {
        ui::ConfigurePage page(m_db);
        QSignalSpy listed(&page, &ui::ConfigurePage::targetsLoaded);
        page.refreshTargets();
        QVERIFY(listed.wait(30000));
        const QString config = m_dir.filePath(QStringLiteral("two-nodes-no-rendezvous.yaml"));
        testing::writeFile(config, "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                                   "num_machines: 2\nnum_processes: 2\nuse_cpu: true\n");
        QVERIFY(page.openConfigFile(config));
        page.setRecipeText(QString::fromUtf8(kRecipe));
        auto* summary = page.findChild<QLabel*>(QStringLiteral("problemsSummary"));
        QVERIFY2(!page.canLaunch(), qPrintable(summary->text())); // this machine: the rendezvous is the user's to give
        QVERIFY(page.setTarget(QStringLiteral("slurm:lab")));
        QVERIFY2(page.canLaunch(), qPrintable(summary->text()));
        const std::int64_t runId = showAndSubmit(page);
        QVERIFY(runId > 0);
        ui::RunPage runPage;
        runPage.openStoreRun(m_db, runId);
        QTRY_VERIFY_WITH_TIMEOUT(storage::isTerminal(runPage.info().status), 240000);
        QCOMPARE(runPage.info().status, storage::RunStatus::Completed);
        QVERIFY(page.setTarget(QString()));
        QVERIFY2(!page.canLaunch(), qPrintable(summary->text()));
    }

    // A workbench opened on another machine (here: another home, the same cluster and shared
    // folder) catches up with a run it did not submit: the Runs page starts its follower, the run
    // appears in its history and the page, and is followed to completed.
    void runsPageCatchesUpWithARunSubmittedElsewhere()
    {
        const QString elsewhere = m_dir.filePath(QStringLiteral("other-machine"));
        QDir().mkpath(elsewhere);
        const QString recipe = m_dir.filePath(QStringLiteral("elsewhere.yaml"));
        testing::writeFile(recipe, kRecipe);
        QProcess submit;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SHARDSCOPE_HOME"), elsewhere);
        submit.setProcessEnvironment(env);
        submit.setProcessChannelMode(QProcess::MergedChannels);
        const QString home = QString::fromStdString(m_db.parent_path().string());
        submit.start(qEnvironmentVariable("SHARDSCOPE_LAUNCHER"),
                     {"launch", "--target", "slurm:lab", "--cluster_profiles", home + "/clusters.ini", "--recipe", recipe,
                      "--run_name", "submitted-elsewhere", "--num_processes", "2", "--num_machines", "2", "--detach"});
        QVERIFY(submit.waitForFinished(60000));
        QVERIFY2(submit.exitCode() == 0, submit.readAll().constData());

        ui::RunsPage page(m_db);
        QSignalSpy caughtUp(&page, &ui::RunsPage::clusterCatchUpFinished);
        page.catchUpWithClusterRuns();
        QVERIFY(caughtUp.wait(60000));
        const QString said = caughtUp.first().first().toString();
        QVERIFY2(said.contains(QStringLiteral("following submitted-elsewhere in the background")), qPrintable(said));
        auto listed = [&page]() -> const storage::RunSummary* {
            for (const auto& run : page.model()->runs())
                if (run.name == "submitted-elsewhere")
                    return &run;
            return nullptr;
        };
        QTRY_VERIFY_WITH_TIMEOUT(listed() != nullptr, 30000);
        QVERIFY2(listed()->job.rfind("slurm:", 0) == 0, listed()->job.c_str());
        QTRY_VERIFY_WITH_TIMEOUT(listed() && listed()->status == storage::RunStatus::Completed, 240000);
        QCOMPARE(listed()->lastStep.value_or(0), std::int64_t(6));
        // Its follower, having recorded the end, is gone (nothing of the test left running).
        const QByteArray ours = "SHARDSCOPE_HOME=" + home.toUtf8() + '\0';
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                for (const QString& pid : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs))
                    if (testing::readFile("/proc/" + pid + "/cmdline").contains(QByteArray("follow\0", 7))
                        && testing::readFile("/proc/" + pid + "/environ").contains(ours))
                        return false;
                return true;
            }(),
            60000);
    }

    // The cluster profiles edited in the workbench: the target choice's "Cluster profiles…" opens
    // the editor, which offers SLURM's partitions (sinfo) for the partition; a new profile saved
    // goes into clusters.ini beside the user's text (kept as it was) and is offered as a target at
    // once; a profile the file could not load is refused with the reason; Remove takes it out.
    void profilesAreEditedWithSlurmsPartitions()
    {
        const QString file = QString::fromStdString(m_db.parent_path().string()) + "/clusters.ini";
        const QByteArray before = testing::readFile(file);
        ui::ConfigurePage page(m_db);
        QSignalSpy listed(&page, &ui::ConfigurePage::targetsLoaded);
        page.refreshTargets();
        QVERIFY(listed.wait(30000));
        auto* choice = page.findChild<QComboBox*>(QStringLiteral("runTarget"));
        QCOMPARE(choice->itemText(choice->count() - 1), QStringLiteral("Cluster profiles…"));
        QVERIFY(!page.targets().contains(QStringLiteral("edit-cluster-profiles")));
        choice->setCurrentIndex(choice->count() - 1); // opens the editor, the target stays
        auto* dialog = page.findChild<ui::ClusterProfilesDialog*>();
        QVERIFY(dialog);
        QCOMPARE(page.target(), QString());
        QTRY_COMPARE_WITH_TIMEOUT(dialog->profileNames(), QStringList{QStringLiteral("lab")}, 30000);
        QVERIFY2(dialog->offeredPartitions().contains(QStringLiteral("debug")),
                 qPrintable(dialog->offeredPartitions().join(',')));

        QVERIFY(dialog->newProfile(QStringLiteral("made")));
        QVERIFY(!dialog->newProfile(QStringLiteral("lab"))); // taken
        QVERIFY(dialog->offeredPartitions().contains(QStringLiteral("debug")));
        dialog->findChild<QComboBox*>(QStringLiteral("profilePartition"))->setCurrentText(QStringLiteral("debug"));
        dialog->findChild<QLineEdit*>(QStringLiteral("profileTime"))->setText(QStringLiteral("00:30:00"));
        dialog->findChild<QPlainTextEdit*>(QStringLiteral("profileSbatch"))->setPlainText(QStringLiteral("--exclusive\n"));
        dialog->findChild<QLineEdit*>(QStringLiteral("profileSharedFolder"))->setText(m_dir.filePath(QStringLiteral("shared")));
        QSignalSpy saved(dialog, &ui::ClusterProfilesDialog::saved);
        QSignalSpy relisted(&page, &ui::ConfigurePage::targetsLoaded);
        QSignalSpy reloaded(dialog, &ui::ClusterProfilesDialog::profilesLoaded);
        QCOMPARE(dialog->saveCurrent(), QString());
        QVERIFY(saved.wait(30000));
        QVERIFY2(saved.first().at(0).toBool(), qPrintable(saved.first().at(1).toString()));
        const QByteArray after = testing::readFile(file);
        QVERIFY2(after.startsWith(before), after.constData()); // the user's text as it was
        QVERIFY2(after.contains("[made]\npartition = debug\ntime = 00:30:00\nsbatch = --exclusive\nshared_folder = "),
                 after.constData());
        QVERIFY(relisted.wait(30000));
        QVERIFY2(page.targets().contains(QStringLiteral("slurm:made")), qPrintable(page.targets().join(',')));

        // A login the file could not load: refused, the file unchanged.
        QTRY_VERIFY_WITH_TIMEOUT(!reloaded.isEmpty(), 30000); // the editor read the file again
        QVERIFY(dialog->profileNames().contains(QStringLiteral("made")));
        QVERIFY(dialog->selectProfile(QStringLiteral("made")));
        dialog->findChild<QLineEdit*>(QStringLiteral("profileLogin"))->setText(QStringLiteral("-oProxyCommand=x"));
        saved.clear();
        QCOMPARE(dialog->saveCurrent(), QString());
        QVERIFY(saved.wait(30000));
        QVERIFY(!saved.first().at(0).toBool());
        QVERIFY2(saved.first().at(1).toString().contains(QStringLiteral("is not an SSH destination")),
                 qPrintable(saved.first().at(1).toString()));
        QCOMPARE(testing::readFile(file), after);

        saved.clear();
        QCOMPARE(dialog->removeCurrent(), QString());
        QVERIFY(saved.wait(30000));
        QVERIFY(saved.first().at(0).toBool());
        QCOMPARE(testing::readFile(file), before + "\n"); // back to the user's text (and the blank line before [made])
    }

    // Stop on the Run page ends a running job: its ranks have stepped, then the job is cancelled.
    void stopEndsARunningJob()
    {
        ui::ConfigurePage page(m_db);
        preparePage(page);
        page.setRecipeText(QString::fromUtf8(kRecipe).replace(QStringLiteral("max_steps: 6"), QStringLiteral("max_steps: 5000")));
        const std::int64_t runId = showAndSubmit(page);
        QVERIFY(runId > 0);
        ui::RunPage runPage;
        runPage.openStoreRun(m_db, runId);
        QTRY_VERIFY_WITH_TIMEOUT(
            runPage.findChild<QLabel*>(QStringLiteral("runProgress"))->text().contains(QStringLiteral("step ")), 60000);
        QCOMPARE(runPage.info().status, storage::RunStatus::Running);
        const QString job = QString::fromStdString(runPage.info().job).section(QLatin1Char(':'), 1);
        runPage.findChild<QPushButton*>(QStringLiteral("stopButton"))->click();
        QTRY_COMPARE_WITH_TIMEOUT(runPage.info().status, storage::RunStatus::Cancelled, 120000);
        const QString left = runCommand(QStringLiteral("squeue"), {"-h", "-j", job, "-o", "%T"});
        QVERIFY2(!left.contains(QStringLiteral("PENDING")) && !left.contains(QStringLiteral("RUNNING")), qPrintable(left));
    }

    // Stop on the Run page ends a job still waiting for nodes: cancelled, and gone from the queue.
    void stopEndsAPendingJob()
    {
        ui::ConfigurePage page(m_db);
        preparePage(page);
        const QString blocker = occupyTheNodes(30);
        const std::int64_t runId = showAndSubmit(page);
        QVERIFY(runId > 0);
        ui::RunPage runPage;
        runPage.openStoreRun(m_db, runId);
        auto* stop = runPage.findChild<QPushButton*>(QStringLiteral("stopButton"));
        QTRY_VERIFY_WITH_TIMEOUT(stop->isEnabled() && runPage.info().statusDetail.find("pending") == 0, 30000);
        QCOMPARE(runPage.info().status, storage::RunStatus::Pending);
        const QString job = QString::fromStdString(runPage.info().job).section(QLatin1Char(':'), 1);
        stop->click();
        QTRY_COMPARE_WITH_TIMEOUT(runPage.info().status, storage::RunStatus::Cancelled, 60000);
        const QString left = runCommand(QStringLiteral("squeue"), {"-h", "-j", job, "-o", "%T"});
        QVERIFY2(!left.contains(QStringLiteral("PENDING")) && !left.contains(QStringLiteral("RUNNING")), qPrintable(left));
        runCommand(QStringLiteral("scancel"), {blocker});
    }
};

QTEST_MAIN(TestSlurmWorkbench)
#include "tst_slurm_workbench.moc"
