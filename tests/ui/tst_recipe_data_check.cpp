// The recipe's data read off the GUI thread as the launcher reads it: a missing text file is a
// problem (named), one that is there is none; relative paths are the recipe file's; the same
// recipe is not read twice unless forgotten (opened anew); no recipe, no problem.

#include "tests/common/files.h"
#include "ui/recipe_data_check.h"

#include <QDir>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using ui::RecipeDataCheck;

namespace {

config::Recipe textRecipe(const std::string& path)
{
    config::Recipe recipe;
    recipe.data.type = "text";
    recipe.data.path = path;
    return recipe;
}

} // namespace

class TestRecipeDataCheck : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

private slots:
    void aMissingFileIsAProblem()
    {
        RecipeDataCheck check;
        QSignalSpy checked(&check, &RecipeDataCheck::checked);
        const QString missing = m_dir.filePath(QStringLiteral("missing.txt"));
        check.check(textRecipe(missing.toStdString()), QString());
        QVERIFY(check.problem().isEmpty()); // not read yet
        QVERIFY(checked.wait(20000));
        QVERIFY2(check.problem().contains(missing), qPrintable(check.problem()));
        // The same recipe again: nothing read, the problem kept.
        check.check(textRecipe(missing.toStdString()), QString());
        QTest::qWait(200);
        QCOMPARE(checked.count(), 1);
        QVERIFY(!check.problem().isEmpty());
        // Forgotten (the file opened anew): read again.
        check.forget();
        check.check(textRecipe(missing.toStdString()), QString());
        QVERIFY(checked.wait(20000));
        QVERIFY(!check.problem().isEmpty());
    }

    void relativePathsAreTheRecipeFiles()
    {
        QDir(m_dir.path()).mkpath(QStringLiteral("project/data"));
        testing::writeFile(m_dir.filePath(QStringLiteral("project/data/corpus.txt")),
                           QByteArray("A small corpus of plain text for a byte-level model. ").repeated(200));
        RecipeDataCheck check;
        QSignalSpy checked(&check, &RecipeDataCheck::checked);
        check.check(textRecipe("data/corpus.txt"), m_dir.filePath(QStringLiteral("project/recipe.yaml")));
        QVERIFY(checked.wait(20000));
        QVERIFY2(check.problem().isEmpty(), qPrintable(check.problem()));
        // Elsewhere, the same relative path names no file (a recipe opened anew is read again).
        check.forget();
        check.check(textRecipe("data/corpus.txt"), m_dir.filePath(QStringLiteral("recipe.yaml")));
        QTRY_VERIFY_WITH_TIMEOUT(!check.problem().isEmpty(), 20000);
    }

    void anAnswerForAnEditedRecipeIsDropped()
    {
        testing::writeFile(m_dir.filePath(QStringLiteral("there.txt")),
                           QByteArray("A small corpus of plain text for a byte-level model. ").repeated(200));
        RecipeDataCheck check;
        QSignalSpy checked(&check, &RecipeDataCheck::checked);
        check.check(textRecipe(m_dir.filePath(QStringLiteral("gone.txt")).toStdString()), QString());
        check.check(textRecipe(m_dir.filePath(QStringLiteral("there.txt")).toStdString()), QString()); // edited since
        QVERIFY(checked.wait(20000));
        QTest::qWait(300);
        QCOMPARE(checked.count(), 1); // the edited recipe's answer only
        QVERIFY2(check.problem().isEmpty(), qPrintable(check.problem()));
    }

    void noRecipeNoProblem()
    {
        RecipeDataCheck check;
        QSignalSpy checked(&check, &RecipeDataCheck::checked);
        check.check(std::nullopt, QString());
        QTest::qWait(100);
        QCOMPARE(checked.count(), 0);
        QVERIFY(check.problem().isEmpty());
    }
};

QTEST_MAIN(TestRecipeDataCheck)
#include "tst_recipe_data_check.moc"
