// `shardscope runs show` and `runs list` print what ranks and imported files said as text, never
// as terminal commands (#43 point 3): an imported error message with escape sequences that set the
// window title, clear the screen and print a fake "status completed" is shown escaped.

#include "engine/protocol/events.h"
#include "tests/common/files.h"
#include "tests/common/recipe_run.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
namespace testing = shardscope::testing;

class TestRunsShow : public QObject {
    Q_OBJECT
private slots:
    void recordedTextIsShownNotObeyed()
    {
        QTemporaryDir home;
        const QString dir = home.filePath(QStringLiteral("hostile"));
        QVERIFY(QDir().mkpath(dir + "/events"));
        const std::string attack = "boom\x1b]0;pwned\x07\x1b[2J\rstatus         completed\xc2\x9b"
                                   "2J";
        QByteArray events;
        for (const auto& body :
             {protocol::EventBody(protocol::HelloEvent{}), protocol::EventBody(protocol::ErrorEvent{"exception", attack})}) {
            protocol::Event event;
            event.time = 100;
            event.body = body;
            events += QByteArray::fromStdString(protocol::encodeEvent(event)) + "\n";
        }
        testing::writeFile(dir + "/events/rank0.jsonl", events);
        auto run = [&](const QStringList& args) { return testing::runShardscope(home.path(), args).output; };
        const QString imported = run({"runs", "import", dir});
        QVERIFY2(imported.contains(QStringLiteral("failed")), qPrintable(imported));
        const QString shown = run({"runs", "show", "hostile"});
        QVERIFY2(!shown.contains(QChar(0x1b)) && !shown.contains(QChar('\r')) && !shown.contains(QChar(0x07))
                     && !shown.contains(QChar(0x9b)),
                 qPrintable(shown.toUtf8().toPercentEncoding(" \n:()=,.-_/")));
        QVERIFY2(shown.contains(QStringLiteral("boom\\x1b]0;pwned\\x07\\x1b[2J\\x0dstatus")), qPrintable(shown));
        QVERIFY2(shown.contains(QStringLiteral("\\u009b2J")), qPrintable(shown));
        QVERIFY2(shown.contains(QStringLiteral("status         failed")), qPrintable(shown)); // the real status stands
    }
};

QTEST_GUILESS_MAIN(TestRunsShow)
#include "tst_runs_show.moc"
