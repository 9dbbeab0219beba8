// config.json of Hugging Face decoder folders, read as transformers reads it: every case is
// written to a folder, resolved by transformers (tests/tools/hf_config_oracle.py on the project
// venv) and by parseHfModelConfig, and the two must agree field for field; bad files must give
// errors that name the key and the fix.

#include "engine/recipe/hf_model_config.h"
#include "tests/common/oracle_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <map>

using namespace shardscope::config;
using nlohmann::json;
using shardscope::ErrorKind;

namespace {

// The cases, by folder name: the families' defaults, GQA, tied heads, explicit head_dim,
// biases, Qwen2's sliding window, Llama 3's rope scaling, the legacy rope_scaling/rope_theta.
const std::map<std::string, std::string>& cases()
{
    static const std::map<std::string, std::string> all = {
        {"llama-defaults", R"({"model_type": "llama"})"},
        {"llama-gqa-llama3",
         R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 256, "hidden_size": 64,
             "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
             "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "rope_theta": 500000.0,
             "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"},
             "dtype": "bfloat16"})"},
        {"llama-head-dim-biases",
         R"({"model_type": "llama", "hidden_size": 96, "num_attention_heads": 3, "head_dim": 48, "attention_bias": true,
             "mlp_bias": true, "num_hidden_layers": 1, "pad_token_id": 0})"},
        {"llama-legacy-linear",
         R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 2.0}, "rope_theta": 5e5})"},
        {"llama-rope-parameters", R"({"model_type": "llama", "rope_parameters": {"rope_type": "dynamic", "factor": 4.0,
             "rope_theta": 1e6}})"},
        {"mistral-defaults", R"({"model_type": "mistral", "num_hidden_layers": 2})"},
        {"mistral-no-window", R"({"model_type": "mistral", "num_hidden_layers": 2, "sliding_window": null, "head_dim": 64})"},
        {"qwen2-defaults", R"({"model_type": "qwen2", "num_hidden_layers": 2})"},
        {"qwen2-sliding",
         R"({"model_type": "qwen2", "num_hidden_layers": 3, "use_sliding_window": true, "sliding_window": 64,
             "max_window_layers": 1, "num_key_value_heads": 2, "hidden_size": 64, "num_attention_heads": 4})"},
        {"gpt2-defaults", R"({"model_type": "gpt2"})"},
        {"gpt2-custom", R"({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": 100, "n_positions": 128,
             "vocab_size": 256, "tie_word_embeddings": false, "activation_function": "gelu_pytorch_tanh",
             "attn_pdrop": 0.0})"},
    };
    return all;
}

json optionalJson(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }
json optionalJson(const std::optional<double>& v) { return v ? json(*v) : json(); }

// Ours, in the oracle's shape.
json resolved(const HfModelConfig& c)
{
    json windows = json::array();
    for (const auto& w : c.slidingWindowOfLayer)
        windows.push_back(optionalJson(w));
    json out = {{"model_type", decoderFamilyName(c.family)},
                {"vocab_size", c.vocabSize},
                {"hidden_size", c.hiddenSize},
                {"intermediate_size", c.intermediateSize},
                {"num_hidden_layers", c.numHiddenLayers},
                {"num_attention_heads", c.numAttentionHeads},
                {"num_key_value_heads", c.numKeyValueHeads},
                {"head_dim", c.headDim},
                {"max_position_embeddings", c.maxPositionEmbeddings},
                {"hidden_act", c.hiddenAct},
                {"norm_eps", c.normEps},
                {"initializer_range", c.initializerRange},
                {"tie_word_embeddings", c.tieWordEmbeddings},
                {"bos_token_id", optionalJson(c.bosTokenId)},
                {"pad_token_id", optionalJson(c.padTokenId)},
                {"eos_token_ids", c.eosTokenIds},
                {"attention_dropout", c.attentionDropout},
                {"sliding_windows", windows}};
    if (c.family != DecoderFamily::Gpt2)
        out["rope"] = {{"type", c.rope.type},
                       {"theta", c.rope.theta},
                       {"factor", optionalJson(c.rope.factor)},
                       {"low_freq_factor", optionalJson(c.rope.lowFreqFactor)},
                       {"high_freq_factor", optionalJson(c.rope.highFreqFactor)},
                       {"original_max_position_embeddings", optionalJson(c.rope.originalMaxPositionEmbeddings)}};
    return out;
}

// Numbers compare as numbers (transformers keeps 5e5 as a float, we read every float field as a double).
bool sameJson(const json& a, const json& b)
{
    if (a.is_number() && b.is_number())
        return a.get<double>() == b.get<double>();
    if (a.type() != b.type())
        return false;
    if (a.is_object()) {
        if (a.size() != b.size())
            return false;
        for (auto it = a.begin(); it != a.end(); ++it)
            if (!b.contains(it.key()) || !sameJson(it.value(), b.at(it.key())))
                return false;
        return true;
    }
    if (a.is_array()) {
        if (a.size() != b.size())
            return false;
        for (std::size_t i = 0; i < a.size(); ++i)
            if (!sameJson(a[i], b[i]))
                return false;
        return true;
    }
    return a == b;
}

std::string write(const QTemporaryDir& dir, const std::string& name, const std::string& text)
{
    const std::string folder = dir.path().toStdString() + "/" + name;
    std::filesystem::create_directories(folder);
    std::ofstream(folder + "/config.json") << text;
    return folder;
}

} // namespace

class TestHfModelConfig : public QObject {
    Q_OBJECT

private slots:
    void resolvedAsTransformersResolvesIt()
    {
        QTemporaryDir dir;
        std::vector<std::string> folders;
        for (const auto& [name, text] : cases())
            folders.push_back(write(dir, name, text));
        std::string why;
        auto oracle = shardscope::testing::runPythonTool("hf_config_oracle.py", folders, why);
        if (!oracle)
            QFAIL(why.c_str()); // the reference is part of the project's venv (scripts/setup.sh)
        for (const auto& folder : folders) {
            const json& theirs = oracle->at(folder);
            QVERIFY2(!theirs.contains("error"), (folder + ": " + theirs.dump()).c_str());
            auto ours = loadHfModelConfig(folder);
            QVERIFY2(ours.ok(), ours.ok() ? "" : ours.error().message.c_str());
            const json mine = resolved(*ours);
            QVERIFY2(sameJson(mine, theirs),
                     (folder + "\n  ours:         " + mine.dump() + "\n  transformers: " + theirs.dump()).c_str());
        }
    }

    void badFilesNameTheKeyAndTheFix()
    {
        QTemporaryDir dir;
        auto missing = loadHfModelConfig(dir.path().toStdString() + "/nothing-here");
        QVERIFY(!missing.ok());
        QVERIFY(missing.error().kind == ErrorKind::Io);
        QVERIFY(missing.error().message.find("has no config.json") != std::string::npos);

        auto family = parseHfModelConfig(R"({"model_type": "gemma"})", "m/config.json");
        QVERIFY(!family.ok());
        QCOMPARE(family.error().keyPath, std::string("model_type"));
        QVERIFY(family.error().message.find("'gemma'") != std::string::npos);
        QVERIFY(family.error().message.find("llama") != std::string::npos);

        auto untyped = parseHfModelConfig(R"({"model_type": "llama", "hidden_size": "64"})", "m/config.json");
        QVERIFY(!untyped.ok());
        QCOMPARE(untyped.error().keyPath, std::string("hidden_size"));
        QVERIFY(untyped.error().kind == ErrorKind::BadValue);

        auto heads = parseHfModelConfig(R"({"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3})", "c.json");
        QVERIFY(!heads.ok());
        QVERIFY(heads.error().message.find("not a multiple") != std::string::npos);

        QVERIFY(!parseHfModelConfig("{not json", "c.json").ok());
        QVERIFY(!parseHfModelConfig(R"({"architectures": ["LlamaForCausalLM"]})", "c.json").ok());
    }

    // What the engine does not implement is listed, never ignored.
    void unsupportedFeaturesAreListed()
    {
        auto yarn = parseHfModelConfig(R"({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "c");
        QVERIFY(yarn.ok());
        const auto yarnProblems = unsupportedFeatures(*yarn, 128);
        QCOMPARE(yarnProblems.size(), std::size_t(1));
        QVERIFY(yarnProblems.front().find("yarn") != std::string::npos);

        auto mistral = parseHfModelConfig(R"({"model_type": "mistral", "num_hidden_layers": 2, "sliding_window": 64})", "c");
        QVERIFY(mistral.ok());
        QVERIFY(unsupportedFeatures(*mistral, 64).empty());
        const auto window = unsupportedFeatures(*mistral, 65);
        QCOMPARE(window.size(), std::size_t(1));
        QVERIFY(window.front().find("sliding window of 64 tokens") != std::string::npos);

        auto dynamic = parseHfModelConfig(
            R"({"model_type": "llama", "max_position_embeddings": 128, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})",
            "c");
        QVERIFY(dynamic.ok());
        QVERIFY(unsupportedFeatures(*dynamic, 128).empty());
        QCOMPARE(unsupportedFeatures(*dynamic, 129).size(), std::size_t(1));

        auto gelu = parseHfModelConfig(R"({"model_type": "llama", "hidden_act": "gelu"})", "c");
        QVERIFY(gelu.ok());
        QCOMPARE(unsupportedFeatures(*gelu, 16).size(), std::size_t(1));

        auto quantized = parseHfModelConfig(R"({"model_type": "qwen2", "quantization_config": {"bits": 4}})", "c");
        QVERIFY(quantized.ok());
        QCOMPARE(unsupportedFeatures(*quantized, 16).size(), std::size_t(1));

        auto plain = parseHfModelConfig(R"({"model_type": "gpt2", "n_positions": 64})", "c");
        QVERIFY(plain.ok());
        QVERIFY(unsupportedFeatures(*plain, 64).empty());
        QCOMPARE(unsupportedFeatures(*plain, 65).size(), std::size_t(1));
    }
};

QTEST_APPLESS_MAIN(TestHfModelConfig)
#include "tst_hf_model_config.moc"
