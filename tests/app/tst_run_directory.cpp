// Run directories from user-chosen names: a name never escapes the runs directory, a name that
// cannot be an id is refused, and a second launch into an existing run directory is refused.

#include "app/launcher/run_directory.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;

class TestRunDirectory : public QObject {
    Q_OBJECT
private slots:
    void namesStayInside_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("id");
        QTest::newRow("plain") << "demo-1"
                               << "demo-1";
        QTest::newRow("parent") << "../../etc/passwd"
                                << "..-..-etc-passwd";
        QTest::newRow("absolute") << "/tmp/x"
                                  << "-tmp-x";
        QTest::newRow("spaces and quotes") << "my run 'a'"
                                           << "my-run--a-";
        QTest::newRow("shell") << "$(rm -rf ~)"
                               << "--rm--rf---";
    }
    void namesStayInside()
    {
        QFETCH(QString, name);
        QFETCH(QString, id);
        QTemporaryDir dir;
        auto created = createRunDirectory(dir.path().toStdString(), name.toStdString());
        QVERIFY2(created.ok(), created.ok() ? "" : created.error().message.c_str());
        QCOMPARE(QString::fromStdString(created->id), id);
        QCOMPARE(QDir(QString::fromStdString(created->path)).canonicalPath(), QDir(dir.filePath(id)).canonicalPath());
        QVERIFY(QDir(QString::fromStdString(created->logs())).exists());
    }

    void badNamesAreRefused_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("dot") << ".";
        QTest::newRow("dot dot") << "..";
        QTest::newRow("empty") << "";
    }
    void badNamesAreRefused()
    {
        QFETCH(QString, name);
        QTemporaryDir dir;
        auto created = createRunDirectory(dir.path().toStdString(), name.toStdString());
        QVERIFY(!created.ok());
        QVERIFY(created.error().message.find("cannot be used as a run id") != std::string::npos);
    }

    void secondLaunchIntoTheSameRunIsRefused()
    {
        QTemporaryDir dir;
        QVERIFY(createRunDirectory(dir.path().toStdString(), "run").ok());
        auto again = createRunDirectory(dir.path().toStdString(), "run");
        QVERIFY(!again.ok());
        QVERIFY2(again.error().message.find("already exists; choose another --run_name") != std::string::npos,
                 again.error().message.c_str());
    }
};

QTEST_APPLESS_MAIN(TestRunDirectory)
#include "tst_run_directory.moc"
