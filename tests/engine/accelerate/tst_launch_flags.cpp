// accelerate launch's flags in `shardscope launch` (#46): every flag of Accelerate's own parser is
// known (tests/tools/accelerate_oracle.py launch-flags), each either merged into the config as
// accelerate launch merges it or refused with the reason; the environment our ranks get from a
// config and flags is tst_validation environmentEqualsAccelerateLaunch's.

#include "engine/accelerate/launch_flags.h"
#include "engine/accelerate/yaml_io.h"
#include "tests/common/oracle_support.h"

#include <QTest>

#include <fstream>
#include <iterator>

using namespace shardscope::config;

namespace {

AccelerateConfig parseConfig(const std::string& yaml)
{
    auto r = parseAccelerateConfig(yaml, "test.yaml", FileFormat::Yaml);
    if (!r)
        qFatal("%s", r.error().message.c_str());
    return *r;
}

std::string describe(const std::vector<Diagnostic>& problems)
{
    std::string out;
    for (const auto& d : problems)
        out += "\n  " + d.keyPath + ": " + d.message;
    return out;
}

bool hasError(const std::vector<Diagnostic>& problems, const std::string& key, const std::string& mentions)
{
    for (const auto& d : problems)
        if (d.severity == Severity::Error && d.keyPath == key && d.message.find(mentions) != std::string::npos)
            return true;
    return false;
}

} // namespace

class TestLaunchFlags : public QObject {
    Q_OBJECT

private slots:
    // Every option of Accelerate's launch parser, by each of its spellings, is in the table (the
    // table and docs/CONFIG.md's list of flags cannot fall behind Accelerate unnoticed).
    void everyFlagOfAcceleratesParserIsKnown()
    {
        std::string why;
        const auto parser = shardscope::testing::runOracle({"launch-flags"}, why);
        if (!parser)
            QFAIL(why.c_str());
        int known = 0;
        std::string missing;
        for (const auto& spellings : (*parser)["flags"])
            for (const auto& spelling : spellings) {
                const std::string name = spelling.get<std::string>();
                if (name == "-h" || name == "--help")
                    continue;
                if (findAccelerateLaunchFlag(name))
                    ++known;
                else
                    missing += " " + name;
            }
        QVERIFY2(missing.empty(), ("flags of accelerate launch unknown to Shardscope:" + missing).c_str());
        QVERIFY(known > 200); // about 130 flags, most in two spellings
        QVERIFY(!findAccelerateLaunchFlag("--fsdp_versions"));
    }

    // docs/CONFIG.md lists every flag of the table (the list users read is the one that runs).
    void configDocsListEveryFlag()
    {
        std::ifstream in(shardscope::testing::sourceDir() + "/docs/CONFIG.md");
        const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        QVERIFY(!docs.empty());
        for (const auto& flag : accelerateLaunchFlags()) {
            const std::string row = "| `--" + flag.name + (flag.name.back() == '_' ? "*`" : "`");
            QVERIFY2(docs.find(row) != std::string::npos, ("docs/CONFIG.md has no row for --" + flag.name).c_str());
        }
    }

    // The flags win over the file's values, as accelerate launch merges them: --use_fsdp chooses
    // distributed_type, the section flags become the section's keys, values read as their kind.
    void flagsBecomeTheConfigKeysTheyOverride()
    {
        const AccelerateConfig file = parseConfig("distributed_type: MULTI_GPU\nnum_processes: 2\nfsdp_config:\n"
                                                  "  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_offload_params: true\n");
        std::vector<Diagnostic> problems;
        const AccelerateConfig merged = applyLaunchFlags(file,
                                                         {{"--use_fsdp", {}},
                                                          {"--fsdp-sharding-strategy", "SHARD_GRAD_OP"},
                                                          {"--fsdp_version", "2"},
                                                          {"--fsdp_offload_params", "false"},
                                                          {"--fp8_backend", "te"},
                                                          {"--fp8_override_linear_precision", "false,false,true"},
                                                          {"--dynamo_backend", "inductor"},
                                                          {"--dynamo_use_fullgraph", {}},
                                                          {"--gpu_ids", "0,1"},
                                                          {"--zero_stage", "2"}},
                                                         problems);
        QVERIFY2(problems.empty(), describe(problems).c_str());
        QCOMPARE(merged.distributedType(), std::string("FSDP"));
        QCOMPARE(merged.nested("fsdp_config", "fsdp_sharding_strategy")->asString(), std::string("SHARD_GRAD_OP"));
        QCOMPARE(merged.nested("fsdp_config", "fsdp_version")->asInt(), std::int64_t{2});
        QCOMPARE(merged.nested("fsdp_config", "fsdp_offload_params")->asBool(), false);
        QCOMPARE(merged.nested("fp8_config", "backend")->asString(), std::string("TE"));
        QCOMPARE(merged.nested("fp8_config", "override_linear_precision")->asList().size(), std::size_t{3});
        QCOMPARE(merged.nested("fp8_config", "override_linear_precision")->asList()[2].asInt(), std::int64_t{1}); // str_to_bool's
        QCOMPARE(merged.nested("dynamo_config", "dynamo_backend")->asString(), std::string("INDUCTOR"));
        QCOMPARE(merged.nested("dynamo_config", "dynamo_use_fullgraph")->asBool(), true);
        QCOMPARE(merged.field("gpu_ids").asString(), std::string("0,1"));
        QCOMPARE(merged.nested("deepspeed_config", "zero_stage")->asInt(), std::int64_t{2});
        QCOMPARE(merged.intField("num_processes").value_or(0), std::int64_t{2}); // the file's, kept

        // The flag wins over the key that would have counted: here the file's later, unprefixed one.
        problems.clear();
        const AccelerateConfig twice = applyLaunchFlags(parseConfig("distributed_type: FSDP\nfsdp_config:\n"
                                                                    "  fsdp_sharding_strategy: FULL_SHARD\n"
                                                                    "  sharding_strategy: NO_SHARD\n"),
                                                        {{"--fsdp_sharding_strategy", "SHARD_GRAD_OP"}}, problems);
        QCOMPARE(twice.nested("fsdp_config", "fsdp_sharding_strategy")->asString(), std::string("SHARD_GRAD_OP"));
        QVERIFY(!twice.nested("fsdp_config", "sharding_strategy"));
    }

    // What Shardscope does not run is refused with the reason and what to use instead, never
    // ignored; Accelerate's own rules on flags hold.
    void refusedFlagsSayWhyAndWhatInstead()
    {
        std::vector<Diagnostic> problems;
        const AccelerateConfig empty{ConfigKind::Cluster, Value::emptyMap()};
        applyLaunchFlags(
            empty,
            {{"--tpu", {}}, {"--megatron_lm_tp_degree", "2"}, {"-m", {}}, {"--max_restarts", "3"}, {"--aws_access_key_id", "x"}},
            problems);
        QVERIFY2(hasError(problems, "--tpu", "TPUs are not supported"), describe(problems).c_str());
        QVERIFY2(hasError(problems, "--megatron_lm_tp_degree", "use FSDP or DeepSpeed"), describe(problems).c_str());
        QVERIFY2(hasError(problems, "--m", "give the module's file"), describe(problems).c_str());
        QVERIFY2(hasError(problems, "--max_restarts", "--continue_run"), describe(problems).c_str());
        QVERIFY2(hasError(problems, "--aws_access_key_id", "SageMaker"), describe(problems).c_str());

        problems.clear();
        applyLaunchFlags(empty, {{"--max_restarts", "0"}, {"--tee", "3"}, {"--log_dir", "/tmp/x"}, {"--quiet", {}}}, problems);
        QVERIFY2(problems.empty(), describe(problems).c_str());

        problems.clear();
        applyLaunchFlags(empty, {{"--use_fsdp", {}}, {"--multi_gpu", {}}}, problems);
        QVERIFY2(hasError(problems, "--use_fsdp", "only use one of"), describe(problems).c_str());

        problems.clear();
        applyLaunchFlags(empty, {{"--use_parallelism_config", {}}}, problems);
        QVERIFY2(hasError(problems, "--use_parallelism_config", "without `--use_fsdp`"), describe(problems).c_str());
        // Accelerate compares the flag's text "1" with 1, so --use_fsdp alone passes its check.
        problems.clear();
        applyLaunchFlags(empty, {{"--use_parallelism_config", {}}, {"--use_fsdp", {}}}, problems);
        QVERIFY2(problems.empty(), describe(problems).c_str());

        problems.clear();
        applyLaunchFlags(empty, {{"--use_fsdp", {}}, {"--fsdp_version", "2"}, {"--parallelism_config_dp_shard_size", "2"}},
                         problems);
        QVERIFY2(hasError(problems, "--parallelism_config_dp_shard_size", "--use_parallelism_config"),
                 describe(problems).c_str());
        // ... which the file's own section stands for.
        problems.clear();
        applyLaunchFlags(parseConfig("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\nparallelism_config:\n"
                                     "  parallelism_config_dp_shard_size: 2\n"),
                         {{"--parallelism_config_dp_shard_size", "4"}}, problems);
        QVERIFY2(problems.empty(), describe(problems).c_str());

        // A switch takes no value (argparse refuses one); --use_fsdp=false must not turn FSDP on.
        problems.clear();
        applyLaunchFlags(empty, {{"--use_fsdp", "false"}}, problems);
        QVERIFY2(hasError(problems, "--use_fsdp", "takes no value"), describe(problems).c_str());
        problems.clear();
        const AccelerateConfig hsdp = applyLaunchFlags(empty,
                                                       {{"--use_fsdp", {}},
                                                        {"--fsdp_version", "2"},
                                                        {"--use_parallelism_config", {}},
                                                        {"--parallelism_config_dp_shard_size", "2"},
                                                        {"--parallelism_config_dp_replicate_size", "2"}},
                                                       problems);
        QVERIFY2(problems.empty(), describe(problems).c_str());
        QCOMPARE(hsdp.nested("parallelism_config", "parallelism_config_dp_shard_size")->asInt(), std::int64_t{2});
    }
};

QTEST_APPLESS_MAIN(TestLaunchFlags)
#include "tst_launch_flags.moc"
