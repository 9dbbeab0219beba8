// The `shardscope` subcommands of Accelerate's config and the estimate, run as a user runs them: the questionnaire on a
// piped stdin, `config default`, `config validate`, `env`, and `estimate-memory`, whose table in
// docs/MEMORY_ESTIMATE.md must be what the command prints today.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/oracle_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <sys/wait.h>

using namespace shardscope::config;
using shardscope::testing::shellQuote;

namespace {

std::string binary() { return std::string(SHARDSCOPE_BINARY_DIR) + "/app/shardscope"; }

struct Run {
    int rc = -1;
    std::string out;
};

Run run(const std::string& args, const std::string& stdinText = {}, const std::string& envPrefix = {})
{
    QTemporaryDir tmp;
    const std::string in = tmp.path().toStdString() + "/stdin";
    (void)writeTextFile(in, stdinText);
    const std::string cmd = envPrefix + " " + shellQuote(binary()) + " " + args + " < " + shellQuote(in) + " 2>&1";
    Run r;
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
        r.out.append(buf, n);
    const int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

} // namespace

class TestConfigCli : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;

private slots:
    void questionnaireOnPipedStdin()
    {
        const std::string file = m_tmp.path().toStdString() + "/fsdp.yaml";
        // The reference's §1.3 example: FSDP2, transformer wrap, 2 GPUs, bf16.
        const Run r = run("config --config_file " + shellQuote(file),
                          "0\n4\n1\nno\nno\nno\nyes\n1\nyes\nno\n0\nyes\n0\nyes\nno\nno\n2\n2\n");
        QVERIFY2(r.rc == 0, r.out.c_str());
        QVERIFY(r.out.find("Which type of machine are you using?") != std::string::npos);
        QVERIFY(r.out.find("accelerate configuration saved at " + file) != std::string::npos);
        auto text = readTextFile(file);
        QVERIFY(text.ok());
        QVERIFY(text->rfind("compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: FSDP\n", 0) == 0);
        QVERIFY(text->find("  fsdp_version: 2\n") != std::string::npos);
        QVERIFY(text->find("mixed_precision: bf16\n") != std::string::npos);
        const Run cut = run("config --config_file " + shellQuote(file + ".2"), "0\n4\n");
        QCOMPARE(cut.rc, 1); // the input ended early: an error, no file
        QVERIFY(cut.out.find("input ended") != std::string::npos);
    }

    void defaultConfigIsJsonAndNeverOverwritten()
    {
        const std::string file = m_tmp.path().toStdString() + "/default.yaml";
        Run r = run("config default --config_file " + shellQuote(file) + " --mixed_precision BF16");
        QVERIFY2(r.rc == 0, r.out.c_str());
        auto text = readTextFile(file);
        QVERIFY(text.ok());
        QVERIFY(text->rfind("{\n  \"compute_environment\": \"LOCAL_MACHINE\",\n", 0) == 0);
        QVERIFY(text->find("\"downcast_bf16\": false") != std::string::npos);
        QVERIFY(text->find("\"mixed_precision\": \"bf16\"") != std::string::npos);
        QVERIFY(loadAccelerateConfig(file).ok());
        r = run("config default --config_file " + shellQuote(file));
        QVERIFY(r.out.find("will not override") != std::string::npos);
    }

    void validateReportsEveryErrorWithPosition()
    {
        const std::string bad = m_tmp.path().toStdString() + "/bad.yaml";
        QVERIFY(writeTextFile(bad, "distributed_type: MULTI_GPU\nnum_processes: '2'\ngpu_ids: 0\n").ok());
        Run r = run("config validate " + shellQuote(bad));
        QCOMPARE(r.rc, 1);
        QVERIFY2(r.out.find(bad + ":2:16: error: num_processes must be an integer") != std::string::npos, r.out.c_str());
        QVERIFY2(r.out.find(bad + ":3:10: error: gpu_ids") != std::string::npos, r.out.c_str());
        const std::string good = shardscope::testing::corpusDir() + "/examples__torch_native_parallelism__configs__cp.yaml";
        r = run("config validate " + shellQuote(good));
        QCOMPARE(r.rc, 0);
        QVERIFY(r.out.find("distributed_type: FSDP\n") != std::string::npos);
        r = run("config validate " + shellQuote(shardscope::testing::corpusDir() + "/tests__test_configs__invalid_keys.yaml"));
        QCOMPARE(r.rc, 1);
        QVERIFY(r.out.find("had unknown keys (['another_invalid_key', 'invalid_key'])") != std::string::npos);
    }

    // #23: fp8 on the CPU is not an error (it runs emulated), for a launch too; the warning says so.
    void validateWarnsThatFp8OnTheCpuIsEmulated()
    {
        const std::string file = m_tmp.path().toStdString() + "/fp8-cpu.yaml";
        QVERIFY(writeTextFile(file, "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\nuse_cpu: true\n").ok());
        for (const char* flags : {"", " --for_launch"}) {
            const Run r = run("config validate " + shellQuote(file) + flags);
            QVERIFY2(r.rc == 0, r.out.c_str());
            QVERIFY2(r.out.find("warning: mixed_precision fp8 on the CPU runs emulated") != std::string::npos, r.out.c_str());
            QVERIFY2(r.out.find("mixed_precision: fp8\n") != std::string::npos, r.out.c_str());
        }
    }

    void envPrintsTheConfig()
    {
        const Run r = run("env --config_file "
                          + shellQuote(shardscope::testing::corpusDir() + "/tests__test_configs__latest.yaml"));
        QVERIFY2(r.rc == 0, r.out.c_str());
        QVERIFY(r.out.find("- `Accelerate` config passed:\n\t- compute_environment: LOCAL_MACHINE\n\t- distributed_type: NO\n"
                           "\t- mixed_precision: no\n\t- use_cpu: False\n")
                != std::string::npos);
        QVERIFY(r.out.find("\t- same_network: True\n") != std::string::npos); // Python's str()
    }

    void memoryTableInDocsIsTheCommandsOutput()
    {
        Run r = run("estimate-memory --params 7B --num_processes 8 --markdown");
        QCOMPARE(r.rc, 0);
        r.out = r.out.substr(0, r.out.find("note:")); // the docs explain the notes in prose
        auto docs = readTextFile(shardscope::testing::sourceDir() + "/docs/MEMORY_ESTIMATE.md");
        QVERIFY(docs.ok());
        QVERIFY2(docs->find(r.out) != std::string::npos, ("docs/MEMORY_ESTIMATE.md is stale; regenerate:\n" + r.out).c_str());
        QVERIFY(r.out.find("| ZeRO-2 | fp16/bf16 mixed | 13.04 GB | 1.63 GB | 9.78 GB | - | 24.45 GB | - |")
                != std::string::npos);
        const Run table = run("estimate-memory --params 7B --num_processes 8");
        QVERIFY(table.out.find("\u250c") == 0);
        const Run noSize = run("estimate-memory");
        QCOMPARE(noSize.rc, 1);
    }
};

QTEST_APPLESS_MAIN(TestConfigCli)
#include "tst_config_cli.moc"
