// The Configure page's target choice: the SLURM profiles of `shardscope clusters --json` offered
// as "slurm:NAME" between "This machine" and "Cluster profiles…", which opens the profiles'
// editor without changing the target; the choice kept across listings; the tooltip saying what
// the command said (each profile, SLURM's partitions, or why there are none).

#include "tests/ui/fake_launcher.h"
#include "ui/cluster_profiles_dialog.h"
#include "ui/target_choice.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::TargetChoice;

namespace {

const QByteArray kTwoProfiles = R"({
  "file": "/home/me/.shardscope/clusters.ini",
  "profiles": [
    {"name": "lab", "partition": "debug", "time": "", "shared_folder": "/shared/me", "login": "",
     "partitions": ["debug", "batch"]},
    {"name": "far", "partition": "", "time": "02:00:00", "shared_folder": "", "login": "me@login",
     "partitions_error": "ssh: connect to host login port 22: refused"}
  ]
})";

// A `shardscope` whose `clusters --json` prints `json` (and records its arguments).
QByteArray clustersPrinting(const QByteArray& json)
{
    return shardscope::testing::recordArguments() + "cat <<'EOF'\n" + json + "\nEOF\n";
}

void listTargets(TargetChoice& choice)
{
    QSignalSpy loaded(&choice, &TargetChoice::targetsLoaded);
    choice.refresh();
    QVERIFY(loaded.wait(20000));
}

} // namespace

class TestTargetChoice : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void theAnswerInTargetsAndWords()
    {
        const QJsonObject clusters = QJsonDocument::fromJson(kTwoProfiles).object();
        QCOMPARE(ui::slurmTargets(clusters), (QStringList{QStringLiteral("slurm:lab"), QStringLiteral("slurm:far")}));
        const QString said = ui::describeClusters(clusters);
        QVERIFY2(said.startsWith(QStringLiteral("# profiles of /home/me/.shardscope/clusters.ini\n")), qPrintable(said));
        QVERIFY2(said.contains(QStringLiteral("[lab] partition debug, time (the partition's), shared folder /shared/me\n")),
                 qPrintable(said));
        QVERIFY2(said.contains(QStringLiteral("[far] partition (the cluster's default), time 02:00:00, shared folder (none: set "
                                              "shared_folder), SLURM on me@login over SSH")),
                 qPrintable(said));
        QVERIFY2(said.contains(QStringLiteral("# partitions (sinfo): debug batch")), qPrintable(said));
        QVERIFY2(
            said.contains(QStringLiteral("# partitions on login node me@login: ssh: connect to host login port 22: refused")),
            qPrintable(said));
        const QJsonObject none{{QStringLiteral("file"), QStringLiteral("/x/clusters.ini")},
                               {QStringLiteral("profiles"), QJsonArray()}};
        QVERIFY(ui::slurmTargets(none).isEmpty());
        QVERIFY(ui::describeClusters(none).contains(QStringLiteral("No cluster profiles in /x/clusters.ini")));
    }

    void profilesAreOfferedBetweenThisMachineAndTheEditor()
    {
        FakeLauncher fake(m_dir.path(), clustersPrinting(kTwoProfiles));
        TargetChoice choice;
        QCOMPARE(choice.objectName(), QStringLiteral("runTarget"));
        QCOMPARE(choice.targets(), QStringList{QString()});
        listTargets(choice);
        QCOMPARE(fake.arguments(), (QStringList{QStringLiteral("clusters"), QStringLiteral("--json")}));
        QCOMPARE(choice.targets(), (QStringList{QString(), QStringLiteral("slurm:lab"), QStringLiteral("slurm:far")}));
        QCOMPARE(choice.itemText(0), QStringLiteral("This machine"));
        QCOMPARE(choice.itemText(1), QStringLiteral("SLURM: lab"));
        QCOMPARE(choice.itemText(choice.count() - 1), QStringLiteral("Cluster profiles…"));
        QCOMPARE(choice.target(), QString());
        QVERIFY2(choice.toolTip().contains(QStringLiteral("[lab] partition debug")), qPrintable(choice.toolTip()));
        QVERIFY(!choice.setTarget(QStringLiteral("slurm:nowhere")));
    }

    void theChoiceStaysAcrossListings()
    {
        FakeLauncher fake(m_dir.path(), clustersPrinting(kTwoProfiles));
        TargetChoice choice;
        listTargets(choice);
        QSignalSpy chosen(&choice, &TargetChoice::targetChosen);
        QVERIFY(choice.setTarget(QStringLiteral("slurm:far")));
        QCOMPARE(chosen.count(), 1);
        QCOMPARE(chosen.first().first().toString(), QStringLiteral("slurm:far"));
        listTargets(choice);
        QCOMPARE(choice.target(), QStringLiteral("slurm:far"));
        // A listing without it: back to this machine, and no target was chosen by anyone.
        FakeLauncher fewer(m_dir.path(), clustersPrinting(R"({"file": "f", "profiles": [{"name": "lab", "partitions": []}]})"),
                           QStringLiteral("fewer-shardscope"));
        listTargets(choice);
        QCOMPARE(choice.targets(), (QStringList{QString(), QStringLiteral("slurm:lab")}));
        QCOMPARE(choice.target(), QString());
        QCOMPARE(chosen.count(), 1);
    }

    void theEditorsItemIsAnActionNotATarget()
    {
        FakeLauncher fake(m_dir.path(), clustersPrinting(kTwoProfiles));
        QWidget page;
        auto* choice = new TargetChoice(&page);
        listTargets(*choice);
        QVERIFY(choice->setTarget(QStringLiteral("slurm:lab")));
        QSignalSpy chosen(choice, &TargetChoice::targetChosen);
        choice->setCurrentIndex(choice->count() - 1);
        auto* dialog = page.findChild<ui::ClusterProfilesDialog*>();
        QVERIFY(dialog);
        QCOMPARE(choice->target(), QStringLiteral("slurm:lab"));
        QCOMPARE(chosen.count(), 0);
        // The editor lists the same profiles (through `clusters --json` too).
        QTRY_COMPARE_WITH_TIMEOUT(dialog->profileNames(), (QStringList{QStringLiteral("lab"), QStringLiteral("far")}), 20000);
        QCOMPARE(dialog->offeredPartitions(), (QStringList{QStringLiteral("debug"), QStringLiteral("batch")}));
        // What it saves is listed again at once.
        QSignalSpy loaded(choice, &TargetChoice::targetsLoaded);
        emit dialog->profilesChanged();
        QVERIFY(loaded.wait(20000));
    }

    void aFailedListingSaysWhy()
    {
        FakeLauncher fake(m_dir.path(), "echo 'shardscope clusters: clusters.ini:3: a line outside any [profile]' >&2\nexit 1\n");
        TargetChoice choice;
        listTargets(choice);
        QCOMPARE(choice.targets(), QStringList{QString()});
        QVERIFY2(choice.toolTip().contains(QStringLiteral("clusters.ini:3: a line outside any [profile]")),
                 qPrintable(choice.toolTip()));
        QCOMPARE(choice.itemText(choice.count() - 1), QStringLiteral("Cluster profiles…"));
    }

    void noLauncherNoProfiles()
    {
        FakeLauncher fake(m_dir.path(), "exit 0\n");
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        TargetChoice choice;
        listTargets(choice);
        QCOMPARE(choice.targets(), QStringList{QString()});
        QVERIFY2(choice.toolTip().endsWith(QStringLiteral("No cluster profiles.")), qPrintable(choice.toolTip()));
    }
};

QTEST_MAIN(TestTargetChoice)
#include "tst_target_choice.moc"
