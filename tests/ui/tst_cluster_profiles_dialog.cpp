// The cluster profiles' editor against a stand-in `shardscope clusters`: the profiles and their
// partitions read from --json; Save sends the form as JSON on standard input to --save and reads
// the file again, the saved profile selected; a change refused says the command's words; one
// command at a time; a launcher that cannot start says so.

#include "tests/ui/fake_launcher.h"
#include "ui/cluster_profiles_dialog.h"

#include <QComboBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::ClusterProfilesDialog;

namespace {

// `clusters --json` prints $LIST; `--save NAME` keeps its standard input in $SAVED; `--remove`
// says so. $FAIL set: a change is refused.
QByteArray clusters(const QString& dir)
{
    return "LIST='" + dir.toUtf8() + "/list.json'\nSAVED='" + dir.toUtf8() + "/saved.json'\n"
           + shardscope::testing::recordArguments()
           + "case \"$2\" in\n"
             "--json) cat \"$LIST\" ;;\n"
             "--save) if [ -e '"
           + dir.toUtf8()
           + "/refuse' ]; then echo 'shardscope clusters: profile [lab]: -oX is not an SSH "
             "destination' >&2; exit 1; fi; cat > \"$SAVED\"; echo \"shardscope clusters: saved [$3] in c.ini\" ;;\n"
             "--remove) echo \"shardscope clusters: removed [$3] in c.ini\" ;;\n"
             "esac\n";
}

const QByteArray kLab = R"({"file": "/h/clusters.ini", "profiles": [
  {"name": "lab", "partition": "debug", "time": "00:30:00", "warning_seconds": 90, "shared_folder": "/shared",
   "login": "", "ssh_options": "", "account": "", "qos": "", "cpus_per_task": 4, "sbatch": ["--exclusive"],
   "partitions": ["debug", "batch"]}]})";

} // namespace

class TestClusterProfilesDialog : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

    void list(const QByteArray& json) { testing::writeFile(m_dir.filePath(QStringLiteral("list.json")), json); }

private slots:
    void profilesAreReadFromJson()
    {
        list(kLab);
        FakeLauncher fake(m_dir.path(), clusters(m_dir.path()));
        ClusterProfilesDialog dialog;
        QSignalSpy loaded(&dialog, &ClusterProfilesDialog::profilesLoaded);
        QVERIFY(loaded.wait(20000));
        QCOMPARE(fake.arguments(), (QStringList{QStringLiteral("clusters"), QStringLiteral("--json")}));
        QCOMPARE(dialog.profileNames(), QStringList{QStringLiteral("lab")});
        QCOMPARE(dialog.currentProfile(), QStringLiteral("lab"));
        QCOMPARE(dialog.offeredPartitions(), (QStringList{QStringLiteral("debug"), QStringLiteral("batch")}));
        QCOMPARE(dialog.findChild<QLineEdit*>(QStringLiteral("profileTime"))->text(), QStringLiteral("00:30:00"));
        QVERIFY(dialog.message().isEmpty());
    }

    void saveSendsTheFormAndReadsAgain()
    {
        list(kLab);
        FakeLauncher fake(m_dir.path(), clusters(m_dir.path()));
        ClusterProfilesDialog dialog;
        QSignalSpy loaded(&dialog, &ClusterProfilesDialog::profilesLoaded);
        QVERIFY(loaded.wait(20000));
        QVERIFY(dialog.newProfile(QStringLiteral("made")));
        QCOMPARE(dialog.offeredPartitions(), (QStringList{QStringLiteral("debug"), QStringLiteral("batch")})); // this machine's
        QCOMPARE(dialog.saveCurrent(), QStringLiteral("A profile needs its shared folder: the folder this machine and every node "
                                                      "see, where runs go."));
        dialog.findChild<QComboBox*>(QStringLiteral("profilePartition"))->setCurrentText(QStringLiteral("batch"));
        dialog.findChild<QLineEdit*>(QStringLiteral("profileSharedFolder"))->setText(QStringLiteral("/shared/made"));
        QSignalSpy saved(&dialog, &ClusterProfilesDialog::saved);
        QSignalSpy changed(&dialog, &ClusterProfilesDialog::profilesChanged);
        loaded.clear();
        list(R"({"file": "/h/clusters.ini", "profiles": [{"name": "lab", "partitions": ["debug", "batch"]},
                 {"name": "made", "partition": "batch", "shared_folder": "/shared/made", "partitions": ["debug", "batch"]}]})");
        QCOMPARE(dialog.saveCurrent(), QString());
        QCOMPARE(dialog.saveCurrent(), QStringLiteral("Busy: the last change is still being written."));
        QVERIFY(saved.wait(20000));
        QVERIFY(saved.first().at(0).toBool());
        QCOMPARE(saved.first().at(1).toString(), QStringLiteral("shardscope clusters: saved [made] in c.ini"));
        QCOMPARE(changed.count(), 1);
        const QJsonObject sent =
            QJsonDocument::fromJson(testing::readFile(m_dir.filePath(QStringLiteral("saved.json")))).object();
        QCOMPARE(sent.value(QStringLiteral("partition")).toString(), QStringLiteral("batch"));
        QCOMPARE(sent.value(QStringLiteral("shared_folder")).toString(), QStringLiteral("/shared/made"));
        QCOMPARE(sent.value(QStringLiteral("warning_seconds")).toInt(), 120);
        // Read again, the saved profile selected.
        QVERIFY(loaded.wait(20000));
        QCOMPARE(dialog.profileNames(), (QStringList{QStringLiteral("lab"), QStringLiteral("made")}));
        QCOMPARE(dialog.currentProfile(), QStringLiteral("made"));
        QCOMPARE(dialog.message(), QStringLiteral("shardscope clusters: saved [made] in c.ini"));
    }

    void aRefusedChangeSaysWhy()
    {
        list(kLab);
        testing::writeFile(m_dir.filePath(QStringLiteral("refuse")), "");
        FakeLauncher fake(m_dir.path(), clusters(m_dir.path()));
        ClusterProfilesDialog dialog;
        QSignalSpy loaded(&dialog, &ClusterProfilesDialog::profilesLoaded);
        QVERIFY(loaded.wait(20000));
        QSignalSpy saved(&dialog, &ClusterProfilesDialog::saved);
        QSignalSpy changed(&dialog, &ClusterProfilesDialog::profilesChanged);
        QCOMPARE(dialog.saveCurrent(), QString());
        QVERIFY(saved.wait(20000));
        QFile::remove(m_dir.filePath(QStringLiteral("refuse")));
        QVERIFY(!saved.first().at(0).toBool());
        QCOMPARE(saved.first().at(1).toString(),
                 QStringLiteral("shardscope clusters: profile [lab]: -oX is not an SSH destination"));
        QCOMPARE(dialog.message(), saved.first().at(1).toString());
        QCOMPARE(changed.count(), 0);
        // Remove goes through too.
        saved.clear();
        QCOMPARE(dialog.removeCurrent(), QString());
        QVERIFY(saved.wait(20000));
        QVERIFY(saved.first().at(0).toBool());
        QCOMPARE(saved.first().at(1).toString(), QStringLiteral("shardscope clusters: removed [lab] in c.ini"));
    }

    void aFailedListingSaysWhy()
    {
        FakeLauncher fake(m_dir.path(), "echo 'shardscope clusters: c.ini:2: no [profile] yet' >&2\nexit 1\n");
        ClusterProfilesDialog dialog;
        QSignalSpy loaded(&dialog, &ClusterProfilesDialog::profilesLoaded);
        QVERIFY(loaded.wait(20000));
        QVERIFY(dialog.profileNames().isEmpty());
        QCOMPARE(dialog.message(), QStringLiteral("shardscope clusters: c.ini:2: no [profile] yet"));
    }

    void noLauncherSaysSo()
    {
        FakeLauncher fake(m_dir.path(), "exit 0\n");
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        ClusterProfilesDialog dialog;
        QSignalSpy loaded(&dialog, &ClusterProfilesDialog::profilesLoaded);
        QVERIFY(loaded.wait(20000));
        QVERIFY2(dialog.message().startsWith(QStringLiteral("Cannot start ")), qPrintable(dialog.message()));
        QVERIFY(dialog.newProfile(QStringLiteral("x")));
        dialog.findChild<QLineEdit*>(QStringLiteral("profileSharedFolder"))->setText(QStringLiteral("/s"));
        QSignalSpy saved(&dialog, &ClusterProfilesDialog::saved);
        QCOMPARE(dialog.saveCurrent(), QString());
        QTRY_COMPARE(saved.count(), 1);
        QVERIFY(!saved.first().at(0).toBool());
        QVERIFY(saved.first().at(1).toString().startsWith(QStringLiteral("Cannot start ")));
    }
};

QTEST_MAIN(TestClusterProfilesDialog)
#include "tst_cluster_profiles_dialog.moc"
