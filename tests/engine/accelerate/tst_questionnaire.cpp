// The questionnaire against `accelerate config` itself: each script of answer lines is fed to
// our terminal front end and, by tests/tools/accelerate_oracle.py, to Accelerate's own
// get_user_input(); the prompts asked (text, order, re-asks) and the file written must be equal.

#include "engine/accelerate/questionnaire.h"
#include "engine/accelerate/questionnaire_terminal.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/oracle_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <map>
#include <sstream>

using namespace shardscope::config;

namespace {

using Script = std::vector<std::string>;

// Branch name -> the lines a user types (an empty line takes the default).
const std::map<std::string, Script>& scripts()
{
    static const std::map<std::string, Script> s = {
        {"01_no_distribution", {"0", "0", "no", "no", "no", "", "", "1"}},
        {"02_no_distribution_cpu_only", {"", "0", "yes", "no", "no", "0"}},
        {"03_multi_cpu_mpirun", {"0", "1", "", "", "yes", "", "no", "4", "2"}},
        {"04_multi_cpu_custom_hostfile", {"0", "1", "1", "yes", "yes", "  /etc/hosts.mpi  ", "no", "2", ""}},
        {"05_multi_gpu", {"0", "4", "1", "no", "no", "no", "no", "no", "2", "0,1", "yes", "1"}},
        {"06_fsdp_v1",
         {"0", "4", "", "", "no", "no", "yes", "0", "1", "no", "1", "2000", "", "2", "no", "yes", "no", "no", "yes", "8", "2"}},
        {"07_fsdp_v1_ram_efficient",
         {"0", "4", "", "", "no", "no", "yes", "0", "3", "yes", "0", "yes", "2", "1", "yes", "", "", "", "4", "1"}},
        {"08_fsdp_v2_reference_example",
         {"0", "4", "1", "no", "no", "no", "yes", "1", "yes", "no", "0", "yes", "0", "yes", "no", "no", "2", "2"}},
        {"09_fsdp_v2_parallelism", {"0", "4", "", "",    "no", "no", "yes", "",  "",  "",  "", "no", "LlamaDecoderLayer",
                                    "",  "",  "", "yes", "2",  "2",  "1",   "2", "1", "8", "2"}},
        {"10_deepspeed_without_json",
         {"0", "4", "", "", "no", "yes", "no", "3", "1", "2", "", "4", "yes", "0.5", "yes", "yes", "no", "8", "2"}},
        {"11_deepspeed_with_json",
         {"0", "4", "", "", "no", "yes", "yes", "ds_config.json", "no", "yes", "MixtralSparseMoeBlock", "4"}},
        {"12_deepspeed_single_process", {"0", "0", "no", "no", "yes", "no", "1", "", "no", "no", "", "1", "2"}},
        {"13_multi_node_deepspeed",
         {"0", "4", "2", "1",  "10.0.0.1", "29500", "no", "c10d",          "yes", "no",    "yes", "no", "",
          "",  "",  "",  "no", "no",       "no",    "",   "/job/hostfile", "yes", "host1", "no",  "16", "1"}},
        {"14_multi_node_gpu", {"0", "4", "2", "0", "192.168.1.1", "29501", "", "", "no", "no", "no", "no", "16", "", "", ""}},
        {"15_fp8_te",
         {"0", "4", "", "", "no", "no", "no", "no", "2", "", "", "3", "1", "", "", "2", "1", "", "1", "yes", "yes", "no", ""}},
        {"16_fp8_ao", {"0", "4", "", "", "no", "no", "no", "no", "2", "", "", "3", "0", "no", ""}},
        {"17_fp8_msamp", {"0", "0", "no", "no", "no", "", "", "3", "2", "0"}},
        {"18_dynamo", {"0", "0", "no", "yes", "", "yes", "1", "yes", "no", "yes", "no", "", "", ""}},
        {"19_megatron_lm", {"0", "4", "", "", "no", "no", "no", "yes", "2", "", "2", "4", "", "no", "0.5", "8", "2"}},
        {"20_tpu_cluster",
         {"0", "10", "no", "8", "", "yes", "my-tpu", "us-central1-a", "", "yes", "no", "pip install x", "yes", "echo hi", "",
          "vm1,vm2", "A=1"}},
        {"21_tpu_dynamo_command_file",
         {"0", "10", "yes", "3", "no", "4", "train", "yes", "t", "z", "sudo please", "yes", "yes", "scripts/start.sh", "", ""}},
        {"22_multi_xpu", {"0", "2", "", "", "no", "no", "no", "4", "", "2"}},
        {"23_multi_neuron", {"0", "9", "", "", "no", "no", "no", "32", "", ""}},
        // Full-width and Arabic-Indic digits: Python's int() reads them (a menu index, a number).
        {"24_unicode_digits", {"0", "\uFF14", "1", "no", "no", "no", "no", "no", "\u0662", "0,1", "yes", " \uFF11 "}},
        {"24_bad_answers_reasked",
         {"0", "4", "x", "1", "maybe", "no", "Y", "no", "no", "no", "no", "no", "two", "2", "", "", ""}},
        {"25_multi_gpu_one_process_is_an_error", {"0", "4", "", "", "no", "no", "no", "no", "1"}},
        {"26_deepspeed_on_neuron_is_an_error", {"0", "9", "", "", "no", "yes"}},
        {"27_multi_hpu_fsdp_nvme", {"0", "3", "", "", "no", "no", "yes", "1", "no", "", "2", "", "", "", "", "8", "1"}},
        {"29_mpirun_hostfile_of_a_user", {"0", "1", "1", "yes", "yes", "~root/hostfile", "no", "2", ""}},
        {"28_deepspeed_nvme_offload",
         {"0", "4", "", "", "no", "yes", "no", "2", "2", "2", "/mnt/a", "/mnt/b", "", "", "no", "no", "4", "0"}},
    };
    return s;
}

// Menus answered with a choice's text (label or value, any case): our lines, and the same answers
// by index for Accelerate (whose line mode would take the default for text).
struct TextScript {
    Script ours;
    Script accelerate;
};
const std::map<std::string, TextScript>& textScripts()
{
    static const std::map<std::string, TextScript> s = {
        {"29_text_multi_cpu",
         {{"This machine", "MULTI_CPU", "", "", "yes", "", "no", "4", "2"}, {"0", "1", "", "", "yes", "", "no", "4", "2"}}},
        {"30_text_fp8_te",
         {{"0",  "multi-GPU", "", "",  "no",   "no", "no",          "no",  "2",   "",   "", "fp8",
           "te", "",          "", "2", "e4m3", "",   "most_recent", "yes", "yes", "no", ""},
          {"0", "4", "", "", "no", "no", "no", "no", "2", "", "", "3", "1", "", "", "2", "1", "", "1", "yes", "yes", "no", ""}}},
        {"31_text_deepspeed_offload",
         {{"0", "4", "", "", "no", "yes", "no", "3", "CPU", " nvme ", "", "4", "yes", "0.5", "yes", "yes", "no", "8", "2"},
          {"0", "4", "", "", "no", "yes", "no", "3", "1", "2", "", "4", "yes", "0.5", "yes", "yes", "no", "8", "2"}}},
        {"32_text_dynamo_onnxrt",
         {{"0", "0", "no", "yes", "onnxrt", "yes", "reduce-overhead", "yes", "no", "yes", "no", "", "", ""},
          {"0", "0", "no", "yes", "8", "yes", "1", "yes", "no", "yes", "no", "", "", ""}}},
        {"33_text_fp8_msamp",
         {{"0", "0", "no", "no", "no", "", "", "fp8", "msamp", "0"}, {"0", "0", "no", "no", "no", "", "", "3", "2", "0"}}},
    };
    return s;
}

const Script& ourScript(const std::string& name)
{
    if (auto it = textScripts().find(name); it != textScripts().end())
        return it->second.ours;
    return scripts().at(name);
}

struct OurRun {
    std::vector<std::string> prompts;
    std::string yaml;
    std::string error;
    std::string printed;
    std::size_t unused = 0;
};

// Drives the session line by line (to record the prompts) and the terminal front end (the
// user-visible output and the file).
OurRun runOurs(const Script& script)
{
    OurRun run;
    QuestionnaireSession session;
    std::size_t used = 0;
    while (session.current() && used < script.size()) {
        run.prompts.push_back(session.currentPrompt());
        (void)session.answerLine(script[used++]);
    }
    run.unused = script.size() - used;
    std::string joined;
    for (const auto& l : script)
        joined += l + "\n";
    std::istringstream in(joined);
    std::ostringstream out;
    auto cfg = runTerminalQuestionnaire(in, out);
    run.printed = out.str();
    if (cfg)
        run.yaml = toYamlText(*cfg);
    else
        run.error = cfg.error().message;
    return run;
}

} // namespace

class TestQuestionnaire : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    bool m_haveOracle = false;
    std::string m_why;
    nlohmann::json m_oracle;

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        nlohmann::json all = nlohmann::json::object();
        for (const auto& [name, lines] : scripts())
            all[name] = lines;
        for (const auto& [name, text] : textScripts())
            all[name] = text.accelerate;
        const std::string path = m_tmp.path().toStdString() + "/scripts.json";
        QVERIFY(writeTextFile(path, all.dump()).ok());
        if (auto r = shardscope::testing::runOracle({"questionnaire", path}, m_why)) {
            m_haveOracle = true;
            m_oracle = std::move(*r);
        }
    }

    void branchMatchesAccelerate_data()
    {
        QTest::addColumn<QString>("name");
        for (const auto& [name, lines] : scripts())
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
        for (const auto& [name, text] : textScripts())
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }
    void branchMatchesAccelerate()
    {
        QFETCH(QString, name);
        if (!m_haveOracle)
            QSKIP(m_why.c_str());
        const auto& ref = m_oracle.at(name.toStdString());
        const OurRun ours = runOurs(ourScript(name.toStdString()));

        std::vector<std::string> theirPrompts = ref["prompts"].get<std::vector<std::string>>();
        for (std::size_t i = 0; i < std::max(theirPrompts.size(), ours.prompts.size()); ++i) {
            const std::string t = i < theirPrompts.size() ? theirPrompts[i] : "<none>";
            const std::string o = i < ours.prompts.size() ? ours.prompts[i] : "<none>";
            QVERIFY2(t == o, ("question " + std::to_string(i + 1) + ":\n  accelerate: " + t + "\n  shardscope: " + o).c_str());
        }
        QCOMPARE(ours.unused, static_cast<std::size_t>(ref["unused_answers"].get<int>()));
        if (!ref["ok"].get<bool>()) {
            const std::string theirs = ref["error"].get<std::string>();
            const std::string message = theirs.substr(theirs.find(": ") + 2);
            QVERIFY2(!ours.error.empty(), ("Accelerate fails with " + theirs + " but we wrote a file").c_str());
            QVERIFY2(ours.error.find(message) != std::string::npos, (ours.error + " vs " + theirs).c_str());
            return;
        }
        QVERIFY2(ours.error.empty(), ours.error.c_str());
        QCOMPARE(ours.yaml, ref["yaml"].get<std::string>());
        const bool theyNoteTf32 = ref["printed"].get<std::string>().find("requires TF32") != std::string::npos;
        QCOMPARE(ours.printed.find("requires TF32") != std::string::npos, theyNoteTf32);
        // What we write loads back to the same config.
        auto back = parseAccelerateConfig(ours.yaml, "written.yaml", FileFormat::Yaml);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(toYamlText(*back), ours.yaml);
    }

    // Oracle-free: the reference's §1.3 example, byte for byte.
    void referenceFsdpExampleBytes()
    {
        const OurRun run = runOurs(scripts().at("08_fsdp_v2_reference_example"));
        QCOMPARE(run.yaml, std::string("compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: FSDP\n"
                                       "downcast_bf16: 'no'\nenable_cpu_affinity: false\nfsdp_config:\n"
                                       "  fsdp_activation_checkpointing: false\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                                       "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_offload_params: false\n"
                                       "  fsdp_reshard_after_forward: true\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
                                       "  fsdp_version: 2\nmachine_rank: 0\nmain_training_function: main\n"
                                       "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 2\nrdzv_backend: static\n"
                                       "same_network: true\ntpu_env: []\ntpu_use_cluster: false\ntpu_use_sudo: false\n"
                                       "use_cpu: false\n"));
    }

    void menuTextThatMatchesNoChoiceIsAskedAgain()
    {
        // Accelerate's line mode would silently take the default here; we say what is accepted.
        QuestionnaireSession s;
        QVERIFY(s.answerLine("0").accepted);
        const auto outcome = s.answerLine("gpu please");
        QVERIFY(!outcome.accepted);
        QCOMPARE(s.current()->id, std::string("distributed_type"));
        QVERIFY2(outcome.message.find("'gpu please' is not one of the choices") != std::string::npos, outcome.message.c_str());
        QVERIFY2(outcome.message.find("multi-GPU") != std::string::npos, outcome.message.c_str());
        QVERIFY(s.answerLine("Multi-gpu").accepted);
        QCOMPARE(s.answers().get("distributed_type"), Value("MULTI_GPU"));
    }

    void promptsNameTheMachine()
    {
        Hardware npu;
        npu.acceleratorLabel = "NPU(s)";
        QuestionnaireSession s(npu);
        for (const char* line : {"0", "5", "", "", "no", "no", "no", "2"})
            QVERIFY(s.answerLine(line).accepted);
        QCOMPARE(
            s.currentPrompt(),
            std::string("What NPU(s) (by id) should be used for training on this machine as a comma-separated list? [all]:"));
    }

    void appleMpsHidesDeepSpeedAndGpuIds()
    {
        Hardware mac;
        mac.mpsAvailable = true;
        QuestionnaireSession s(mac);
        for (const char* line : {"0", "0", "no", "no"})
            QVERIFY(s.answerLine(line).accepted);
        QVERIFY(s.current());
        QCOMPARE(s.current()->id, std::string("mixed_precision"));
    }

    void guiAnswersTypedValues()
    {
        QuestionnaireSession s;
        QVERIFY(s.answer(Value("LOCAL_MACHINE")).ok());
        QVERIFY(s.answer(Value("MULTI_GPU")).ok());
        QVERIFY(!s.answer(Value("two")).ok()); // num_machines wants an integer
        QVERIFY(s.answer(Value(1)).ok());
        QVERIFY(s.answer(Value(false)).ok()); // debug
        QVERIFY(s.answer(Value(false)).ok()); // dynamo
        QVERIFY(s.answer(Value(false)).ok()); // deepspeed
        QVERIFY(s.answer(Value(true)).ok()); // fsdp
        QVERIFY(!s.answer(Value(3)).ok()); // fsdp_version is 1 or 2
        QVERIFY(s.answer(Value(2)).ok());
        QCOMPARE(s.current()->id, std::string("fsdp_reshard_after_forward"));
    }

    void everyQuestionWritesAKnownKey()
    {
        // The tree only writes keys the schema knows, so the GUI can map a field to its question.
        for (const auto& q : questionTree()) {
            if (q.configKey.empty())
                continue;
            QVERIFY2(!q.prompt.empty(), q.id.c_str());
        }
        QVERIFY(questionTree().size() > 80);
    }
};

QTEST_APPLESS_MAIN(TestQuestionnaire)
#include "tst_questionnaire.moc"
