// A launch request checked once, before anything is read or started (app/runs/launch_request.h):
// every refusal of options that do not go together or that the target does not take, each in
// the words the user reads, and none for the requests that may go on. No process starts.

#include "app/runs/launch_request.h"

#include <QtTest>

#include <algorithm>

using namespace shardscope;
using namespace shardscope::runs;

namespace {

bool refuses(const LaunchRequest& request, const std::string& phrase)
{
    const auto refusals = refusalsOf(request);
    return std::any_of(refusals.begin(), refusals.end(),
                       [&](const std::string& r) { return r.find(phrase) != std::string::npos; });
}

LaunchRequest recipeRun()
{
    LaunchRequest request;
    request.recipe = "demo.yaml";
    request.numProcesses = 2;
    return request;
}

} // namespace

class TestLaunchRequest : public QObject {
    Q_OBJECT

private slots:
    void requestsThatMayGoOn()
    {
        QVERIFY(refusalsOf(recipeRun()).empty());
        LaunchRequest script;
        script.script = "train.py";
        QVERIFY(refusalsOf(script).empty());
        LaunchRequest slurm = recipeRun();
        slurm.target = "slurm:debug";
        slurm.dryRun = true;
        slurm.detach = true;
        QVERIFY(refusalsOf(slurm).empty());
        LaunchRequest continued;
        continued.continueRun = "demo-1";
        QVERIFY(refusalsOf(continued).empty());
        continued.numMachines = 2; // its process count comes with the continuation: no worker-command rule
        QVERIFY(refusalsOf(continued).empty());
        LaunchRequest bareWorker; // the worker's own command line, no run folder
        bareWorker.numProcesses = 4;
        bareWorker.numMachines = 2;
        bareWorker.mainProcessIp = "10.0.0.1";
        QVERIFY(refusalsOf(bareWorker).empty());
    }

    void everyRefusalAtOnce()
    {
        LaunchRequest request = recipeRun();
        request.script = "train.py";
        request.maxSteps = 10;
        request.dryRun = true;
        const auto refusals = refusalsOf(request);
        QCOMPARE(int(refusals.size()), 3);
        QVERIFY(refuses(request, "--recipe and --script are two kinds of run; give one"));
        QVERIFY(refuses(request, "a script takes its own step count: pass it after -- (for example -- --max_steps 10)"));
        QVERIFY(refuses(request, "--dry_run and --detach are for --target slurm"));
    }

    void continuingTakesNoOtherRun()
    {
        for (auto set : std::vector<void (*)(LaunchRequest&)>{
                 [](LaunchRequest& r) { r.target = "slurm"; }, [](LaunchRequest& r) { r.script = "train.py"; },
                 [](LaunchRequest& r) { r.resumeFrom = "latest"; }, [](LaunchRequest& r) { r.runName = "x"; },
                 [](LaunchRequest& r) { r.runsDir = "/tmp"; }, [](LaunchRequest& r) { r.noHistory = true; }}) {
            LaunchRequest request;
            request.continueRun = "demo-1";
            set(request);
            QVERIFY(refuses(request, "--continue_run goes on with a run of this machine's history"));
        }
    }

    void aWorkerCommandStaysOnThisMachine()
    {
        LaunchRequest open;
        open.mainProcessIp = "0.0.0.0";
        QVERIFY(refuses(open, "would open the rendezvous store, which has no authentication, to the network"));
        LaunchRequest uneven;
        uneven.numProcesses = 3;
        uneven.numMachines = 2;
        QVERIFY(refuses(uneven, "--num_processes 3 is not a multiple of --num_machines 2"));
    }

    void whatTheClusterTargetTakes()
    {
        LaunchRequest request = recipeRun();
        request.target = "pbs";
        QVERIFY(refuses(request, "--target pbs is not local, slurm or slurm:PROFILE"));
        request.target = "slurm";
        request.givenMachineRank = request.givenIp = request.givenPort = true;
        request.resumeFrom = "latest";
        QCOMPARE(int(refusalsOf(request).size()), 4);
        QVERIFY(refuses(request, "--machine_rank is the batch script's to set on each node under --target slurm"));
        QVERIFY(refuses(request, "--main_process_port is the batch script's to set"));
        QVERIFY(refuses(request, "--resume_from_checkpoint and --profile are not taken there"));
        LaunchRequest nothing;
        nothing.target = "slurm";
        QVERIFY(refuses(nothing, "--target slurm needs --recipe R (or --script S)"));
    }
};

QTEST_APPLESS_MAIN(TestLaunchRequest)
#include "tst_launch_request.moc"
