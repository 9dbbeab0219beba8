// Loading and saving Accelerate config files, compared with the real Accelerate: every corpus
// file loads (or is rejected) as Accelerate does it, with the same field values, the bytes we
// write are the bytes Accelerate writes, and Accelerate loads our files back to the same values.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/oracle_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <map>

using namespace shardscope::config;
using shardscope::testing::canonical;
using shardscope::testing::toOracleJson;

namespace {

// YAML snippets whose scalars YAML 1.1 (PyYAML) and YAML 1.2 read differently.
const std::map<std::string, std::string> kScalarCases = {
    {"unquoted_no", "distributed_type: NO\nmixed_precision: no\nuse_cpu: Off\n"},
    {"exponent_without_dot", "distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: 1e8\n  a: 1.0e8\n  b: 1.0e+8\n"},
    {"yaml11_ints",
     "distributed_type: 'NO'\nfsdp_config:\n  octal: 010\n  hex: 0x10\n  under: 1_000\n  sexa: 1:30\n  neg: -7\n  plus: +3\n"},
    {"yaml11_floats",
     "distributed_type: 'NO'\nfsdp_config:\n  dot: .5\n  inf: .inf\n  ninf: -.Inf\n  trail: 1.\n  big: 6.02e+23\n"},
    {"nulls_and_bools",
     "distributed_type: 'NO'\nfsdp_config:\n  a: ~\n  b: null\n  c:\n  d: y\n  e: n\n  f: 'yes'\n  g: TRUE\n  h: on\n"},
    {"gpu_ids_forms", "distributed_type: MULTI_GPU\ngpu_ids: 0,1\nnum_processes: '4'\nmain_process_port: 29500\n"},
    {"duplicate_keys", "distributed_type: 'NO'\ndebug: false\ndebug: true\n"},
    {"merge_key", "distributed_type: 'NO'\nfsdp_config:\n  <<: {x: 1, y: 2}\n  y: 3\n"},
    {"tuple_string",
     "distributed_type: MULTI_GPU\nmixed_precision: fp8\nfp8_config:\n  override_linear_precision: (false, false, false)\n"},
    {"legacy_keys", "distributed_type: MULTI_GPU\nfp16: true\ndynamo_backend: INDUCTOR\n"},
    {"legacy_dynamo_no", "distributed_type: MULTI_GPU\ndynamo_backend: 'NO'\nnum_processes: 2\n"},
    {"unknown_nested_kept", "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  my_extra: {a: [1, 2, {b: c}]}\n"},
    {"flow_style", "{distributed_type: MULTI_CPU, num_processes: 4, mpirun_config: {mpirun_hostfile: /h}}\n"},
    {"empty_values", "distributed_type: 'NO'\nfsdp_config: {}\ndeepspeed_config:\ntpu_env: []\ncommands: null\n"},
    {"strings_needing_quotes",
     "distributed_type: 'NO'\nmain_training_function: 'null'\nrdzv_backend: '0'\ntpu_name: ''\ntpu_zone: ' lead'\n"
     "command_file: 'a: b'\ndeepspeed_config:\n  deepspeed_hostfile: '#x'\n  deepspeed_inclusion_filter: '2020-01-01'\n"
     "  deepspeed_exclusion_filter: \"caf\\u00e9 \\U0001F917\"\n  deepspeed_moe_layer_cls_names: \"line1\\nline2\"\n"
     "  zz: \"it's\"\n  zq: '- dash'\n  z1: '1.5'\n  z2: ':x'\n  z3: 'a #b'\n  z4: '@at'\n"},
    {"long_strings", "distributed_type: 'NO'\ncommands:\n- echo one two three four five six seven eight nine ten eleven twelve "
                     "thirteen fourteen fifteen\n"
                     "- 'quoted: with a colon and spaces that go on and on for a long time past the eighty column mark ok'\n"
                     "- \"tab\\there and a long long long long long long long long long long long long long long long text\"\n"
                     "tpu_vm:\n- [nested, list]\n- {k: v, j: [1]}\n"},
    {"escape_then_wrap", "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: "
                         "\"/home/ubuntu/accelerate/examples/deepspeed_config_templates/"
                         "z\\xE9ero_stage3_offload_config.jsonero_stage3_offload_config.jsonero\"\n"},
    {"not_a_mapping", "- a\n- b\n"},
    {"empty_file", ""},
    {"invalid_distributed_type", "distributed_type: TP\n"},
    {"invalid_compute_environment",
     "compute_environment: CLOUD\ndistributed_type: 'NO'\nec2_instance_type: x\niam_role_name: y\n"},
    {"sagemaker_missing_required", "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: DATA_PARALLEL\n"},
    {"ipex_removed", "distributed_type: MULTI_CPU\nipex_config:\n  ipex: false\n"},
    {"json_like_yaml", "{\"compute_environment\": \"LOCAL_MACHINE\", \"distributed_type\": \"NO\", \"downcast_bf16\": false}\n"},
};

struct OracleRun {
    bool available = false;
    std::string why;
    nlohmann::json result;
};

} // namespace

class TestAccelerateConfig : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    OracleRun m_oracle;
    std::map<std::string, std::string> m_ourYamlPath; // corpus/snippet path -> our saved YAML
    std::map<std::string, std::string> m_ourJsonPath;
    std::map<std::string, std::string> m_snippetPath;

    static std::vector<std::string> corpusFiles(bool json)
    {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(shardscope::testing::corpusDir())) {
            const auto ext = e.path().extension().string();
            if (json ? ext == ".json" : (ext == ".yaml" || ext == ".yml"))
                out.push_back(e.path().string());
        }
        std::sort(out.begin(), out.end());
        return out;
    }

    const nlohmann::json& oracleFor(const std::string& path)
    {
        static const nlohmann::json empty;
        auto it = m_oracle.result.find(path);
        return it == m_oracle.result.end() ? empty : *it;
    }

    // The shared comparison: our load of `path` versus Accelerate's.
    void compareWithAccelerate(const std::string& path)
    {
        if (!m_oracle.available)
            QSKIP(m_oracle.why.c_str());
        const nlohmann::json& ref = oracleFor(path);
        QVERIFY2(!ref.is_null(), ("the oracle has no entry for " + path).c_str());
        auto ours = loadAccelerateConfig(path);

        // Raw parse: PyYAML safe_load / json.load versus ours.
        if (ref.contains("raw")) {
            auto text = readTextFile(path);
            QVERIFY(text.ok());
            auto raw = formatForPath(path) == FileFormat::Json ? parseJson(*text, path) : parseYaml(*text, path);
            QVERIFY2(raw.ok(), raw.ok() ? "" : raw.error().message.c_str());
            QCOMPARE(canonical(toOracleJson(*raw)), canonical(ref["raw"]));
        }

        if (!ref["ok"].get<bool>()) {
            QVERIFY2(!ours.ok(),
                     ("Accelerate rejects this file (" + ref["error"].get<std::string>() + ") but we load it").c_str());
            const std::string theirs = ref["error"].get<std::string>();
            // Same reason: our message carries Accelerate's sentence (Python's TypeError/ValueError
            // text), followed by where and how to fix it.
            const std::string mine = ours.error().message;
            if (ref["error_type"] == "AttributeError")
                QVERIFY2(mine.find("not a mapping of config keys") != std::string::npos, mine.c_str());
            else
                QVERIFY2(mine.find(theirs) != std::string::npos,
                         ("our message\n  " + mine + "\ndoes not contain Accelerate's\n  " + theirs).c_str());
            return;
        }
        QVERIFY2(ours.ok(), ours.ok() ? "" : ours.error().message.c_str());
        QCOMPARE(ours->kind() == ConfigKind::Cluster ? std::string("ClusterConfig") : std::string("SageMakerConfig"),
                 ref["kind"].get<std::string>());
        // Same values in every dataclass field, defaults included.
        QCOMPARE(canonical(toOracleJson(ours->allFields())), canonical(ref["fields"]));
        // The bytes Accelerate's writers produce.
        QCOMPARE(toYamlText(*ours), ref["yaml"].get<std::string>());
        QCOMPARE(toJsonText(*ours), ref["json"].get<std::string>());
        // Our own round trip: load -> save -> load gives an equal config (YAML and JSON).
        auto again = parseAccelerateConfig(toYamlText(*ours), path + " (saved)", FileFormat::Yaml);
        QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
        QVERIFY(*again == *ours);
        QCOMPARE(toYamlText(*again), toYamlText(*ours));
        auto againJson = parseAccelerateConfig(toJsonText(*ours), path + " (saved)", FileFormat::Json);
        QVERIFY2(againJson.ok(), againJson.ok() ? "" : againJson.error().message.c_str());
        QVERIFY(*againJson == *ours);
        // Real Accelerate loads the files we wrote, to the same values.
        for (const auto* saved : {&m_ourYamlPath, &m_ourJsonPath}) {
            const auto it = saved->find(path);
            QVERIFY(it != saved->end());
            const nlohmann::json& back = oracleFor(it->second);
            QVERIFY2(back.value("ok", false), ("Accelerate cannot load our " + it->second + ": " + back.dump()).c_str());
            QCOMPARE(canonical(back["fields"]), canonical(ref["fields"]));
        }
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        const std::string tmp = m_tmp.path().toStdString();
        std::vector<std::string> toLoad;
        for (const auto& [name, text] : kScalarCases) {
            const std::string p = tmp + "/snippet_" + name + ".yaml";
            QVERIFY(writeTextFile(p, text).ok());
            m_snippetPath[name] = p;
        }
        std::vector<std::string> inputs = corpusFiles(false);
        for (const auto& f : corpusFiles(true))
            inputs.push_back(f);
        for (const auto& [name, p] : m_snippetPath)
            inputs.push_back(p);
        int n = 0;
        for (const auto& path : inputs) {
            toLoad.push_back(path);
            auto cfg = loadAccelerateConfig(path);
            if (!cfg)
                continue;
            const std::string y = tmp + "/ours_" + std::to_string(n) + ".yaml";
            const std::string j = tmp + "/ours_" + std::to_string(n++) + ".json";
            QVERIFY(saveAccelerateConfig(*cfg, y).ok());
            QVERIFY(saveAccelerateConfig(*cfg, j).ok());
            m_ourYamlPath[path] = y;
            m_ourJsonPath[path] = j;
            toLoad.push_back(y);
            toLoad.push_back(j);
        }
        std::vector<std::string> args = {"load"};
        args.insert(args.end(), toLoad.begin(), toLoad.end());
        auto result = shardscope::testing::runOracle(args, m_oracle.why);
        if (result) {
            m_oracle.available = true;
            m_oracle.result = std::move(*result);
        }
    }

    // The errors carry their kind and place as fields (the Configure page and editors read them).
    void errorsCarryKindAndPlace()
    {
        using shardscope::ErrorKind;
        auto syntax = parseAccelerateConfig("distributed_type: NO\nmixed_precision: [bf16\n", "c.yaml", FileFormat::Yaml);
        QVERIFY(!syntax.ok());
        QVERIFY(syntax.error().kind == ErrorKind::Syntax);
        QCOMPARE(syntax.error().file, std::string("c.yaml"));
        QVERIFY(syntax.error().line >= 2);
        QVERIFY(syntax.error().column >= 1);
        QVERIFY(!syntax.error().fix.empty());
        QVERIFY(syntax.error().message.find(syntax.error().fix) != std::string::npos);

        auto tab = parseAccelerateConfig("fsdp_config:\n\tfsdp_version: 2\n", "c.yaml", FileFormat::Yaml);
        QVERIFY(!tab.ok());
        QVERIFY(tab.error().kind == ErrorKind::Syntax);
        QCOMPARE(tab.error().line, 2);
        QCOMPARE(tab.error().column, 1);
        QVERIFY(tab.error().fix.find("spaces") != std::string::npos);

        auto badValue = parseAccelerateConfig("num_processes: 2\ndistributed_type: MULTI_GPUS\n", "c.yaml", FileFormat::Yaml);
        QVERIFY(!badValue.ok());
        QVERIFY(badValue.error().kind == ErrorKind::BadValue);
        QCOMPARE(badValue.error().keyPath, std::string("distributed_type"));
        QCOMPARE(badValue.error().line, 2);
        QCOMPARE(badValue.error().column, 19);

        auto unknown = parseAccelerateConfig("distributed_type: NO\nnum_procesess: 2\n", "c.yaml", FileFormat::Yaml);
        QVERIFY(!unknown.ok());
        QVERIFY(unknown.error().kind == ErrorKind::UnknownKey);

        auto missing = loadAccelerateConfig("/nonexistent/shardscope/config.yaml");
        QVERIFY(!missing.ok());
        QVERIFY(missing.error().kind == ErrorKind::Io);
    }

    void corpusYaml_data()
    {
        QTest::addColumn<QString>("path");
        const auto files = corpusFiles(false);
        QVERIFY(files.size() >= 45);
        for (const auto& f : files)
            QTest::newRow(std::filesystem::path(f).filename().string().c_str()) << QString::fromStdString(f);
    }
    void corpusYaml()
    {
        QFETCH(QString, path);
        compareWithAccelerate(path.toStdString());
    }

    // SOURCES.md's verdicts, independent of the oracle: which corpus files Accelerate rejects.
    void corpusVerdictsMatchSources()
    {
        int loaded = 0, rejected = 0;
        for (const auto& f : corpusFiles(false)) {
            auto cfg = loadAccelerateConfig(f);
            cfg.ok() ? ++loaded : ++rejected;
            const auto name = std::filesystem::path(f).filename().string();
            const bool expectReject = name == "tests__test_configs__invalid_keys.yaml"
                                      || name == "docs__source__basic_tutorials__troubleshooting.md__L84-L85.yaml"
                                      || name == "docs__source__usage_guides__sagemaker.md__L175-L175.yaml"
                                      || name == "docs__source__usage_guides__sagemaker.md__L184-L186.yaml"
                                      || name == "docs__source__usage_guides__sagemaker.md__L195-L197.yaml";
            QVERIFY2(cfg.ok() != expectReject, (name + ": " + (cfg.ok() ? "loaded" : cfg.error().message)).c_str());
        }
        QCOMPARE(rejected, 5);
        QCOMPARE(loaded, 40);
    }

    void deepspeedJson_data()
    {
        QTest::addColumn<QString>("path");
        for (const auto& f : corpusFiles(true))
            QTest::newRow(std::filesystem::path(f).filename().string().c_str()) << QString::fromStdString(f);
    }
    void deepspeedJson()
    {
        QFETCH(QString, path);
        const std::string p = path.toStdString();
        auto text = readTextFile(p);
        QVERIFY(text.ok());
        auto parsed = parseJson(*text, p);
        const bool docsWithTrailingCommas = p.find("deepspeed_multiple_model.md") != std::string::npos;
        QCOMPARE(parsed.ok(), !docsWithTrailingCommas);
        if (!m_oracle.available)
            QSKIP(m_oracle.why.c_str());
        const nlohmann::json& ref = oracleFor(p);
        if (ref.contains("raw")) {
            QVERIFY(parsed.ok());
            QCOMPARE(canonical(toOracleJson(*parsed)), canonical(ref["raw"]));
        } else {
            QVERIFY(!parsed.ok());
            // Reported as invalid JSON, at the line Python's json module names.
            const int line = ref["raw_error_line"].get<int>();
            const std::string needle = p + ":" + std::to_string(line) + ":";
            QVERIFY2(parsed.error().message.find(needle) != std::string::npos
                         && parsed.error().message.find("invalid JSON") != std::string::npos,
                     (parsed.error().message + " (expected line " + std::to_string(line) + ")").c_str());
        }
    }

    void yamlScalarsAndWriter_data()
    {
        QTest::addColumn<QString>("name");
        for (const auto& [name, text] : kScalarCases)
            QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }
    void yamlScalarsAndWriter()
    {
        QFETCH(QString, name);
        compareWithAccelerate(m_snippetPath.at(name.toStdString()));
    }

    void unquotedNoIsBooleanFalse()
    {
        auto cfg = parseAccelerateConfig("distributed_type: NO\nmixed_precision: no\n", "x.yaml", FileFormat::Yaml);
        QVERIFY(cfg.ok());
        QVERIFY(cfg->field("distributed_type").isBool());
        QVERIFY(!cfg->field("distributed_type").asBool());
        QCOMPARE(cfg->distributedType(), std::string()); // not the string NO: no type matches
        // Not NO as a string, so num_processes is not filled with 1 (dataclass default -1).
        QCOMPARE(cfg->intField("num_processes").value_or(0), std::int64_t{-1});
        QVERIFY(toYamlText(*cfg).find("distributed_type: false\n") != std::string::npos);
    }

    void malformedYamlNamesLineAndColumn()
    {
        auto r = parseAccelerateConfig("distributed_type: MULTI_GPU\nfsdp_config:\n  a: [1, 2\n  b: 3\n", "bad.yaml",
                                       FileFormat::Yaml);
        QVERIFY(!r.ok());
        QVERIFY2(r.error().message.rfind("bad.yaml:", 0) == 0, r.error().message.c_str());
        QVERIFY2(r.error().message.find("YAML syntax error") != std::string::npos, r.error().message.c_str());
        auto tab = parseAccelerateConfig("distributed_type: 'NO'\nx: \x01\n", "ctl.yaml", FileFormat::Yaml);
        QVERIFY(!tab.ok());
        QVERIFY2(tab.error().message.rfind("ctl.yaml:2:4:", 0) == 0, tab.error().message.c_str());
        auto utf = parseAccelerateConfig("distributed_type: 'NO'\nx: \xff\n", "utf.yaml", FileFormat::Yaml);
        QVERIFY(!utf.ok());
        QVERIFY2(utf.error().message.rfind("utf.yaml:2:4:", 0) == 0, utf.error().message.c_str());
        auto json = parseAccelerateConfig("{\n  \"distributed_type\": \"NO\",\n}\n", "c.json", FileFormat::Json);
        QVERIFY(!json.ok());
        QVERIFY2(json.error().message.rfind("c.json:3:1:", 0) == 0, json.error().message.c_str());
    }

    // Files Accelerate rejects with a message about a consequence: ours carries Accelerate's
    // sentence and, before it, the cause.
    void rejectionsNameTheCause_data()
    {
        QTest::addColumn<QString>("yaml");
        QTest::addColumn<QString>("cause");
        QTest::newRow("lower-case local_machine")
            << "compute_environment: local_machine\ndistributed_type: MULTI_GPU\nnum_processes: 2\n"
            << "Write `compute_environment: LOCAL_MACHINE`";
        QTest::newRow("sagemaker without its fields")
            << "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\nmixed_precision: 'no'\n"
            << "missing 2 required positional arguments: 'ec2_instance_type' and 'iam_role_name'";
        QTest::newRow("tab indentation")
            << "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n\tfsdp_version: 2\n"
            << "c.yaml:4:1: YAML syntax error: this line is indented with a tab";
    }
    void rejectionsNameTheCause()
    {
        QFETCH(QString, yaml);
        QFETCH(QString, cause);
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/c.yaml";
        QVERIFY(writeTextFile(path, yaml.toStdString()).ok());
        auto ours = loadAccelerateConfig(path);
        QVERIFY(!ours.ok());
        const std::string mine = ours.error().message;
        const std::string fullCause = cause.startsWith("c.yaml") ? dir.path().toStdString() + "/" + cause.toStdString()
                                                                 : cause.toStdString();
        QVERIFY2(mine.find(fullCause) != std::string::npos, mine.c_str());
        QVERIFY2(mine.find("remove it") == std::string::npos, mine.c_str()); // num_processes is not the cause
        std::string why;
        const auto ref = shardscope::testing::runOracle({"load", path}, why);
        if (!ref)
            QFAIL(why.c_str());
        const auto& entry = (*ref)[path];
        QVERIFY(!entry["ok"].get<bool>());
        if (entry.contains("raw_error")) // PyYAML names the tab
            QVERIFY2(entry["raw_error"].get<std::string>().find("'\\t'") != std::string::npos, entry.dump().c_str());
        else
            QVERIFY2(mine.find(entry["error"].get<std::string>()) != std::string::npos,
                     (mine + "\n  does not carry Accelerate's\n" + entry["error"].get<std::string>()).c_str());
    }

    void unknownKeyNamesNearestValidKey()
    {
        auto r = parseAccelerateConfig("distributed_type: MULTI_GPU\nnum_processs: 2\n", "typo.yaml", FileFormat::Yaml);
        QVERIFY(!r.ok());
        const auto& m = r.error().message;
        QVERIFY2(m.find("had unknown keys (['num_processs'])") != std::string::npos, m.c_str());
        QVERIFY2(m.find("typo.yaml:2:1") != std::string::npos, m.c_str());
        QVERIFY2(m.find("did you mean `num_processes`?") != std::string::npos, m.c_str());
        auto ipex = parseAccelerateConfig("distributed_type: MULTI_CPU\nipex_config: {ipex: true}\n", "i.yaml", FileFormat::Yaml);
        QVERIFY(!ipex.ok());
        QVERIFY2(ipex.error().message.find("removed in Accelerate 1.13") != std::string::npos, ipex.error().message.c_str());
    }

    void missingFileSaysSo()
    {
        auto r = loadAccelerateConfig(m_tmp.path().toStdString() + "/nope.yaml");
        QVERIFY(!r.ok());
        QVERIFY(r.error().message.find("does not exist") != std::string::npos);
    }

    void defaultLocationFollowsHfHome()
    {
        const QByteArray oldHf = qgetenv("HF_HOME");
        const QByteArray oldXdg = qgetenv("XDG_CACHE_HOME");
        qputenv("HF_HOME", "/tmp/hfhome");
        QCOMPARE(defaultConfigFile(), std::string("/tmp/hfhome/accelerate/default_config.yaml"));
        qunsetenv("HF_HOME");
        qputenv("XDG_CACHE_HOME", "/tmp/xdg");
        QCOMPARE(defaultConfigFile(), std::string("/tmp/xdg/huggingface/accelerate/default_config.yaml"));
        qunsetenv("XDG_CACHE_HOME");
        QCOMPARE(defaultConfigFile(),
                 qEnvironmentVariable("HOME").toStdString() + "/.cache/huggingface/accelerate/default_config.yaml");
        if (!oldHf.isNull())
            qputenv("HF_HOME", oldHf);
        if (!oldXdg.isNull())
            qputenv("XDG_CACHE_HOME", oldXdg);
    }
};

QTEST_APPLESS_MAIN(TestAccelerateConfig)
#include "tst_accelerate_config.moc"
