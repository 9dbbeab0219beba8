// #57 items 4 and 13: every file a user, a run folder or a shared folder hands Shardscope goes
// through one reader (engine/common/user_file.h) with a type check, a size cap and a deadline. For
// each kind of file — an Accelerate config, a DeepSpeed JSON, a recipe, a recipe's text data, a
// Hugging Face config.json, the cluster profiles, a cluster run's run.json and request.json, a
// run's events, a node's events, a run's outcome — a FIFO with no writer, a link to /dev/zero and
// a file past the kind's size each end in a clear error (or, for a file that may be absent, in
// nothing read) within seconds: none blocks, none reads without end.

#include "app/cluster/attempts.h"
#include "app/cluster/batch_script.h"
#include "app/cluster/job_watch.h"
#include "app/cluster/slurm.h"
#include "app/cluster/submission.h"
#include "app/runs/request_file.h"
#include "app/runs/run_import.h"
#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/deepspeed_json.h"
#include "engine/common/user_file.h"
#include "engine/recipe/hf_model_config.h"
#include "engine/recipe/recipe.h"
#include "storage/run_outcome.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// What a loader made of the file: its error, or empty when it read something (or nothing, for a
// file that may be absent).
using Loader = std::function<std::string(const fs::path& file)>;

template <typename T>
std::string errorOf(const Result<T>& result)
{
    return result ? std::string() : result.error().message;
}

// The file in place of the kind's: a FIFO nobody writes, a link to /dev/zero, or a sparse file of
// `bytes` (nothing is written: a size is all the cap looks at first).
void make(const fs::path& file, const QString& how, std::uint64_t bytes)
{
    fs::create_directories(file.parent_path());
    fs::remove(file);
    if (how == "fifo")
        QVERIFY(::mkfifo(file.c_str(), 0600) == 0);
    else if (how == "zero")
        fs::create_symlink("/dev/zero", file);
    else {
        std::ofstream(file).put('\n');
        fs::resize_file(file, bytes);
    }
}

constexpr std::uint64_t kBeyondFourGiB = std::uint64_t(5) << 30;

struct Kind {
    QString name;
    std::string relative; // where the file goes in the test's folder
    std::uint64_t oversize; // a size past the kind's cap
    Loader load;
};

std::vector<Kind> kinds(const fs::path& root)
{
    const fs::path run = root / "run";
    return {
        {"an Accelerate config", "config.yaml", std::uint64_t(300 << 10),
         [](const fs::path& f) { return errorOf(config::loadAccelerateConfig(f.string())); }},
        {"a DeepSpeed JSON", "ds.json", std::uint64_t(2 << 20),
         [](const fs::path& f) { return errorOf(config::loadDeepSpeedJson(f.string())); }},
        {"a recipe", "recipe.yaml", std::uint64_t(2 << 20),
         [](const fs::path& f) { return errorOf(config::loadRecipe(f.string())); }},
        {"a recipe's text data", "corpus.txt", kBeyondFourGiB,
         [](const fs::path& f) {
             config::Recipe recipe;
             recipe.data.type = "text";
             recipe.data.path = f.string();
             return errorOf(config::checkRecipeInputs(recipe));
         }},
        {"a model's config.json", "model/config.json", std::uint64_t(2 << 20),
         [](const fs::path& f) { return errorOf(config::loadHfModelConfig(f.parent_path().string())); }},
        {"the cluster profiles", "clusters.ini", std::uint64_t(50 << 20),
         [](const fs::path& f) { return errorOf(cluster::loadProfiles(f)); }},
        {"a cluster run's run.json", "run/run.json", std::uint64_t(2 << 20),
         [run](const fs::path&) { return errorOf(cluster::readSubmission(run)); }},
        {"a cluster run's request.json", "run/request.json", std::uint64_t(2 << 20),
         [](const fs::path& f) { return errorOf(runs::readRequestFile(f)); }},
        {"a run's events", "run/events.jsonl", kBeyondFourGiB,
         [run](const fs::path&) {
             std::int64_t malformed = 0;
             return errorOf(readRunEvents(run, malformed));
         }},
        {"a node's events", "run/attempts/0/node0/events.jsonl", kBeyondFourGiB,
         [run](const fs::path&) { return errorOf(cluster::gatherAttemptEvents(run, 1, cluster::readAttempts(run))); }},
    };
}

} // namespace

class TestUserFile : public QObject {
    Q_OBJECT

private slots:
    void theReader()
    {
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const UserFileKind kind{"a test file", 16, std::chrono::seconds(5)};
        std::ofstream(root / "small") << "twelve bytes";
        QCOMPARE(*readUserFile(root / "small", kind), std::string("twelve bytes"));
        std::ofstream(root / "large") << "seventeen bytes!!";
        const std::string large = errorOf(readUserFile(root / "large", kind));
        QVERIFY2(large.find("is larger than 16 B, more than a test file ever is") != std::string::npos, large.c_str());
        const std::string folder = errorOf(readUserFile(root, kind));
        QVERIFY2(folder.find("is not a regular file (a folder); a test file must be a file") != std::string::npos,
                 folder.c_str());
        const std::string missing = errorOf(readUserFile(root / "none", kind));
        QVERIFY2(missing.find("cannot open a test file for reading (No such file") != std::string::npos, missing.c_str());
        // Pieces from an offset, and lines read in pieces (the last without its newline too).
        std::ofstream(root / "lines") << "a\nbb\n\nccc";
        QCOMPARE(*readUserFileFrom(root / "lines", "lines", 2, 3), std::string("bb\n"));
        QStringList lines;
        auto count = readUserFileLines(root / "lines", {"lines", 100, std::chrono::seconds(5)},
                                       [&](const std::string& line) { lines << QString::fromStdString(line); });
        QVERIFY(count);
        QCOMPARE(*count, std::uint64_t(4));
        QCOMPARE(lines, (QStringList{"a", "bb", "", "ccc"}));
        // A deadline already past ends the read, naming the file.
        const std::string late = errorOf(
            readUserFileLines(root / "lines", {"lines", 100, std::chrono::milliseconds(-1)}, [](const std::string&) {}));
        QVERIFY2(late.find("lines took longer than 0 s") != std::string::npos, late.c_str());
    }

    void everyKindRefusesWhatIsNoFile_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("how");
        const QTemporaryDir scratch;
        const auto all = kinds(scratch.path().toStdString());
        for (int k = 0; k < int(all.size()); ++k)
            for (const char* how : {"fifo", "zero", "oversize"})
                QTest::newRow(qPrintable(all[k].name + " as " + how)) << k << QString::fromLatin1(how);
    }
    void everyKindRefusesWhatIsNoFile()
    {
        QFETCH(int, kind);
        QFETCH(QString, how);
        QTemporaryDir dir;
        const fs::path root = dir.path().toStdString();
        const Kind k = kinds(root)[std::size_t(kind)];
        // The rest of a cluster run's folder, so that only the file under test is wrong.
        fs::create_directories(root / "run/attempts/0/node0");
        std::ofstream(root / "run/attempts/0/attempt.txt") << "job_id=1\nnodes=n1\nstarted=1\n";
        make(root / k.relative, how, k.oversize);
        QElapsedTimer clock;
        clock.start();
        const std::string error = k.load(root / k.relative);
        QVERIFY2(clock.elapsed() < 10000, qPrintable(QString::number(clock.elapsed()) + " ms"));
        QVERIFY2(!error.empty(), "read as if it were a file");
        const bool named = error.find((root / k.relative).string()) != std::string::npos
                           || error.find(k.relative.substr(k.relative.rfind('/') + 1)) != std::string::npos;
        QVERIFY2(named, error.c_str());
        const char* says = how == "fifo" ? "not a regular file (a FIFO)" : how == "zero" ? "" : "larger than";
        if (how == "zero") // a device, or (in a run folder) a link out of it
            QVERIFY2(error.find("not a regular file (a device)") != std::string::npos
                         || error.find("is a link out of the run folder") != std::string::npos
                         || error.find("is not a regular file (a link)") != std::string::npos,
                     error.c_str());
        else
            QVERIFY2(error.find(says) != std::string::npos, error.c_str());
        QVERIFY2(error.size() < 2000, error.c_str()); // nothing of the file echoed
    }

    // Files that may be absent (a run's outcome before its end, a node's events before it starts,
    // an attempt's record): a FIFO or /dev/zero there is read as absent, at once.
    void optionalFilesAreSkipped()
    {
        QTemporaryDir dir;
        const fs::path run = fs::path(dir.path().toStdString()) / "run";
        for (const char* how : {"fifo", "zero"}) {
            make(run / "outcome.json", how, 0);
            make(run / "attempts/0/attempt.txt", how, 0);
            make(run / "attempts/0/node0/events.jsonl", how, 0);
            QElapsedTimer clock;
            clock.start();
            QVERIFY(!storage::readOutcomeFile(run));
            const auto attempts = cluster::readAttempts(run);
            QCOMPARE(attempts.size(), std::size_t(1));
            QCOMPARE(attempts[0].jobId, std::int64_t(0));
            cluster::EventsTail tail(run, 1);
            QCOMPARE(tail.readNew([](const protocol::Event&, int) {}), std::int64_t(0));
            QVERIFY2(tail.refused().find("not a regular file") != std::string::npos, tail.refused().c_str());
            QVERIFY(clock.elapsed() < 10000);
        }
    }

    // #57 item 13: a followed run's batch script asking for 2^31 nodes (or none that is a file)
    // gives no node count: the follower does not look for 2^31 node folders.
    void batchScriptAsksForNodesAClusterHas()
    {
        QTemporaryDir dir;
        const fs::path run = dir.path().toStdString();
        std::ofstream(run / "job.sbatch") << "#!/bin/bash\n#SBATCH --job-name=r\n#SBATCH --nodes=3\n";
        QCOMPARE(cluster::nodesOfBatchScript(run), 3);
        std::ofstream(run / "job.sbatch", std::ios::trunc) << "#!/bin/bash\n#SBATCH --nodes=2147483647\n";
        QCOMPARE(cluster::nodesOfBatchScript(run), 0);
        fs::remove(run / "job.sbatch");
        QVERIFY(::mkfifo((run / "job.sbatch").c_str(), 0600) == 0);
        QElapsedTimer clock;
        clock.start();
        QCOMPARE(cluster::nodesOfBatchScript(run), 0);
        QVERIFY(clock.elapsed() < 10000);
    }

    // #57 item 13: a run.json that is a link (to another user's file) or whose name holds a
    // terminal escape is no run's.
    void runJsonIsTheRunsOwn()
    {
        QTemporaryDir dir;
        const fs::path run = fs::path(dir.path().toStdString()) / "run";
        fs::create_directories(run);
        const std::string valid = R"({"name": "r", "job": "slurm:12", "distributed_type": "MULTI_CPU", "mixed_precision": "no",)"
                                  R"( "user": "me", "host": "h", "num_machines": 2, "num_processes": 4})";
        std::ofstream(run / "run.json") << valid;
        QVERIFY(cluster::readSubmission(run));
        fs::rename(run / "run.json", fs::path(dir.path().toStdString()) / "elsewhere.json");
        fs::create_symlink(fs::path(dir.path().toStdString()) / "elsewhere.json", run / "run.json");
        const std::string linked = errorOf(cluster::readSubmission(run));
        QVERIFY2(linked.find("is not a regular file (a link)") != std::string::npos, linked.c_str());
        fs::remove(run / "run.json");
        std::string escaped = valid;
        escaped.replace(escaped.find("\"r\""), 3, "\"r\\u001b]0;pwned\\u0007\"");
        std::ofstream(run / "run.json") << escaped;
        const std::string control = errorOf(cluster::readSubmission(run));
        QVERIFY2(control.find("name holds a control character") != std::string::npos, control.c_str());
        std::string huge = valid;
        huge.replace(huge.find("\"num_machines\": 2"), 17, "\"num_machines\": 2147483647");
        std::ofstream(run / "run.json", std::ios::trunc) << huge;
        const std::string nodes = errorOf(cluster::readSubmission(run));
        QVERIFY2(nodes.find("num_machines is 2147483647, not a count") != std::string::npos, nodes.c_str());
    }
};

QTEST_GUILESS_MAIN(TestUserFile)
#include "tst_user_file.moc"
