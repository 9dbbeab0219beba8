// app/cluster/slurm.h without a cluster: SLURM's text as its tools print it (22.05's formats, the
// same from 21.08 to 25.11), cluster profiles, and the batch script, which runs here with stand-ins
// for srun and scontrol to show that each node's task takes its own machine rank.

#include "app/cluster/batch_script.h"
#include "app/cluster/slurm.h"
#include "tests/common/files.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace shardscope;
using namespace shardscope::cluster;

class TestSlurm : public QObject {
    Q_OBJECT

private slots:
    void partitionsFromSinfo()
    {
        auto parts = parsePartitions("debug*|up|3|1\ngpu|down|16|64+\n");
        QVERIFY(parts.ok());
        QCOMPARE(parts->size(), std::size_t(2));
        QCOMPARE((*parts)[0].name, std::string("debug"));
        QVERIFY((*parts)[0].isDefault && (*parts)[0].up);
        QCOMPARE((*parts)[0].nodes, 3);
        QCOMPARE((*parts)[1].cpusPerNode, 64);
        QVERIFY(!(*parts)[1].up && !(*parts)[1].isDefault);
        QVERIFY(!parsePartitions("garbage\n").ok());
        // A login shell's warning before sinfo's lines (over SSH) is not a partition, nor an error.
        auto noisy = parsePartitions("bash: warning: setlocale: LC_ALL: cannot change locale (xx)\ndebug*|up|3|1\n");
        QVERIFY(noisy.ok() && noisy->size() == 1 && noisy->front().name == "debug");
    }

    void jobsFromSqueueAndScontrol()
    {
        auto pending = parseSqueueLine("PENDING|Resources|\n");
        QVERIFY(pending && pending->state == "PENDING" && pending->reason == "Resources" && !pending->ended());
        auto running = parseSqueueLine("RUNNING|None|n[1-2]");
        QVERIFY(running && running->nodes == "n[1-2]");
        QVERIFY(!parseSqueueLine("").has_value());
        const auto record = parseScontrolRecord("JobId=7 JobName=x JobState=TIMEOUT Reason=TimeLimit Dependency=(null) "
                                                "ExitCode=0:15 NodeList=n3");
        QCOMPARE(record.at("JobState"), std::string("TIMEOUT"));
        QCOMPARE(record.at("ExitCode"), std::string("0:15"));
        QVERIFY((JobState{"TIMEOUT", "TimeLimit", "n3", "0:15"}.ended()));
        QVERIFY((JobState{"CANCELLED by 0", "None", "", ""}.ended()));
        QCOMPARE(*parseJobId("123\n"), std::int64_t{123});
        QCOMPARE(*parseJobId("456;cluster\n"), std::int64_t{456});
        QVERIFY(!parseJobId("sbatch: error: Batch job submission failed").ok());
        QVERIFY(QString::fromStdString(pendingAdvice("PartitionNodeLimit")).contains(QStringLiteral("num_machines")));
        QVERIFY(QString::fromStdString(pendingAdvice("SomethingNew")).contains(QStringLiteral("SomethingNew")));
    }

    // #57 items 6 and 7: the nodes SLURM lost, from sinfo's lines as it prints them (down, failing,
    // not responding: '*'); a pending reason's advice names the job and has a fix for a partition
    // that is down.
    void lostNodesAndPendingAdvice()
    {
        QCOMPARE(lostNodesOf("n1|allocated|none\nn2|down*|Not responding\nn3|idle*|none\nn2|down*|Not responding\n"),
                 std::string("n2 (down*: Not responding), n3 (idle*)"));
        QCOMPARE(lostNodesOf("n1|mixed|none\nn4|fail|bad disk\n"), std::string("n4 (fail: bad disk)"));
        QVERIFY(lostNodesOf("n1|allocated|none\nn2|allocated|none\n").empty());
        const std::string down = pendingAdvice("PartitionDown", 42);
        QVERIFY2(down.find("partition is down") != std::string::npos && down.find("<job id>") == std::string::npos, down.c_str());
        const std::string unknown = pendingAdvice("SomethingNew", 42);
        QVERIFY2(unknown.find("squeue -j 42 -l") != std::string::npos, unknown.c_str());
    }

    // A profile saved (the workbench's editor, `clusters --save`) replaces its own section only:
    // the rest of the file, comments and all, stays byte for byte; a new one is appended; a removed
    // one goes with its lines; what would not load is refused and the file left alone.
    void profileSavedInPlace()
    {
        const std::string text = "# my clusters\n[default]\npartition = gpu # big\nshared_folder = /s\n\n"
                                 "# the small one\n[small]\npartition = debug\nshared_folder = /s\n";
        ClusterProfile changed;
        changed.name = "default";
        changed.partition = "a100";
        changed.timeLimit = "01:00:00";
        changed.extraSbatch = {"--exclusive"};
        changed.sharedFolder = "/s";
        QCOMPARE(replaceProfileSection(text, "default", formatProfile(changed)),
                 std::string("# my clusters\n[default]\npartition = a100\ntime = 01:00:00\nsbatch = --exclusive\n"
                             "shared_folder = /s\n\n# the small one\n[small]\npartition = debug\nshared_folder = /s\n"));
        changed.name = "new";
        QCOMPARE(replaceProfileSection(text, "new", formatProfile(changed)), text + "\n" + formatProfile(changed));
        QCOMPARE(replaceProfileSection(text, "small", ""), std::string("# my clusters\n[default]\npartition = gpu # big\n"
                                                                       "shared_folder = /s\n\n# the small one\n"));
        // formatProfile reads back as itself.
        changed.login = "me@login1";
        changed.sshOptions = {"-p", "2222"};
        changed.cpusPerTask = 8;
        changed.warningSeconds = 300;
        auto back = parseProfiles(formatProfile(changed), "x");
        QVERIFY(back.ok());
        const ClusterProfile& b = back->at("new");
        QVERIFY(b.partition == changed.partition && b.timeLimit == changed.timeLimit && b.extraSbatch == changed.extraSbatch
                && b.login == changed.login && b.sshOptions == changed.sshOptions && b.cpusPerTask == 8 && b.warningSeconds == 300
                && b.sharedFolder == "/s");

        QTemporaryDir dir;
        const std::string file = dir.filePath(QStringLiteral("clusters.ini")).toStdString();
        testing::writeFile(QString::fromStdString(file), QByteArray::fromStdString(text));
        changed.name = "default";
        changed.login = "-oProxyCommand=evil"; // would not load: refused, the file as it was
        auto refused = saveProfile(file, changed);
        QVERIFY(!refused.ok());
        QVERIFY2(refused.error().message.find("not saved") != std::string::npos, refused.error().message.c_str());
        QCOMPARE(testing::readFile(QString::fromStdString(file)).toStdString(), text);
        changed.login.clear();
        QVERIFY(saveProfile(file, changed).ok());
        QCOMPARE(testing::readFile(QString::fromStdString(file + ".previous")).toStdString(), text); // the file before
        QCOMPARE(loadProfile(file, "default")->partition, std::string("a100"));
        QCOMPARE(loadProfile(file, "small")->partition, std::string("debug"));
        QVERIFY(saveProfile(file, changed, true).ok());
        QVERIFY(!loadProfile(file, "default").ok());
    }

    void profiles()
    {
        auto parsed = parseProfiles("# mine\n[default]\npartition = gpu\ntime = 01:00:00\nshared_folder = /shared/me\n"
                                    "sbatch = --gres=gpu:8\nsbatch = --exclusive\ncpus_per_task=16\n[small]\npartition=debug\n",
                                    "clusters.ini");
        QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().message.c_str());
        const ClusterProfile& p = parsed->at("default");
        QCOMPARE(p.partition, std::string("gpu"));
        QCOMPARE(p.cpusPerTask, 16);
        QCOMPARE(p.extraSbatch.size(), std::size_t(2));
        QCOMPARE(parsed->at("small").partition, std::string("debug"));
        auto unknown = parseProfiles("[default]\npartiton = gpu\n", "clusters.ini");
        QVERIFY(!unknown.ok());
        QVERIFY2(unknown.error().message.find("clusters.ini:2: unknown key 'partiton'") != std::string::npos,
                 unknown.error().message.c_str());
        QVERIFY(!parseProfiles("partition = gpu\n", "c.ini").ok()); // before any [profile]
        QVERIFY(!parseProfiles("[default]\ncpus_per_task = many\n", "c.ini").ok());
        // A login node: ssh's destination, and its options word by word.
        auto login = parseProfiles("[far]\nlogin = me@login1\nssh_options = -p 2222  -i /k/id\n", "c.ini");
        QVERIFY2(login.ok(), login.ok() ? "" : login.error().message.c_str());
        QCOMPARE(login->at("far").login, std::string("me@login1"));
        QCOMPARE(login->at("far").sshOptions, (std::vector<std::string>{"-p", "2222", "-i", "/k/id"}));
        for (const char* bad : {"login = -oProxyCommand=x\n", "login = me@a b\n", "login =\n"}) {
            auto refused = parseProfiles(std::string("[far]\n") + bad, "c.ini");
            QVERIFY2(!refused.ok() && refused.error().message.find("is not an SSH destination") != std::string::npos, bad);
        }
        QCOMPARE(SlurmClient(login->at("far")).where(), std::string("login node me@login1"));
        QCOMPARE(SlurmClient().where(), std::string("this machine"));
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("clusters.ini"));
        QVERIFY(!loadProfile(file.toStdString(), "default").ok()); // no file: says what to write
        testing::writeFile(file, "[default]\npartition = gpu\n");
        auto noFolder = loadProfile(file.toStdString(), "default");
        QVERIFY(!noFolder.ok() && noFolder.error().message.find("shared_folder") != std::string::npos);
        QVERIFY(!loadProfile(file.toStdString(), "other").ok());
        // #57: a shared folder the batch script's #SBATCH lines cannot carry, or a relative one
        // (where every node's launcher looks is an absolute path), is refused with the fix.
        for (const auto& [folder, said] : std::vector<std::pair<std::string, std::string>>{
                 {"shared/runs", "is relative; give the absolute path"},
                 {"/shared/my runs", "holds ' ', which a batch script's #SBATCH lines cannot carry"},
                 {"/shared/it's", "holds ''', which a batch script"},
                 {"/shared/100%", "holds '%'"}}) {
            testing::writeFile(file, QByteArray::fromStdString("[default]\nshared_folder = " + folder + "\n"));
            auto refused = loadProfile(file.toStdString(), "default");
            QVERIFY2(!refused.ok() && refused.error().message.find(said) != std::string::npos,
                     refused.ok() ? folder.c_str() : refused.error().message.c_str());
        }
        testing::writeFile(file, "[default]\nshared_folder = /shared/me\n");
        QVERIFY(loadProfile(file.toStdString(), "default").ok());
        ClusterProfile gpus;
        QCOMPARE(gpusPerNode(gpus), 0);
        gpus.extraSbatch = {"--exclusive", "--gres=gpu:h100:8"};
        QCOMPARE(gpusPerNode(gpus), 8);
        gpus.extraSbatch = {"--gpus-per-node=4"};
        QCOMPARE(gpusPerNode(gpus), 4);
    }

    // SLURM's time formats, and a warning that would come as every attempt starts.
    void timeLimitsAndTheWarning()
    {
        const std::vector<std::pair<std::string, long>> times = {{"90", 5400},     {"10:30", 630},     {"01:30:00", 5400},
                                                                 {"2-12", 216000}, {"1-01:30", 91800}, {"1-00:00:10", 86410}};
        for (const auto& [text, seconds] : times) {
            auto parsed = timeLimitSeconds(text);
            QVERIFY2(parsed.ok() && *parsed && **parsed == seconds, text.c_str());
        }
        QVERIFY(timeLimitSeconds("").ok() && !*timeLimitSeconds(""));
        QVERIFY(timeLimitSeconds("UNLIMITED").ok() && !*timeLimitSeconds("UNLIMITED"));
        for (const char* bad : {"1h", "1:2:3:4", "-5", "a-1"})
            QVERIFY2(!timeLimitSeconds(bad).ok(), bad);
        ClusterProfile profile;
        profile.name = "short";
        profile.timeLimit = "2"; // 120 s
        profile.warningSeconds = 120;
        auto refused = checkWarningFits(profile);
        QVERIFY(!refused.ok());
        QVERIFY2(refused.error().message.find("every attempt would be told to stop as it starts") != std::string::npos
                     && refused.error().message.find("warning_seconds under 90") != std::string::npos,
                 refused.error().message.c_str());
        profile.warningSeconds = 60;
        QVERIFY(checkWarningFits(profile).ok());
        profile.timeLimit.clear();
        profile.warningSeconds = 100000;
        QVERIFY(checkWarningFits(profile).ok()); // no limit, no warning
        profile.timeLimit = "soon";
        QVERIFY(!checkWarningFits(profile).ok());
    }

    // The script runs with stand-ins: scontrol answers as a 2-node cluster whose node names do not
    // resolve (and writes down a requeue), srun runs the task once per node with that node's
    // SLURM_NODEID, and "shardscope" writes its arguments and exits with $FAKE_EXIT. Each node's
    // launcher gets its own machine rank and the head's address; a second attempt resumes from the
    // shared checkpoints; a launcher's 75 (a checkpoint saved on the warning signal) requeues the job.
    void batchScriptGivesEachNodeItsRank()
    {
        QTemporaryDir dir;
        const QString bin = dir.filePath(QStringLiteral("bin"));
        QVERIFY(QDir().mkpath(bin));
        auto tool = [&](const QString& name, const QByteArray& body) {
            testing::writeFile(bin + "/" + name, "#!/bin/bash\n" + body);
            QFile(bin + "/" + name).setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
        };
        const QByteArray requeues = dir.filePath(QStringLiteral("requeues")).toUtf8();
        // A long node list: a script that read only its first line with `head` would see scontrol
        // die of SIGPIPE, and pipefail end the job (it did, now and then, with two names).
        tool(QStringLiteral("scontrol"),
             "if [ \"$1\" = requeue ]; then echo \"$2\" >> \"" + requeues
                 + "\"; elif [ \"$2\" = hostnames ]; then for i in $(seq 1 20000); do echo n$i; "
                   "done; else echo \"NodeName=n1 Arch=x86_64 NodeAddr=10.1.2.3 NodeHostName=vm\"; fi\n");
        tool(QStringLiteral("srun"),
             "shift 3\nstatus=0\nfor id in 0 1; do SLURM_NODEID=$id \"$@\" || status=$?; done\nexit $status\n");
        tool(QStringLiteral("fake-shardscope"),
             "echo \"$@\" >> \"" + dir.filePath(QStringLiteral("calls")).toUtf8() + "\"\nexit ${FAKE_EXIT:-0}\n");
        BatchRequest request;
        request.profile.partition = "debug";
        request.profile.timeLimit = "00:10:00";
        request.profile.warningSeconds = 90;
        request.profile.extraSbatch = {"--exclusive"};
        request.runName = "two-nodes";
        const QString runDir = dir.filePath(QStringLiteral("runs/two nodes")); // a space: quoted
        request.runDir = runDir.toStdString();
        request.nodes = 2;
        request.processesPerNode = 2;
        request.shardscope = (bin + "/fake-shardscope").toStdString();
        request.launchArgs = {"--recipe", "/shared/r.yaml"};
        request.engineFlags = {"--threads", "1"};
        const std::string script = batchScript(request);
        for (const char* line :
             {"#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=1\n", "#SBATCH --partition=debug\n", "#SBATCH --time=00:10:00\n",
              "#SBATCH --exclusive\n", "#SBATCH --requeue\n", "#SBATCH --signal=USR1@90\n"})
            QVERIFY2(script.find(line) != std::string::npos, line);
        testing::writeFile(dir.filePath(QStringLiteral("job.sh")), QByteArray::fromStdString(script));
        // One attempt of the job: the calls the nodes' launchers got, and the script's exit code.
        auto attempt = [&](int restartCount, int launcherExit) {
            QFile::remove(dir.filePath(QStringLiteral("calls")));
            QProcess run;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert(QStringLiteral("PATH"), bin + ":" + env.value(QStringLiteral("PATH")));
            env.insert(QStringLiteral("SLURM_JOB_NODELIST"), QStringLiteral("n[1-2]"));
            env.insert(QStringLiteral("SLURM_JOB_ID"), QStringLiteral("1234"));
            env.insert(QStringLiteral("SLURM_NODEID"), QStringLiteral("0")); // the batch shell's, which no node may take
            env.insert(QStringLiteral("SLURM_RESTART_COUNT"), QString::number(restartCount));
            env.insert(QStringLiteral("FAKE_EXIT"), QString::number(launcherExit));
            run.setProcessEnvironment(env);
            run.setProcessChannelMode(QProcess::MergedChannels);
            run.start(QStringLiteral("bash"), {dir.filePath(QStringLiteral("job.sh"))});
            if (!run.waitForFinished(30000))
                return std::pair{QStringList(), -1};
            QFile calls(dir.filePath(QStringLiteral("calls")));
            if (!calls.open(QIODevice::ReadOnly))
                return std::pair{QStringList(), -2};
            return std::pair{QString::fromUtf8(calls.readAll()).trimmed().split('\n'), run.exitCode()};
        };
        const auto [first, firstExit] = attempt(0, 75);
        QCOMPARE(firstExit, 75);
        QCOMPARE(first.size(), 2);
        for (int node = 0; node < 2; ++node) {
            const QString& line = first[node];
            QVERIFY2(line.contains(QStringLiteral("--machine_rank %1 ").arg(node)), qPrintable(line));
            QVERIFY2(line.contains(QStringLiteral("--num_machines 2 --num_processes 4")), qPrintable(line));
            QVERIFY2(line.contains(QStringLiteral("--main_process_ip 10.1.2.3 --main_process_port 21234")), qPrintable(line));
            QVERIFY2(line.contains(QStringLiteral("--runs_dir %1/attempts/0 --run_name node%2 --no_history --checkpoints_dir "
                                                  "%1/checkpoints --recipe /shared/r.yaml -- --threads 1")
                                       .arg(runDir)
                                       .arg(node)),
                     qPrintable(line));
            QVERIFY2(!line.contains(QStringLiteral("--resume_from_checkpoint")), qPrintable(line)); // nothing saved yet
        }
        QCOMPARE(testing::readFile(QString::fromUtf8(requeues)).trimmed(), QByteArray("1234")); // 75: requeued
        const QByteArray attemptFile = testing::readFile(runDir + "/attempts/0/attempt.txt");
        for (const char* field : {"job_id=1234\n", "nodes=n[1-2]\n", "exit=75\n"})
            QVERIFY2(attemptFile.contains(field), attemptFile.constData());

        // The requeued attempt: a whole checkpoint in the shared folder (a half-written one beside it).
        QVERIFY(QDir().mkpath(runDir + "/checkpoints/step_4"));
        QVERIFY(QDir().mkpath(runDir + "/checkpoints/step_6.tmp"));
        testing::writeFile(runDir + "/checkpoints/step_4/manifest.json", "{}");
        const auto [second, secondExit] = attempt(1, 0);
        QCOMPARE(secondExit, 0);
        QCOMPARE(second.size(), 2);
        for (const QString& line : second) {
            QVERIFY2(line.contains(QStringLiteral("--runs_dir %1/attempts/1 ").arg(runDir)), qPrintable(line));
            QVERIFY2(
                line.contains(
                    QStringLiteral("--recipe /shared/r.yaml --resume_from_checkpoint %1/checkpoints -- --threads 1").arg(runDir)),
                qPrintable(line));
        }
        QCOMPARE(testing::readFile(QString::fromUtf8(requeues)).trimmed(), QByteArray("1234")); // not again: it ended well
    }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "tst_slurm.moc"
