// --resume_from_checkpoint references as the launcher checks them before any rank starts (and
// the ranks resolve them): `latest` stays inside the runs folder, whatever links are planted in it.

#include "engine/checkpoint/checkpoint_paths.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// A run folder with a recipe named `recipe` and a complete checkpoint step_<step>.
void makeRun(const fs::path& dir, const std::string& recipe, int step)
{
    fs::create_directories(dir / "checkpoints" / ("step_" + std::to_string(step)));
    std::ofstream(dir / "recipe.yaml") << "name: " << recipe
                                       << "\nmodel: {type: mlp}\ndata: {type: synthetic_regression}\ntraining: {max_steps: 10}\n";
    std::ofstream(dir / "checkpoints" / ("step_" + std::to_string(step)) / "manifest.json") << "{}";
}

} // namespace

class TestCheckpointPaths : public QObject {
    Q_OBJECT
private slots:
    void latestIsTheNewestOfTheRecipe()
    {
        QTemporaryDir tmp;
        const fs::path runs = tmp.path().toStdString() + "/runs";
        makeRun(runs / "a", "demo", 5);
        makeRun(runs / "b", "other", 9);
        auto found = checkpoint::resolveCheckpoint("latest", runs.string(), "demo");
        QVERIFY2(found.ok(), found.ok() ? "" : found.error().message.c_str());
        QCOMPARE(QString::fromStdString(*found), QString::fromStdString((runs / "a/checkpoints/step_5").string()));
    }

    void latestDoesNotFollowLinksOutOfTheRunsFolder()
    {
        QTemporaryDir tmp;
        const fs::path runs = tmp.path().toStdString() + "/runs";
        const fs::path outside = tmp.path().toStdString() + "/elsewhere";
        fs::create_directories(runs);
        makeRun(outside / "run", "demo", 7);
        fs::create_directory_symlink(outside / "run", runs / "linked-run");
        makeRun(runs / "real", "demo", 3);
        fs::remove_all(runs / "real/checkpoints");
        fs::create_directory_symlink(outside / "run/checkpoints", runs / "real/checkpoints");
        auto found = checkpoint::resolveCheckpoint("latest", runs.string(), "demo");
        QVERIFY2(!found.ok(), found.ok() ? found->c_str() : "");
        QVERIFY2(found.error().message.find("no complete checkpoint") != std::string::npos, found.error().message.c_str());
    }

    void missingAndIncompleteAreRefusedWithTheFix()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        auto missing = checkpoint::resolveCheckpoint((dir / "nope").string(), dir.string(), "demo");
        QVERIFY(!missing.ok());
        QVERIFY(missing.error().message.find("does not exist") != std::string::npos);
        fs::create_directories(dir / "step_4");
        auto incomplete = checkpoint::resolveCheckpoint((dir / "step_4").string(), dir.string(), "demo");
        QVERIFY(!incomplete.ok());
        QVERIFY(incomplete.error().message.find("incomplete") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestCheckpointPaths)
#include "tst_checkpoint_paths.moc"
