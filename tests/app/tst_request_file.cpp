// A launch request as a file (app/runs/request_file.h): what a cluster run's every node runs,
// written at submission and read back by each node's `launch --request`. Every field it carries
// comes back as it was written; a file that is not a request, of another version, with a key of
// the wrong type or one it does not know is refused naming the file and the key; the node's
// command line adds only where its part runs. No process starts.

#include "app/runs/request_file.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using namespace shardscope::runs;

namespace {

LaunchRequest everyField()
{
    LaunchRequest r;
    r.recipe = "/shared/runs/a/recipe.yaml";
    r.script = "/home/me/train.py";
    r.python = "/opt/venv/bin/python";
    r.worker = "/opt/shardscope/bin/shardscope-worker";
    r.workerArgs = {"--threads", "1", "it's \"quoted\"\nand a newline"};
    r.configFile = "/shared/runs/a/config.yaml";
    r.accelerateFlags = {{"--use_fsdp", std::nullopt}, {"--fsdp_sharding_strategy", std::string("HYBRID_SHARD")}};
    r.numProcesses = 8;
    r.numMachines = 2;
    r.maxSteps = 1234567890123;
    r.mixedPrecision = "bf16";
    r.profile = true;
    r.tags = {"sweep-1", "lr"};
    r.heartbeatTimeout = 42.5;
    r.maxNonfiniteSteps = 7;
    r.stragglers.threshold = 0.35;
    r.stragglers.window = 11;
    r.lossSpikes.factor = 3.5;
    r.lossSpikes.window = 9;
    r.rendezvousTimeout = 77;
    return r;
}

std::string withField(const std::string& key, const std::string& value)
{
    return "{\"format\": \"shardscope-launch-request\", \"version\": 1, \"" + key + "\": " + value + "}";
}

} // namespace

class TestRequestFile : public QObject {
    Q_OBJECT

private slots:
    void everyFieldComesBack()
    {
        QTemporaryDir dir;
        const std::filesystem::path file = dir.filePath(QStringLiteral("request.json")).toStdString();
        const LaunchRequest written = everyField();
        QVERIFY(writeRequestFile(written, file).ok());
        auto read = readRequestFile(file);
        QVERIFY2(read.ok(), read.ok() ? "" : read.error().message.c_str());
        QCOMPARE(read->recipe, written.recipe);
        QCOMPARE(read->script, written.script);
        QCOMPARE(read->python, written.python);
        QCOMPARE(read->worker, written.worker);
        QVERIFY(read->workerArgs == written.workerArgs);
        QCOMPARE(read->configFile, written.configFile);
        QCOMPARE(read->accelerateFlags.size(), std::size_t(2));
        QCOMPARE(read->accelerateFlags[0].name, std::string("--use_fsdp"));
        QVERIFY(!read->accelerateFlags[0].value);
        QCOMPARE(read->accelerateFlags[1].value.value_or(""), std::string("HYBRID_SHARD"));
        QCOMPARE(read->numProcesses, 8);
        QCOMPARE(read->numMachines, 2);
        QCOMPARE(read->maxSteps, written.maxSteps);
        QCOMPARE(read->mixedPrecision, std::string("bf16"));
        QVERIFY(read->profile);
        QVERIFY(read->tags == written.tags);
        QCOMPARE(read->heartbeatTimeout, 42.5);
        QCOMPARE(read->maxNonfiniteSteps, 7);
        QCOMPARE(read->stragglers.threshold, 0.35);
        QCOMPARE(read->stragglers.window, 11);
        QCOMPARE(read->lossSpikes.factor, 3.5);
        QCOMPARE(read->lossSpikes.window, 9);
        QCOMPARE(read->rendezvousTimeout, 77.0);
        // Where it runs and the history's bookkeeping are not the file's: one launcher's each.
        LaunchRequest placed = written;
        placed.target = "slurm:big";
        placed.runName = "mine";
        placed.continueRun = "12";
        placed.dryRun = true;
        QCOMPARE(requestToJson(placed), requestToJson(written));
    }

    void wrongFilesAreRefusedByName()
    {
        auto refusal = [](const std::string& text) {
            auto read = requestFromJson(text, "/shared/runs/a/request.json");
            return read.ok() ? std::string() : read.error().message;
        };
        QVERIFY(refusal(withField("recipe", "\"r.yaml\"")).empty());
        const std::string notJson = refusal("recipe: r.yaml\n");
        QVERIFY2(notJson.find("/shared/runs/a/request.json is not a launch request") != std::string::npos, notJson.c_str());
        const std::string otherVersion = refusal("{\"format\": \"shardscope-launch-request\", \"version\": 2}");
        QVERIFY2(otherVersion.find("submit the run again with this Shardscope") != std::string::npos, otherVersion.c_str());
        const std::string wrongType = refusal(withField("num_processes", "\"eight\""));
        QVERIFY2(wrongType.find("\"num_processes\" is \"eight\", not a number") != std::string::npos, wrongType.c_str());
        const std::string wrongList = refusal(withField("worker_args", "\"--threads 1\""));
        QVERIFY2(wrongList.find("\"worker_args\" is \"--threads 1\", not a list of strings") != std::string::npos,
                 wrongList.c_str());
        const std::string unknown = refusal(withField("recipes", "\"r.yaml\""));
        QVERIFY2(unknown.find("unknown key \"recipes\"") != std::string::npos, unknown.c_str());
        const std::string badFlag = refusal(withField("accelerate_flags", "[{\"value\": \"x\"}]"));
        QVERIFY2(badFlag.find("an accelerate flag is") != std::string::npos, badFlag.c_str());
        QVERIFY(!readRequestFile("/nonexistent/request.json").ok());
    }

    // A node's launcher: the file says what to run, its command line where (machine rank,
    // rendezvous, its attempt's folder, the checkpoint it resumes from).
    void theCommandLinePlacesIt()
    {
        LaunchRequest commandLine;
        commandLine.numProcesses = 8;
        commandLine.givenNumProcesses = true;
        commandLine.machineRank = 1;
        commandLine.givenMachineRank = true;
        commandLine.mainProcessIp = "10.0.0.7";
        commandLine.givenIp = true;
        commandLine.mainProcessPort = 21234;
        commandLine.givenPort = true;
        commandLine.runsDir = "/shared/runs/a/attempts/1";
        commandLine.runName = "node1";
        commandLine.noHistory = true;
        commandLine.checkpointsDir = "/shared/runs/a/checkpoints";
        commandLine.resumeFrom = "/shared/runs/a/checkpoints";
        const LaunchRequest placed = placedAsGiven(everyField(), commandLine);
        QCOMPARE(placed.recipe, everyField().recipe);
        QCOMPARE(placed.maxSteps, everyField().maxSteps);
        QCOMPARE(placed.numMachines, 2); // the file's: the command line did not give it
        QVERIFY(placed.givenNumMachines && placed.givenNumProcesses);
        QCOMPARE(placed.machineRank, 1);
        QVERIFY(placed.givenMachineRank && placed.givenIp && placed.givenPort);
        QCOMPARE(placed.mainProcessIp, std::string("10.0.0.7"));
        QCOMPARE(placed.mainProcessPort, 21234);
        QCOMPARE(placed.runsDir, commandLine.runsDir);
        QCOMPARE(placed.runName, std::string("node1"));
        QVERIFY(placed.noHistory);
        QCOMPARE(placed.checkpointsDir, commandLine.checkpointsDir);
        QCOMPARE(placed.resumeFrom, commandLine.resumeFrom);
        QCOMPARE(placed.target, std::string("local"));
    }
};

QTEST_GUILESS_MAIN(TestRequestFile)
#include "tst_request_file.moc"
