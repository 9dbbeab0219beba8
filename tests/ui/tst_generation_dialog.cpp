// Try model…: the prompt continued by `shardscope runs generate --json` (a stand-in here), the
// continuation shown after the prompt with its token count; the command's own words when it
// refuses; why, when it cannot be run; one generation at a time.

#include "tests/ui/fake_launcher.h"
#include "ui/generation_dialog.h"

#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

using namespace shardscope;
using shardscope::testing::FakeLauncher;
using ui::GenerationDialog;

class TestGenerationDialog : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void theContinuationFollowsThePrompt()
    {
        FakeLauncher fake(m_dir.path(), shardscope::testing::recordArguments()
                                            + "echo 'loading the export'\n"
                                              "echo '{\"prompt_ids\": [1], \"ids\": [5, 6, 7], \"text\": \" and more\", "
                                              "\"ended_at_eos\": false}'\n");
        GenerationDialog dialog;
        dialog.setRun(QStringLiteral("/runs/llama"), QStringLiteral("llama"));
        dialog.promptEdit()->setPlainText(QStringLiteral("Everyone is permitted"));
        dialog.maxNewTokens()->setValue(10);
        QSignalSpy generated(&dialog, &GenerationDialog::generated);
        dialog.findChild<QPushButton*>(QStringLiteral("generateButton"))->click();
        QVERIFY(dialog.busy());
        QVERIFY(!dialog.findChild<QPushButton*>(QStringLiteral("generateButton"))->isEnabled());
        dialog.generate(); // one at a time
        QVERIFY(generated.wait(20000));
        QCOMPARE(generated.count(), 1);
        QVERIFY(!dialog.busy());
        QCOMPARE(dialog.continuation(), QStringLiteral(" and more"));
        QCOMPARE(dialog.status(), QStringLiteral("3 token(s): the most asked for (the continuation in bold)."));
        QVERIFY(dialog.findChild<QTextBrowser*>(QStringLiteral("generationOutput"))
                    ->toPlainText()
                    .contains(QStringLiteral("Everyone is permitted and more")));
        QCOMPARE(fake.arguments(), (QStringList{"runs", "generate", "/runs/llama", "--prompt", "Everyone is permitted",
                                                "--max_new_tokens", "10", "--temperature", "0", "--seed", "0", "--json"}));
        QVERIFY(dialog.findChild<QPushButton*>(QStringLiteral("generateButton"))->isEnabled());
    }

    void aRefusalIsTheCommandsWords()
    {
        FakeLauncher fake(m_dir.path(), "echo 'shardscope runs generate: /runs/x has no export yet' >&2\nexit 1\n");
        GenerationDialog dialog;
        dialog.setRun(QStringLiteral("/runs/x"), QStringLiteral("x"));
        QSignalSpy generated(&dialog, &GenerationDialog::generated);
        dialog.generate();
        QVERIFY(generated.wait(20000));
        QCOMPARE(dialog.status(), QStringLiteral("shardscope runs generate: /runs/x has no export yet"));
        QVERIFY(dialog.continuation().isEmpty());
        FakeLauncher silent(m_dir.path(), "exit 4\n", QStringLiteral("silent-shardscope"));
        dialog.generate();
        QVERIFY(generated.wait(20000));
        QCOMPARE(dialog.status(), QStringLiteral("shardscope runs generate failed (exit 4)"));
    }

    void noLauncherSaysWhy()
    {
        FakeLauncher fake(m_dir.path(), "exit 0\n");
        qputenv("SHARDSCOPE_LAUNCHER", m_dir.filePath(QStringLiteral("no-such-shardscope")).toUtf8());
        GenerationDialog dialog;
        dialog.setRun(QStringLiteral("/runs/x"), QStringLiteral("x"));
        QSignalSpy generated(&dialog, &GenerationDialog::generated);
        dialog.generate();
        QTRY_COMPARE(generated.count(), 1);
        QVERIFY2(
            dialog.status().startsWith(QStringLiteral("Could not run ") + m_dir.filePath(QStringLiteral("no-such-shardscope"))),
            qPrintable(dialog.status()));
        QVERIFY(!dialog.busy());
    }
};

QTEST_MAIN(TestGenerationDialog)
#include "tst_generation_dialog.moc"
