// The one way the workbench runs `shardscope`: a --json answer parsed (a note before it too), the
// command's own words on failure, text as said for the windows that show it, standard input
// written and closed, a program that cannot start answered with why, one command at a time, a
// command killed (and its answer dropped) with its object, and the detached start of a launch.

#include "tests/ui/fake_launcher.h"
#include "ui/shardscope_command.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <optional>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::CommandAnswer;
using ui::ShardscopeCommand;

namespace {

// The one answer `command` gives to `arguments`.
CommandAnswer answerOf(ShardscopeCommand& command, const QStringList& arguments,
                       ShardscopeCommand::Output output = ShardscopeCommand::Output::Json,
                       const std::optional<QByteArray>& input = std::nullopt)
{
    QSignalSpy finished(&command, &ShardscopeCommand::finished);
    [&] { QVERIFY(command.start(arguments, output, input)); }();
    [&] { QVERIFY(finished.wait(20000)); }();
    [&] { QCOMPARE(finished.count(), 1); }();
    return finished.isEmpty() ? CommandAnswer{} : finished.first().first().value<CommandAnswer>();
}

bool alive(qint64 pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0; }

} // namespace

class TestShardscopeCommand : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void jsonAnswerIsParsed()
    {
        FakeLauncher fake(m_dir.path(), shardscope::testing::recordArguments()
                                            + "echo '{\"profiles\": [1, 2],'\necho ' \"file\": \"x\"}'\necho 'a note' >&2\n");
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("clusters"), QStringLiteral("--json")});
        QVERIFY(answer.started);
        QVERIFY(answer.succeeded());
        QCOMPARE(answer.program, fake.path());
        QCOMPARE(answer.arguments, (QStringList{QStringLiteral("clusters"), QStringLiteral("--json")}));
        QCOMPARE(fake.arguments(), answer.arguments);
        QCOMPARE(answer.json.object().value(QStringLiteral("file")).toString(), QStringLiteral("x"));
        QCOMPARE(answer.json.object().value(QStringLiteral("profiles")).toArray().size(), 2);
        QCOMPARE(answer.error, QStringLiteral("a note")); // standard error apart, trimmed
        QVERIFY(answer.text.isEmpty());
        QVERIFY(!command.running());
    }

    void aNoteBeforeTheJsonIsSkipped()
    {
        FakeLauncher fake(m_dir.path(), "echo 'loading the export...'\necho '{\"text\": \" world\", \"ids\": [1, 2]}'\n");
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("runs"), QStringLiteral("generate")});
        QCOMPARE(answer.json.object().value(QStringLiteral("text")).toString(), QStringLiteral(" world"));
    }

    void aFailureCarriesTheCommandsWords()
    {
        FakeLauncher fake(m_dir.path(), "echo 'shardscope tune: no recipe at x.yaml' >&2\nexit 3\n");
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("tune")});
        QVERIFY(answer.started);
        QVERIFY(!answer.succeeded());
        QVERIFY(!answer.crashed);
        QCOMPARE(answer.exitCode, 3);
        QCOMPARE(answer.error, QStringLiteral("shardscope tune: no recipe at x.yaml"));
        QVERIFY(answer.json.isNull());
    }

    void aCrashIsNoSuccess()
    {
        FakeLauncher fake(m_dir.path(), "echo '{}'\nkill -9 $$\n");
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("tune")});
        QVERIFY(answer.started);
        QVERIFY(answer.crashed);
        QVERIFY(!answer.succeeded());
    }

    void textIsWhatItSaidInOrder()
    {
        FakeLauncher fake(m_dir.path(), "echo first\necho second >&2\necho third\n");
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("runs"), QStringLiteral("diagnose"), QStringLiteral("r")},
                                              ShardscopeCommand::Output::Text);
        QVERIFY(answer.succeeded());
        QCOMPARE(answer.text, QStringLiteral("first\nsecond\nthird\n"));
        QVERIFY(answer.json.isNull());
        QVERIFY(answer.error.isEmpty());
    }

    void inputIsWrittenThenClosed()
    {
        // cat ends only when its standard input is closed.
        FakeLauncher fake(m_dir.path(), "cat\n");
        ShardscopeCommand command;
        const QByteArray profile = "{\"partition\": \"debug\"}";
        const CommandAnswer answer = answerOf(command,
                                              {QStringLiteral("clusters"), QStringLiteral("--save"), QStringLiteral("lab")},
                                              ShardscopeCommand::Output::Text, profile);
        QVERIFY(answer.succeeded());
        QCOMPARE(answer.text.toUtf8(), profile);
        const CommandAnswer empty = answerOf(command, {QStringLiteral("clusters")}, ShardscopeCommand::Output::Text,
                                             QByteArray());
        QVERIFY(empty.succeeded());
        QVERIFY(empty.text.isEmpty());
    }

    void aProgramThatCannotStartSaysWhy()
    {
        std::optional<FakeLauncher> fake(std::in_place, m_dir.path(), "exit 0\n"); // puts the variable back
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        ShardscopeCommand command;
        const CommandAnswer answer = answerOf(command, {QStringLiteral("clusters"), QStringLiteral("--json")});
        QVERIFY(!answer.started);
        QVERIFY(!answer.succeeded());
        QVERIFY(!answer.error.isEmpty());
        QCOMPARE(answer.program, m_dir.filePath(QStringLiteral("no-such-shardscope")));
        QVERIFY(!command.running());
        // It can be asked again.
        fake.reset();
        fake.emplace(m_dir.path(), "echo '{}'\n");
        QVERIFY(answerOf(command, {QStringLiteral("clusters")}).succeeded());
    }

    void oneCommandAtATime()
    {
        FakeLauncher fake(m_dir.path(), "sleep 1\necho '{\"n\": 1}'\n");
        ShardscopeCommand command;
        QSignalSpy finished(&command, &ShardscopeCommand::finished);
        QVERIFY(command.start({QStringLiteral("tune")}));
        QVERIFY(command.running());
        QVERIFY(!command.start({QStringLiteral("tune")}));
        QVERIFY(finished.wait(20000));
        QCOMPARE(finished.count(), 1);
        QVERIFY(!command.running());
    }

    // A receiver may start the next command from the answer of the last (a save, then a listing).
    void theNextCanStartFromAnAnswer()
    {
        FakeLauncher fake(m_dir.path(), "echo \"{\\\"asked\\\": \\\"$1\\\"}\"\n");
        ShardscopeCommand command;
        QStringList asked;
        connect(&command, &ShardscopeCommand::finished, &command, [&](const CommandAnswer& answer) {
            asked << answer.json.object().value(QStringLiteral("asked")).toString();
            if (asked.size() == 1)
                QVERIFY(command.start({QStringLiteral("second")}));
        });
        QVERIFY(command.start({QStringLiteral("first")}));
        QTRY_COMPARE_WITH_TIMEOUT(asked.size(), 2, 20000);
        QCOMPARE(asked, (QStringList{QStringLiteral("first"), QStringLiteral("second")}));
    }

    void destroyedWithItsObjectKilledAndSilent()
    {
        const QString pidFile = m_dir.filePath(QStringLiteral("pid"));
        FakeLauncher fake(m_dir.path(), "echo $$ > '" + pidFile.toUtf8() + "'\nexec sleep 60\n");
        bool answered = false;
        QObject receiver;
        {
            auto* command = new ShardscopeCommand;
            connect(command, &ShardscopeCommand::finished, &receiver, [&answered] { answered = true; });
            QVERIFY(command->start({QStringLiteral("runs"), QStringLiteral("follow"), QStringLiteral("--all")}));
            QTRY_VERIFY(!shardscope::testing::readFile(pidFile).trimmed().isEmpty());
            delete command;
        }
        const qint64 pid = shardscope::testing::readFile(pidFile).trimmed().toLongLong();
        QTRY_VERIFY(!alive(pid));
        QTest::qWait(100);
        QVERIFY(!answered);
    }

    void aDroppedAnswerLetsTheCommandFinish()
    {
        const QString done = m_dir.filePath(QStringLiteral("saved"));
        FakeLauncher fake(m_dir.path(), "sleep 0.3\ntouch '" + done.toUtf8() + "'\n");
        ShardscopeCommand command;
        QSignalSpy finished(&command, &ShardscopeCommand::finished);
        QVERIFY(command.start({QStringLiteral("clusters"), QStringLiteral("--save"), QStringLiteral("x")}));
        command.dropAnswer(10000);
        QVERIFY(QFile::exists(done)); // it ran to its end
        QVERIFY(!command.running());
        QTest::qWait(100);
        QCOMPARE(finished.count(), 0);
    }

    void aDetachedStartWritesItsOutputToTheFile()
    {
        FakeLauncher fake(m_dir.path(), shardscope::testing::recordArguments() + "echo said\necho 'error: refused' >&2\n");
        const QString output = m_dir.filePath(QStringLiteral("launch.log"));
        qint64 pid = 0;
        QString error;
        QVERIFY(ShardscopeCommand::startDetached({QStringLiteral("launch"), QStringLiteral("--recipe"), QStringLiteral("r.yaml")},
                                                 output, &pid, &error));
        QVERIFY(pid > 0);
        QVERIFY(error.isEmpty());
        QTRY_VERIFY(shardscope::testing::readFile(output).contains("error: refused"));
        QVERIFY(shardscope::testing::readFile(output).contains("said"));
        QTRY_COMPARE(fake.arguments(),
                     (QStringList{QStringLiteral("launch"), QStringLiteral("--recipe"), QStringLiteral("r.yaml")}));

        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        QVERIFY(!ShardscopeCommand::startDetached({QStringLiteral("launch")}, QString(), &pid, &error));
        QVERIFY(!error.isEmpty());
    }
};

QTEST_MAIN(TestShardscopeCommand)
#include "tst_shardscope_command.moc"
