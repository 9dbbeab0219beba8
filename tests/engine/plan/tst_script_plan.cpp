// The command of a script run (engine/plan/script_plan.h): the CPU path that really gives N
// Gloo ranks, the pass-through on GPU machines, and the launches Accelerate would degrade silently,
// refused with their reasons.

#include "engine/plan/script_plan.h"
#include "tests/common/config_text.h"

#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace shardscope::config;

namespace {

using shardscope::testing::parseConfig;

struct Fixture {
    QTemporaryDir dir;
    std::string script;
    Fixture()
    {
        script = dir.filePath("train.py").toStdString();
        std::ofstream(script) << "print('hi')\n";
    }
    ScriptInputs inputs(const std::string& yaml, int gpus) const
    {
        ScriptInputs in;
        in.config = parseConfig(yaml);
        in.configPath = "/run/config.yaml";
        in.python = "/venv/bin/python";
        in.script = script;
        in.scriptArgs = {"--lr", "it's"};
        in.torchrunLogDir = "/run/logs/torchrun";
        in.machine.gpuCount = gpus;
        return in;
    }
};

bool has(const std::vector<std::string>& args, const std::string& value)
{
    return std::find(args.begin(), args.end(), value) != args.end();
}

std::string errorsOf(const PlannedScript& planned)
{
    std::string text;
    for (const auto& d : planned.problems)
        if (d.severity == Severity::Error)
            text += d.keyPath + ": " + d.message + "\n";
    return text;
}

} // namespace

class TestScriptPlan : public QObject {
    Q_OBJECT

private slots:
    void multiCpuTakesTorchrunsPath()
    {
        Fixture f;
        auto planned = planScriptRun(
            f.inputs("distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nmixed_precision: 'no'\n", 0));
        QVERIFY2(planned.ok(), errorsOf(planned).c_str());
        const auto& p = *planned.plan;
        // One machine: every socket of the run listens on loopback only (#43 point 5).
        QCOMPARE(p.environment,
                 (std::vector<std::string>{"GLOO_SOCKET_IFNAME=lo", "NCCL_SOCKET_IFNAME=lo", "ACCELERATE_USE_CPU=1"}));
        QVERIFY(has(p.args, "--multi_gpu"));
        QVERIFY(!has(p.args, "--cpu")); // --cpu would start one non-distributed process
        QCOMPARE(p.distributedType, std::string("MULTI_CPU"));
        QCOMPARE(p.numProcesses, 2);
        QVERIFY(p.onCpu);
        const std::vector<std::string> head{accelerateLoopbackEntry(), "launch", "--config_file", "/run/config.yaml"};
        QVERIFY(std::filesystem::is_regular_file(head.front()));
        QVERIFY(std::equal(head.begin(), head.end(), p.args.begin()));
        // torchrun's per-rank prefixes and files, then the script and its arguments, last.
        QVERIFY(has(p.args, "--tee") && has(p.args, "/run/logs/torchrun"));
        QCOMPARE(p.args[p.args.size() - 3], f.script);
        QCOMPARE(p.args.back(), std::string("it's"));
        QVERIFY2(p.commandLine().rfind("GLOO_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo ACCELERATE_USE_CPU=1 /venv/bin/python "
                                           + accelerateLoopbackEntry() + " launch",
                                       0)
                     == 0,
                 p.commandLine().c_str());
        QVERIFY2(p.commandLine().find("--lr 'it'\\''s'") != std::string::npos, p.commandLine().c_str());
    }

    void gpuMachinePassesTheConfigThrough()
    {
        Fixture f;
        auto planned = planScriptRun(f.inputs("distributed_type: FSDP\nnum_processes: 2\nmixed_precision: bf16\n"
                                              "fsdp_config:\n  fsdp_version: 2\n",
                                              2));
        QVERIFY2(planned.ok(), errorsOf(planned).c_str());
        QCOMPARE(planned.plan->environment, (std::vector<std::string>{"GLOO_SOCKET_IFNAME=lo", "NCCL_SOCKET_IFNAME=lo"}));
        QVERIFY(!has(planned.plan->args, "--multi_gpu"));
        QCOMPARE(planned.plan->distributedType, std::string("FSDP"));
        QCOMPARE(planned.plan->mixedPrecision, std::string("bf16"));
        QVERIFY(!planned.plan->onCpu);
    }

    void oneProcessNeedsNoTorchrun()
    {
        Fixture f;
        auto planned = planScriptRun(f.inputs("distributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n", 0));
        QVERIFY2(planned.ok(), errorsOf(planned).c_str());
        QVERIFY(!has(planned.plan->args, "--multi_gpu"));
        QVERIFY(!has(planned.plan->args, "--tee"));
    }

    // Machine 1 of 2: its `accelerate launch` gets Accelerate's multi-machine flags.
    void severalMachinesGetAcceleratesFlags()
    {
        Fixture f;
        // same_network: false is what `accelerate config default` writes; the file's value never
        // reaches the launch, nor does rdzv_backend's (a warning says so).
        auto planned = planScriptRun(f.inputs("distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nmachine_rank: 1\n"
                                              "main_process_ip: 10.0.0.1\nmain_process_port: 29500\nuse_cpu: true\n"
                                              "same_network: false\nrdzv_backend: c10d\n",
                                              0));
        QVERIFY2(planned.ok(), errorsOf(planned).c_str());
        QVERIFY(std::any_of(planned.problems.begin(), planned.problems.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Warning && d.keyPath == "rdzv_backend"
                   && d.message.find("not used by `accelerate launch`") != std::string::npos;
        }));
        const std::string line = planned.plan->commandLine();
        QVERIFY2(line.find("--num_machines 2 --machine_rank 1 --main_process_ip 10.0.0.1 --same_network") != std::string::npos,
                 line.c_str());
        QVERIFY2(line.find("--num_processes 4") != std::string::npos,
                 line.c_str()); // all machines' ranks, as Accelerate takes it
        QCOMPARE(planned.plan->numMachines, 2);
        QCOMPARE(planned.plan->machineRank, 1);
        // Over several machines the store and the ranks need the network: Accelerate's own entry.
        QCOMPARE(planned.plan->args[0], std::string("-m"));
        QCOMPARE(planned.plan->environment, std::vector<std::string>{"ACCELERATE_USE_CPU=1"});
    }

    // Without its entry file a one-machine run could only listen on every interface: refused.
    void missingLoopbackEntryIsAnError()
    {
        Fixture f;
        QTemporaryDir emptyResources;
        qputenv("SHARDSCOPE_RESOURCES", emptyResources.path().toUtf8());
        auto planned = planScriptRun(f.inputs("distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n", 0));
        qunsetenv("SHARDSCOPE_RESOURCES");
        QVERIFY(!planned.ok());
        QVERIFY2(errorsOf(planned).find("accelerate_loopback.py is missing") != std::string::npos, errorsOf(planned).c_str());
    }

    void refusals_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<int>("gpus");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("says");
        QTest::newRow("MULTI_GPU + use_cpu") << "distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: true\n"
                                             << 2 << "use_cpu"
                                             << "independent single-process runs";
        QTest::newRow("MULTI_GPU without GPUs") << "distributed_type: MULTI_GPU\nnum_processes: 2\n"
                                                << 0 << "distributed_type"
                                                << "needs GPUs";
        QTest::newRow("FSDP + use_cpu on a GPU machine")
            << "distributed_type: FSDP\nnum_processes: 2\nuse_cpu: true\nfsdp_config:\n  fsdp_version: 2\n"
            << 2 << "distributed_type"
            << "unsharded";
        QTest::newRow("DeepSpeed without GPUs")
            << "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n"
            << 0 << "distributed_type"
            << "unsharded";
        const std::string twoMachines = "distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nuse_cpu: true\n";
        QTest::newRow("several machines, no address")
            << QString::fromStdString(twoMachines + "main_process_port: 29500\n") << 0 << "main_process_ip"
            << "needs machine 0's address";
        QTest::newRow("several machines, no port")
            << QString::fromStdString(twoMachines + "main_process_ip: 10.0.0.1\n") << 0 << "main_process_port"
            << "one rendezvous port";
        QTest::newRow("machine_rank out of range")
            << QString::fromStdString(twoMachines + "main_process_ip: 10.0.0.1\nmain_process_port: 29500\nmachine_rank: 2\n") << 0
            << "machine_rank"
            << "not in 0..1";
        QTest::newRow("ranks not a multiple of machines")
            << "distributed_type: MULTI_CPU\nnum_processes: 3\nnum_machines: 2\nuse_cpu: true\nmain_process_ip: 10.0.0.1\n"
               "main_process_port: 29500\n"
            << 0 << "num_processes"
            << "not a multiple of num_machines 2";
        QTest::newRow("NO with 2 processes") << "distributed_type: 'NO'\nnum_processes: 2\n"
                                             << 0 << "num_processes"
                                             << "runs one process";
        QTest::newRow("more ranks than GPUs") << "distributed_type: MULTI_GPU\nnum_processes: 4\n"
                                              << 2 << "num_processes"
                                              << "2 GPU(s)";
        QTest::newRow("TPU") << "distributed_type: XLA\nnum_processes: 2\n"
                             << 0 << "distributed_type"
                             << "not one a script run";
    }

    void refusals()
    {
        QFETCH(QString, yaml);
        QFETCH(int, gpus);
        QFETCH(QString, key);
        QFETCH(QString, says);
        Fixture f;
        auto planned = planScriptRun(f.inputs(yaml.toStdString(), gpus));
        QVERIFY(!planned.ok());
        const std::string errors = errorsOf(planned);
        QVERIFY2(errors.find(key.toStdString() + ": ") != std::string::npos
                     && errors.find(says.toStdString()) != std::string::npos,
                 errors.c_str());
    }

    void missingScriptIsRefused()
    {
        Fixture f;
        auto in = f.inputs("distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n", 0);
        in.script = f.dir.filePath("nope.py").toStdString();
        auto planned = planScriptRun(in);
        QVERIFY(!planned.ok());
        QVERIFY2(errorsOf(planned).find("--script: the script " + in.script + " does not exist") != std::string::npos,
                 errorsOf(planned).c_str());
    }
};

QTEST_GUILESS_MAIN(TestScriptPlan)
#include "tst_script_plan.moc"
