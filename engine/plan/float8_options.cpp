#include "engine/plan/float8_options.h"

#include "engine/accelerate/ascii_case.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/recipe/hf_model_config.h"
#include "engine/recipe/model_architecture.h"

#include <limits>
#include <map>
#include <optional>

namespace shardscope::config {

namespace {

using Environment = std::map<std::string, std::string>;

Environment environmentOf(const std::vector<std::string>& entries)
{
    Environment env;
    for (const auto& entry : entries)
        if (const auto eq = entry.find('='); eq != std::string::npos)
            env[entry.substr(0, eq)] = entry.substr(eq + 1);
    return env;
}

// accelerate.utils.environment.str_to_bool, as parse_flag_from_env applies it.
std::optional<bool> flag(const std::string& value)
{
    const std::string v = asciiLower(value);
    if (v == "y" || v == "yes" || v == "t" || v == "true" || v == "on" || v == "1")
        return true;
    if (v == "n" || v == "no" || v == "f" || v == "false" || v == "off" || v == "0")
        return false;
    return std::nullopt;
}

std::optional<std::int64_t> integer(const std::string& value)
{
    try {
        std::size_t used = 0;
        const long long n = std::stoll(value, &used);
        return used == value.size() ? std::optional<std::int64_t>(n) : std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Reads ACCELERATE_FP8_<NAME> as the runtime does, reporting a value it would reject too.
class Fp8Environment {
public:
    Fp8Environment(const std::vector<std::string>& entries, std::vector<Diagnostic>& problems)
        : m_env(environmentOf(entries)), m_problems(problems)
    {
    }

    std::string text(const std::string& name, const std::string& fallback) const
    {
        return raw("ACCELERATE_FP8_" + name, fallback);
    }
    std::string raw(const std::string& variable, const std::string& fallback) const
    {
        const auto it = m_env.find(variable);
        return it == m_env.end() ? fallback : it->second;
    }
    bool boolean(const std::string& name, const char* key, bool fallback)
    {
        return booleanOf("ACCELERATE_FP8_" + name, key, fallback);
    }
    bool booleanOf(const std::string& variable, const char* key, bool fallback)
    {
        const std::string value = raw(variable, "");
        if (value.empty())
            return fallback;
        if (const auto b = flag(value))
            return *b;
        error(key, std::string("fp8_config.") + key + " is '" + value + "', not true or false");
        return fallback;
    }
    std::int64_t number(const std::string& name, const char* key, std::int64_t fallback, std::int64_t minimum)
    {
        const std::string value = text(name, "");
        if (value.empty())
            return fallback;
        const auto n = integer(value);
        if (!n || *n < minimum) {
            error(key, std::string("fp8_config.") + key + " is '" + value + "'; it must be a whole number of at least "
                           + std::to_string(minimum));
            return fallback;
        }
        return *n;
    }
    void error(const char* key, std::string message)
    {
        m_problems.push_back({Severity::Error, std::string("fp8_config.") + key, std::move(message)});
    }
    void warning(const char* key, std::string message)
    {
        m_problems.push_back({Severity::Warning, std::string("fp8_config.") + key, std::move(message)});
    }

private:
    Environment m_env;
    std::vector<Diagnostic>& m_problems;
};

void readDelayedScaling(Fp8Environment& env, Float8Options& o)
{
    o.amaxHistoryLen = env.number("AMAX_HISTORY_LEN", "amax_history_len", o.amaxHistoryLen, 1);
    const std::string algo = env.text("AMAX_COMPUTE_ALGO", "most_recent");
    if (algo != "max" && algo != "most_recent")
        env.error("amax_compute_algo", "fp8_config.amax_compute_algo is '" + algo + "'; choose max or most_recent");
    o.amaxComputeMax = algo == "max";
    o.margin = static_cast<int>(env.number("MARGIN", "margin", o.margin, 0));
    o.interval = env.number("INTERVAL", "interval", o.interval, 1);
    o.inEval = env.boolean("USE_AUTOCAST_DURING_EVAL", "use_autocast_during_eval", false);
    const std::string format = asciiUpper(env.text("FORMAT", "HYBRID"));
    if (format != "HYBRID")
        env.error("fp8_format", "fp8_config.fp8_format " + format
                                    + " is not implemented in this engine: it runs HYBRID (e4m3 forward, e5m2 gradients, "
                                      "Transformer Engine's default); remove the key or set it to HYBRID");
    for (auto [name, key] : {std::pair{"OVERRIDE_FPROP", "override_linear_precision"},
                             {"OVERRIDE_DGRAD", "override_linear_precision"},
                             {"OVERRIDE_WGRAD", "override_linear_precision"}})
        if (env.boolean(name, key, false)) {
            env.error(key, "fp8_config.override_linear_precision asks for a matmul in higher precision, which this engine "
                           "does not implement; every matmul of an fp8 layer runs in fp8. Use [false, false, false]");
            break;
        }
    // ACCELERATE_FP8_USE_MXFP8_BLOCK_SCALING, as TERecipeKwargs reads it: refused, not ignored.
    if (env.boolean("USE_MXFP8_BLOCK_SCALING", "use_mxfp8_block_scaling", false))
        env.error("use_mxfp8_block_scaling", "fp8_config.use_mxfp8_block_scaling (MXFP8, Blackwell block scaling) is not "
                                             "implemented in this engine; remove it to use delayed scaling");
}

} // namespace

std::string Float8Options::describe() const
{
    if (scaling == Scaling::Tensorwise)
        return "tensorwise dynamic scaling (fp8_config.backend AO, torchao's recipe)";
    return "delayed scaling (fp8_config.backend TE: HYBRID, amax_history_len " + std::to_string(amaxHistoryLen)
           + ", amax_compute_algo " + (amaxComputeMax ? "max" : "most_recent") + ", margin " + std::to_string(margin)
           + ", interval " + std::to_string(interval) + ")";
}

Float8Options float8OptionsFrom(const std::vector<std::string>& environment, std::vector<Diagnostic>& problems)
{
    Fp8Environment env(environment, problems);
    Float8Options o;
    // Accelerate prefers torchao when no backend is named (AO, then TE, then MS-AMP).
    const std::string backend = env.text("BACKEND", "AO");
    if (backend == "TE") {
        o.scaling = Float8Options::Scaling::Delayed;
        readDelayedScaling(env, o);
    } else if (backend == "AO") {
        o.fsdpFloat8AllGather = env.boolean("ENABLE_FSDP_FLOAT8_ALL_GATHER", "enable_fsdp_float8_all_gather", true);
        // pad_inner_dim pads a dimension not divisible by 16; the layers fp8 takes have none.
        env.boolean("PAD_INNER_DIM", "pad_inner_dim", true);
    } else if (backend == "MSAMP") {
        env.error("backend", "fp8_config.backend MSAMP (MS-AMP's O1/O2 optimizer-level fp8) is not implemented in this "
                             "engine; use AO (torchao's tensorwise scaling, the default) or TE (delayed scaling)");
    } else {
        env.error("backend", "fp8_config.backend is '" + backend + "'; choose AO, TE or MSAMP (upper case)");
    }
    return o;
}

namespace {

bool fp8Shape(std::int64_t in, std::int64_t out) { return in % 16 == 0 && out % 16 == 0; }

// Sizes come from recipes as written (the fuzzer's included): products saturate instead of
// overflowing.
std::int64_t times(std::int64_t a, std::int64_t b)
{
    std::int64_t product = 0;
    return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<std::int64_t>::max() : product;
}

void decoderLinears(const HfModelConfig& a, std::vector<LinearLayer>& out)
{
    const std::int64_t h = a.hiddenSize, q = times(a.numAttentionHeads, a.headDim), kv = times(a.numKeyValueHeads, a.headDim);
    for (std::int64_t i = 0; i < a.numHiddenLayers; ++i) {
        const std::string layer = "model.layers." + std::to_string(i);
        out.push_back({layer + ".self_attn.q_proj", h, q});
        out.push_back({layer + ".self_attn.k_proj", h, kv});
        out.push_back({layer + ".self_attn.v_proj", h, kv});
        out.push_back({layer + ".self_attn.o_proj", q, h});
        out.push_back({layer + ".mlp.gate_proj", h, a.intermediateSize});
        out.push_back({layer + ".mlp.up_proj", h, a.intermediateSize});
        out.push_back({layer + ".mlp.down_proj", a.intermediateSize, h});
    }
    if (!a.tieWordEmbeddings)
        out.push_back({"lm_head", h, a.vocabSize});
}

} // namespace

std::vector<LinearLayer> linearLayersOf(const Recipe& recipe)
{
    const ModelRecipe& m = recipe.model;
    std::vector<LinearLayer> out;
    if (m.type == "mlp") {
        std::int64_t width = m.inputDim;
        for (std::int64_t i = 0; i < m.depth; ++i) {
            out.push_back({"layers." + std::to_string(i), width, m.hiddenDim});
            width = m.hiddenDim;
        }
        out.push_back({"layers." + std::to_string(m.depth), width, m.outputDim});
    } else if (m.type == "gpt") {
        const std::int64_t h = m.nEmbd;
        for (std::int64_t i = 0; i < m.nLayer; ++i) {
            const std::string block = "h." + std::to_string(i);
            out.push_back({block + ".attn.c_attn", h, times(3, h)});
            out.push_back({block + ".attn.c_proj", h, h});
            out.push_back({block + ".c_fc", h, times(4, h)});
            out.push_back({block + ".c_proj", times(4, h), h});
        }
    } else if (isHfFamilyType(m.type)) {
        auto a = resolveArchitecture(m, "the recipe");
        if (!a || a->family == DecoderFamily::Gpt2)
            return {};
        decoderLinears(*a, out);
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        LinearLayer& l = out[i];
        l.fp8 = i != 0 && i + 1 != out.size() && fp8Shape(l.in, l.out);
    }
    return out;
}

std::int64_t fp8LinearCount(const Recipe& recipe)
{
    const ModelRecipe& m = recipe.model;
    if (m.type == "mlp") // layers.1 .. layers.depth-1 are the inner hidden x hidden ones
        return m.depth >= 2 && fp8Shape(m.hiddenDim, m.hiddenDim) ? m.depth - 1 : 0;
    if (m.type == "gpt") // 4 per block, all of n_embd's multiples
        return m.nLayer > 0 && fp8Shape(m.nEmbd, m.nEmbd) ? times(4, m.nLayer) - 2 : 0;
    if (!isHfFamilyType(m.type))
        return 0;
    auto a = resolveArchitecture(m, "the recipe");
    if (!a || a->family == DecoderFamily::Gpt2 || a->numHiddenLayers <= 0)
        return 0;
    const std::int64_t h = a->hiddenSize, q = times(a->numAttentionHeads, a->headDim),
                       kv = times(a->numKeyValueHeads, a->headDim), inter = a->intermediateSize;
    const std::int64_t perLayer = std::int64_t{fp8Shape(h, q)} + 2 * std::int64_t{fp8Shape(h, kv)} + fp8Shape(q, h)
                                  + 2 * std::int64_t{fp8Shape(h, inter)} + fp8Shape(inter, h);
    // The first is layer 0's q_proj; the last lm_head, or with a tied head the last down_proj.
    return times(a->numHiddenLayers, perLayer) - std::int64_t{fp8Shape(h, q)}
           - (a->tieWordEmbeddings ? std::int64_t{fp8Shape(inter, h)} : 0);
}

} // namespace shardscope::config
