#include "engine/recipe/recipe.h"

#include "engine/common/edit_distance.h"
#include "engine/common/line_column.h"
#include "engine/common/text_format.h"
#include "engine/common/user_file.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/text/corpus.h"
#include "engine/text/token_stream.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <limits>
#include <sstream>
#include <vector>

namespace shardscope::config {

namespace {

// Reads one mapping of the recipe: each known key has a setter that converts and checks its value;
// the first problem becomes the error, with file:line:column and the key path.
class SectionReader {
public:
    using Setter = std::function<std::string(const YAML::Node&)>; // returns "" or what is wrong

    SectionReader(std::string source, std::string path) : m_source(std::move(source)), m_path(std::move(path)) { }

    void add(const std::string& key, Setter setter) { m_setters.emplace(key, std::move(setter)); }

    Result<void> apply(const YAML::Node& node) const
    {
        if (!node.IsMap())
            return error(node,
                         "'" + (m_path.empty() ? std::string("the recipe") : m_path) + "' should be a mapping of keys to values",
                         m_path, ErrorKind::BadValue);
        for (const auto& entry : node) {
            // A complex key (`? [a, b]: 1`) would throw from as<std::string>().
            if (!entry.first.IsScalar())
                return error(entry.first,
                             "a key of '" + (m_path.empty() ? std::string("the recipe") : m_path)
                                 + "' should be a plain name, not a list or a mapping",
                             m_path, ErrorKind::Syntax);
            const std::string key = entry.first.as<std::string>();
            auto it = m_setters.find(key);
            if (it == m_setters.end())
                return error(entry.first, "unknown key '" + qualified(key) + "'" + suggestion(key), qualified(key),
                             ErrorKind::UnknownKey);
            if (std::string problem = it->second(entry.second); !problem.empty())
                return error(entry.second, "'" + qualified(key) + "' " + problem, qualified(key), ErrorKind::BadValue);
        }
        return {};
    }

    std::string qualified(const std::string& key) const { return m_path.empty() ? key : m_path + "." + key; }

private:
    Error error(const YAML::Node& node, const std::string& what, const std::string& keyPath, ErrorKind kind) const
    {
        const auto mark = node.Mark();
        Error e;
        e.kind = kind;
        e.file = m_source;
        e.keyPath = keyPath;
        std::ostringstream out;
        out << m_source;
        if (!mark.is_null()) {
            e.line = mark.line + 1;
            e.column = mark.column + 1;
            out << ":" << e.line << ":" << e.column;
        }
        out << ": " << what;
        e.message = out.str();
        return e;
    }

    std::string suggestion(const std::string& key) const
    {
        std::string best;
        std::size_t bestDistance = 4; // farther than 3 edits is no suggestion
        for (const auto& [known, setter] : m_setters) {
            const std::size_t d = editDistance(key, known);
            if (d < bestDistance) {
                bestDistance = d;
                best = known;
            }
        }
        std::string known;
        for (const auto& [name, setter] : m_setters)
            known += (known.empty() ? "" : ", ") + name;
        return best.empty() ? " (known keys: " + known + ")" : "; did you mean '" + best + "'?";
    }

    std::string m_source;
    std::string m_path;
    std::map<std::string, Setter> m_setters;
};

template <typename T>
std::string convert(const YAML::Node& node, T& out, const char* expected)
{
    if (!node.IsScalar())
        return std::string("should be ") + expected;
    try {
        out = node.as<T>();
    } catch (const YAML::Exception&) {
        return std::string("should be ") + expected + ", not '" + node.Scalar() + "'";
    }
    return {};
}

SectionReader::Setter integer(std::int64_t& out, std::int64_t minimum,
                              std::int64_t maximum = std::numeric_limits<std::int64_t>::max())
{
    return [&out, minimum, maximum](const YAML::Node& node) -> std::string {
        if (auto problem = convert(node, out, "an integer"); !problem.empty())
            return problem;
        if (out < minimum)
            return "is " + std::to_string(out) + "; it must be at least " + std::to_string(minimum);
        if (out > maximum)
            return "is " + std::to_string(out) + "; it must be at most " + std::to_string(maximum);
        return {};
    };
}

SectionReader::Setter number(double& out, double minimum, double maximum)
{
    return [&out, minimum, maximum](const YAML::Node& node) -> std::string {
        if (auto problem = convert(node, out, "a number"); !problem.empty())
            return problem;
        if (!(out >= minimum && out <= maximum)) {
            std::ostringstream text;
            text << "is " << node.Scalar() << "; it must be between " << minimum << " and " << maximum;
            return text.str();
        }
        return {};
    };
}

SectionReader::Setter boolean(bool& out)
{
    return [&out](const YAML::Node& node) { return convert(node, out, "true or false"); };
}

SectionReader::Setter text(std::string& out)
{
    return [&out](const YAML::Node& node) { return convert(node, out, "a string"); };
}

// A list of non-empty texts, or one without brackets; `what` and `example` word the error
// ("should be a list of names, e.g. [bias, ln_]").
SectionReader::Setter textList(std::vector<std::string>& out, const char* what = "names", const char* example = "[bias, ln_]")
{
    return [&out, what, example](const YAML::Node& node) -> std::string {
        if (node.IsScalar()) { // one item without brackets
            out = {node.Scalar()};
            return {};
        }
        if (!node.IsSequence())
            return std::string("should be a list of ") + what + ", e.g. " + example;
        out.clear();
        for (const auto& item : node) {
            if (!item.IsScalar() || item.Scalar().empty())
                return std::string("should be a list of non-empty ") + what + ", e.g. " + example;
            out.push_back(item.Scalar());
        }
        return {};
    };
}

SectionReader::Setter choice(std::string& out, std::vector<std::string> allowed)
{
    return [&out, allowed = std::move(allowed)](const YAML::Node& node) -> std::string {
        if (auto problem = convert(node, out, "a string"); !problem.empty())
            return problem;
        if (std::find(allowed.begin(), allowed.end(), out) != allowed.end())
            return {};
        std::string list;
        for (const auto& a : allowed)
            list += (list.empty() ? "" : ", ") + a;
        return "is '" + out + "'; choose one of: " + list;
    };
}

// Where the model's architecture comes from: the engine's own keys, a pretrained folder, or the
// config.json keys of the recipe, never two of them.
Result<void> checkModelSource(const ModelRecipe& m, const std::string& source)
{
    if (m.type == "mlp" && !m.pretrained.empty())
        return makeError(source
                             + ": 'model.pretrained' loads a Hugging Face model folder; the mlp model has none. "
                               "Remove model.pretrained or set model.type to the folder's family (or auto)",
                         ErrorKind::Conflict);
    if (m.type == "auto" && m.pretrained.empty())
        return makeError(source
                             + ": model.type auto takes the architecture from model.pretrained's config.json; set "
                               "model.pretrained: DIR, or name the family (llama, mistral, qwen2, gpt2) with its keys",
                         ErrorKind::Conflict);
    if (m.lora.enabled && m.type != "llama" && m.type != "mistral" && m.type != "qwen2" && m.type != "auto")
        return makeError(source + ": 'model.lora' adapts the Hugging Face decoders (llama, mistral, qwen2); the " + m.type
                             + " model has none. Remove model.lora, or train a Llama, Mistral or Qwen2 model",
                         ErrorKind::Conflict);
    if (!m.pretrained.empty() && !m.architecture.empty())
        return makeError(source + ": 'model." + m.architecture.front().first
                             + "': with model.pretrained the architecture comes from " + m.pretrained
                             + "/config.json; remove the key from the recipe (or remove model.pretrained to build the "
                               "model from the recipe's keys)",
                         ErrorKind::Conflict);
    return {};
}

} // namespace

Result<Recipe> parseRecipe(const std::string& yamlText, const std::string& source)
{
    // YAML is Unicode text; bytes that are not UTF-8 would reach the run plan's JSON (and names,
    // paths and messages) as garbage.
    if (const auto bad = text::firstInvalidUtf8(yamlText)) {
        int line = 0, column = 0;
        lineColumnOf(yamlText, *bad, line, column);
        return errorAt(ErrorKind::Syntax, source, line, column,
                       "not UTF-8 text (a byte that is not part of a UTF-8 character); save the recipe as UTF-8");
    }
    YAML::Node root;
    try {
        root = YAML::Load(yamlText);
    } catch (const YAML::ParserException& e) {
        return errorAt(ErrorKind::Syntax, source, e.mark.line + 1, e.mark.column + 1, "not valid YAML: " + e.msg);
    }
    Recipe r;
    if (root.IsNull())
        return r;

    const double big = 1e300;
    // A nested section's message is already complete (file:line:column of the inner key); it is
    // kept aside rather than marked in-band, since keys and values may hold any byte.
    std::optional<Error> nestedError;
    auto nested = [&nestedError](const SectionReader& section) {
        return [&section, &nestedError](const YAML::Node& node) -> std::string {
            auto applied = section.apply(node);
            if (applied)
                return {};
            if (!nestedError) // the innermost section's error (model.lora's within model's) names the key
                nestedError = applied.error();
            return "is invalid";
        };
    };
    // Which keys the model section takes depends on its type: the engine's own models' or a
    // Hugging Face family's config.json keys. A named pretrained folder without a type is "auto".
    const YAML::Node modelNode = root.IsMap() ? root["model"] : YAML::Node();
    std::string declaredType;
    // (A missing key gives an invalid node, which throws when asked its kind: test it first.)
    if (modelNode.IsMap() && modelNode["type"] && modelNode["type"].IsScalar())
        declaredType = modelNode["type"].Scalar();
    else if (modelNode.IsMap() && modelNode["pretrained"])
        r.model.type = declaredType = "auto";
    SectionReader model(source, "model");
    model.add("type", choice(r.model.type, {"gpt", "mlp", "llama", "mistral", "qwen2", "gpt2", "auto"}));
    model.add("block_size", integer(r.model.blockSize, 1));
    model.add("pretrained", text(r.model.pretrained));
    if (isHfFamilyType(declaredType)) {
        for (const auto& key : hfConfigKeys(declaredType))
            model.add(key, [&r, key](const YAML::Node& node) -> std::string {
                r.model.architecture.emplace_back(key, YAML::Dump(node));
                return {};
            });
    } else {
        model.add("vocab_size", integer(r.model.vocabSize, 2));
        model.add("n_layer", integer(r.model.nLayer, 1));
        model.add("n_embd", integer(r.model.nEmbd, 1));
        model.add("n_head", integer(r.model.nHead, 1));
        model.add("dropout", number(r.model.dropout, 0, 0.99));
        model.add("input_dim", integer(r.model.inputDim, 1));
        model.add("hidden_dim", integer(r.model.hiddenDim, 1));
        model.add("depth", integer(r.model.depth, 0));
        model.add("output_dim", integer(r.model.outputDim, 1));
    }
    model.add("frozen", textList(r.model.frozen));
    SectionReader lora(source, "model.lora");
    lora.add("r", integer(r.model.lora.r, 1));
    lora.add("alpha", number(r.model.lora.alpha, 1e-12, 1e12));
    lora.add("dropout", number(r.model.lora.dropout, 0, 0.99));
    lora.add("target_modules", textList(r.model.lora.targetModules));
    lora.add("bias", choice(r.model.lora.bias, {"none", "all", "lora_only"}));
    model.add("lora", [&r, apply = nested(lora)](const YAML::Node& node) {
        r.model.lora.enabled = true;
        return node.IsNull() ? std::string() : apply(node); // `lora:` alone takes PEFT's defaults
    });
    model.add("load_dtype", choice(r.model.loadDtype, {"float32", "bfloat16", "float16"}));

    SectionReader data(source, "data");
    data.add("type", choice(r.data.type, {"text", "tokens", "synthetic_regression"}));
    data.add("path", [&r](const YAML::Node& node) -> std::string {
        if (node.IsSequence()) {
            r.data.path.clear();
            return textList(r.data.paths)(node);
        }
        r.data.paths.clear();
        if (auto problem = text(r.data.path)(node); !problem.empty())
            return problem;
        if (!r.data.path.empty())
            r.data.paths.push_back(r.data.path);
        return {};
    });
    data.add("tokenizer", text(r.data.tokenizer));
    data.add("field", text(r.data.field));
    data.add("token_dtype", choice(r.data.tokenDtype, {"uint16", "uint32"}));
    data.add("num_samples", integer(r.data.numSamples, 1));
    data.add("noise", number(r.data.noise, 0, big));
    data.add("shuffle", boolean(r.data.shuffle));
    data.add("drop_last", boolean(r.data.dropLast));
    data.add("even_batches", boolean(r.data.evenBatches));
    data.add("eval_fraction", number(r.data.evalFraction, 0, 0.9));

    SectionReader optimizer(source, "optimizer");
    optimizer.add("type", choice(r.optimizer.type, {"adamw", "sgd"}));
    // Above 1e3 no optimizer trains, and past float's range (3.4e38) torch refuses the value.
    optimizer.add("lr", number(r.optimizer.lr, 0, 1e3));
    optimizer.add("weight_decay", number(r.optimizer.weightDecay, 0, big));
    optimizer.add("beta1", number(r.optimizer.beta1, 0, 1));
    optimizer.add("beta2", number(r.optimizer.beta2, 0, 1));
    optimizer.add("eps", number(r.optimizer.eps, 0, big));
    optimizer.add("momentum", number(r.optimizer.momentum, 0, 1));
    optimizer.add("no_weight_decay", textList(r.optimizer.noWeightDecay));

    SectionReader schedule(source, "schedule");
    schedule.add("type", choice(r.schedule.type, {"constant", "linear", "cosine"}));
    schedule.add("warmup_steps", integer(r.schedule.warmupSteps, 0));

    SectionReader ddp(source, "ddp");
    ddp.add("bucket_cap_mb", number(r.ddp.bucketCapMb, 1e-6, big));
    ddp.add("first_bucket_cap_mb", number(r.ddp.firstBucketCapMb, 1e-6, big));
    ddp.add("overlap", boolean(r.ddp.overlap));

    SectionReader scaler(source, "loss_scaler");
    scaler.add("init_scale", number(r.lossScaler.initScale, 1e-30, big));
    scaler.add("growth_factor", number(r.lossScaler.growthFactor, 1.0, big));
    scaler.add("backoff_factor", number(r.lossScaler.backoffFactor, 1e-30, 1.0));
    scaler.add("growth_interval", integer(r.lossScaler.growthInterval, 1));

    SectionReader training(source, "training");
    training.add("per_device_batch_size", integer(r.perDeviceBatchSize, 1));
    training.add("gradient_accumulation_steps", integer(r.gradientAccumulationSteps, 1));
    training.add("max_steps", integer(r.maxSteps, 1));
    training.add("max_grad_norm", number(r.maxGradNorm, 0, big));
    training.add("stop_on_nonfinite", boolean(r.stopOnNonfinite));
    training.add("log_every", integer(r.logEvery, 1));
    training.add("eval_every", integer(r.evalEvery, 0));
    training.add("eval_prompts", textList(r.evalPrompts, "prompts", "[\"Once upon a time\", \"The license\"]"));
    training.add("eval_sample_tokens", integer(r.evalSampleTokens, 1, 4096));
    training.add("checkpoint_every", integer(r.checkpointEvery, 0));
    training.add("checkpoint_keep", integer(r.checkpointKeep, 0));

    SectionReader exportSection(source, "export");
    exportSection.add("enabled", boolean(r.exportModel.enabled));
    exportSection.add("dtype", choice(r.exportModel.dtype, {"float32", "bfloat16", "float16"}));
    exportSection.add("max_shard_mb", number(r.exportModel.maxShardMb, 1e-6, big));
    exportSection.add("merge_lora", boolean(r.exportModel.mergeLora));

    SectionReader profile(source, "profile");
    profile.add("start_step", integer(r.profileStartStep, 0));
    profile.add("steps", integer(r.profileSteps, 1));

    SectionReader top(source, "");
    top.add("name", text(r.name));
    top.add("seed", [&r](const YAML::Node& node) { return convert(node, r.seed, "a non-negative integer"); });
    top.add("model", nested(model));
    top.add("data", nested(data));
    top.add("optimizer", nested(optimizer));
    top.add("schedule", nested(schedule));
    top.add("ddp", nested(ddp));
    top.add("loss_scaler", nested(scaler));
    top.add("export", nested(exportSection));
    top.add("training", nested(training));
    top.add("profile", nested(profile));

    if (auto applied = top.apply(root); !applied)
        return nestedError ? *nestedError : applied.error();

    // Half a profile window would silently profile nothing (and not survive a save).
    if ((r.profileStartStep >= 0) != (r.profileSteps > 0))
        return makeError(source + ": 'profile' needs both 'start_step' and 'steps' (e.g. profile: {start_step: 5, steps: 3})");

    if (auto checked = checkModelSource(r.model, source); !checked)
        return checked.error();
    if (r.model.type == "gpt" && r.model.nEmbd % r.model.nHead != 0)
        return makeError(source + ": 'model.n_embd' (" + std::to_string(r.model.nEmbd) + ") must be divisible by 'model.n_head' ("
                         + std::to_string(r.model.nHead) + ")");
    if (r.model.type != "mlp") {
        if (r.data.type == "synthetic_regression")
            return makeError(source + ": the " + r.model.type
                             + " model is a language model; set data.type: tokens (or text, for bytes) or model.type: mlp");
        if (r.data.type == "text" && r.data.paths.size() > 1)
            return makeError(source + ": data.type text reads one file and data.path names " + std::to_string(r.data.paths.size())
                             + "; name one, or set data.type: tokens to tokenize them all");
        if (r.data.type == "tokens" && r.data.paths.empty())
            return makeError(source + ": data.type tokens needs data.path: token files or corpora (.jsonl, .txt), one or a list");
    } else if (r.data.type != "synthetic_regression") {
        return makeError(source
                         + ": the mlp model trains on data.type 'synthetic_regression'; set data.type: "
                           "synthetic_regression or model.type: gpt");
    }
    if (r.schedule.warmupSteps > r.maxSteps)
        return makeError(source + ": 'schedule.warmup_steps' (" + std::to_string(r.schedule.warmupSteps)
                         + ") exceeds 'training.max_steps' (" + std::to_string(r.maxSteps) + ")");
    if (!r.evalPrompts.empty() && r.data.type == "synthetic_regression")
        return makeError(source
                         + ": 'training.eval_prompts' needs a language model (data.type text or tokens); the "
                           "mlp on synthetic_regression writes no text: remove eval_prompts");
    if (!r.evalPrompts.empty() && r.data.type == "tokens" && r.data.tokenizer.empty() && r.model.pretrained.empty())
        return makeError(source
                         + ": 'training.eval_prompts' need the tokenizer the token data was made with, and the "
                           "recipe names none: set data.tokenizer");
    if (!r.evalPrompts.empty() && r.evalEvery == 0)
        return makeError(source
                         + ": 'training.eval_prompts' are continued at each eval, and 'training.eval_every' is "
                           "0 (no evals): set eval_every, e.g. 50");
    return r;
}

std::string resourcesFolder()
{
    if (const char* dir = std::getenv("SHARDSCOPE_RESOURCES"); dir && *dir)
        return dir;
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    // The build tree records where the sources are (resources/ is not copied).
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        if (fs::exists(dir / "resources/data/demo.txt"))
            return (dir / "resources").string();
        if (fs::exists(dir / "CMakeCache.txt")) {
            std::ifstream cache(dir / "CMakeCache.txt");
            std::string line;
            const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
            while (std::getline(cache, line))
                if (line.rfind(key, 0) == 0)
                    return line.substr(key.size()) + "/resources";
        }
    }
    return "resources";
}

std::string defaultTextPath() { return resourcesFolder() + "/data/demo.txt"; }

Result<void> checkTextFitsVocabulary(const std::string& bytes, const Recipe& recipe, const std::string& path)
{
    int highest = -1;
    std::int64_t where = -1;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const int b = static_cast<unsigned char>(bytes[i]);
        if (b > highest) {
            highest = b;
            where = static_cast<std::int64_t>(i);
        }
    }
    if (highest >= recipe.model.vocabSize)
        return makeError("model.vocab_size is " + std::to_string(recipe.model.vocabSize) + " but the text " + path
                         + " holds the byte value " + std::to_string(highest) + " (first at offset " + std::to_string(where)
                         + "); the byte-level GPT embeds every byte value, so set model.vocab_size: "
                         + std::to_string(highest < 128 ? 128 : 256) + " or more (256 takes any text)");
    return {};
}

std::string tokenizerFolder(const Recipe& recipe)
{
    if (!recipe.data.tokenizer.empty())
        return recipe.data.tokenizer;
    std::error_code ec;
    if (!recipe.model.pretrained.empty() && std::filesystem::exists(recipe.model.pretrained + "/tokenizer.json", ec))
        return recipe.model.pretrained;
    return {};
}

Result<std::shared_ptr<const text::Tokenizer>> loadDataTokenizer(const Recipe& recipe)
{
    const std::string folder = tokenizerFolder(recipe);
    if (folder.empty())
        return std::shared_ptr<const text::Tokenizer>();
    auto tokenizer = text::Tokenizer::load(folder);
    if (!tokenizer)
        return makeError("data.tokenizer: " + tokenizer.error().message, tokenizer.error().kind);
    const std::int64_t vocab = recipe.model.vocabSize;
    if (tokenizer->idBound() > vocab)
        return makeError("the tokenizer " + folder + " has ids up to " + std::to_string(tokenizer->idBound() - 1)
                             + " but the model's vocab_size is " + std::to_string(vocab)
                             + ", so some tokens have no embedding; use the model's own tokenizer, or a model with vocab_size "
                             + std::to_string(tokenizer->idBound()) + " or more",
                         ErrorKind::Conflict);
    return std::make_shared<const text::Tokenizer>(std::move(*tokenizer));
}

namespace {

// What data.type tokens can be checked for before launch, without tokenizing the corpora.
Result<void> checkTokenInputs(const Recipe& recipe)
{
    const std::int64_t vocab = recipe.model.vocabSize;
    auto tokenizer = loadDataTokenizer(recipe);
    if (!tokenizer)
        return tokenizer.error();
    std::vector<std::string> corpora;
    for (const std::string& path : recipe.data.paths) {
        if (text::isCorpusPath(path)) {
            if (!*tokenizer)
                return makeError("data.path " + path
                                     + " is a corpus to tokenize, and the recipe names no tokenizer; set "
                                       "data.tokenizer: DIR (a folder with tokenizer.json), or model.pretrained to a folder that "
                                       "has one",
                                 ErrorKind::BadValue);
            corpora.push_back(path);
            continue;
        }
        auto file = text::TokenFile::open(path, text::parseTokenDtype(recipe.data.tokenDtype));
        if (!file)
            return file.error();
        const std::uint32_t highest = file->maxId();
        if (file->size() > 0 && highest >= vocab)
            return makeError(
                path + " holds the token id " + std::to_string(highest) + ", but the model's vocab_size is "
                    + std::to_string(vocab) + "; the file was made with another tokenizer ("
                    + (file->info().tokenizer.empty() ? std::string("its description names none") : file->info().tokenizer)
                    + "), or the model needs a larger vocab_size",
                ErrorKind::Conflict);
    }
    if (!corpora.empty())
        if (auto readable = text::CorpusReader::open(corpora); !readable)
            return readable.error();
    return {};
}

} // namespace

Result<void> checkRecipeInputs(const Recipe& recipe)
{
    if (recipe.data.type == "tokens")
        return checkTokenInputs(recipe);
    if (recipe.data.type != "text")
        return {};
    const std::string path = recipe.data.path.empty() ? defaultTextPath() : recipe.data.path;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return makeError("cannot read the text file '" + path + "' (data.path in the recipe); check the path");
    // A corpus may be large; not endless (a FIFO or /dev/zero as data.path).
    auto text = readUserFile(path, {"the recipe's data.path text file", std::uint64_t(4) << 30, std::chrono::minutes(5)});
    if (!text)
        return makeError(text.error().message + " (data.path in the recipe)", ErrorKind::Io);
    const std::string& bytes = *text;
    const std::int64_t need = 2 * recipe.model.blockSize + 1;
    if (static_cast<std::int64_t>(bytes.size()) < need)
        return makeError("the text file '" + path + "' has " + std::to_string(bytes.size()) + " bytes; it needs at least "
                         + std::to_string(need) + " for model.block_size " + std::to_string(recipe.model.blockSize));
    return checkTextFitsVocabulary(bytes, recipe, path);
}

Result<Recipe> loadRecipe(const std::string& path)
{
    auto text = readUserFile(path, {"a recipe", 1u << 20, std::chrono::seconds(10)});
    if (!text)
        return text.error();
    auto recipe = parseRecipe(*text, path);
    // Relative paths in a recipe file are the file's own, wherever it is launched from.
    if (recipe)
        resolveRecipePaths(*recipe, std::filesystem::absolute(std::filesystem::path(path)).parent_path().string());
    return recipe;
}

void resolveRecipePaths(Recipe& recipe, const std::string& folder)
{
    namespace fs = std::filesystem;
    const auto resolve = [&folder](std::string& p) {
        if (!p.empty() && fs::path(p).is_relative())
            p = (fs::path(folder) / p).lexically_normal().string();
    };
    resolve(recipe.model.pretrained);
    resolve(recipe.data.path);
    for (auto& p : recipe.data.paths)
        resolve(p);
    resolve(recipe.data.tokenizer);
}

namespace {

std::string quotedYaml(const std::string& text)
{
    std::string quoted = "'";
    for (char c : text)
        quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return quoted + "'";
}

// The recipe text with section.key set to `value` (YAML text): the value replaced where the section
// has the key, else the key added at its top (or the section added at the end), every other line
// (comments included) kept as written. An inline section (`model: {...}`) cannot be edited by line.
Result<std::string> withSectionKey(const std::string& yamlText, const std::string& section, const std::string& key,
                                   const std::string& value)
{
    std::vector<std::string> lines;
    {
        std::istringstream in(yamlText);
        for (std::string line; std::getline(in, line);)
            lines.push_back(line);
    }
    auto indentOf = [](const std::string& line) { return line.find_first_not_of(' '); };
    auto isBlankOrComment = [&](const std::string& line) {
        const auto first = line.find_first_not_of(" \t");
        return first == std::string::npos || line[first] == '#';
    };
    const std::string header = section + ":", keyColon = key + ":";
    std::size_t start = lines.size();
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].rfind(header, 0) != 0)
            continue;
        if (!isBlankOrComment(lines[i].substr(header.size())))
            return makeError("the recipe's " + section + " section is written inline (" + section
                                 + ": {...}); write it as a block (" + section
                                 + ": on its own line, one key per line below it) to set " + section + "." + key + " here",
                             ErrorKind::Unspecified);
        start = i;
        break;
    }
    if (start == lines.size()) {
        lines.push_back(header);
        lines.push_back("  " + keyColon + " " + value);
    } else {
        std::size_t keyIndent = 2;
        bool sawKey = false, replaced = false;
        for (std::size_t end = start + 1; end < lines.size(); ++end) {
            if (isBlankOrComment(lines[end]))
                continue;
            const auto indent = indentOf(lines[end]);
            if (indent == 0)
                break; // the next top-level section
            if (!sawKey) {
                keyIndent = indent;
                sawKey = true;
            }
            if (indent == keyIndent && lines[end].compare(indent, keyColon.size(), keyColon) == 0) {
                lines[end] = std::string(indent, ' ') + keyColon + " " + value;
                replaced = true;
            }
        }
        if (!replaced)
            lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(start) + 1,
                         std::string(keyIndent, ' ') + keyColon + " " + value);
    }
    std::string out;
    for (const auto& line : lines)
        out += line + "\n";
    return out;
}

} // namespace

Result<std::string> withPretrainedFolder(const std::string& yamlText, const std::string& dir)
{
    return withSectionKey(yamlText, "model", "pretrained", quotedYaml(dir));
}

Result<std::string> withRecipeValue(const std::string& yamlText, const std::string& keyPath, const std::string& value)
{
    const auto dot = keyPath.find('.');
    if (dot == std::string::npos || keyPath.find('.', dot + 1) != std::string::npos)
        return makeError("the recipe form edits section.key paths, not '" + keyPath + "'");
    // Plain when YAML reads it back as the same text (numbers, names, true/false), quoted otherwise.
    const bool plain = !value.empty() && value.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos && value.front() != ' '
                       && value.back() != ' ' && value.front() != '-';
    const bool number = !value.empty() && value.find_first_not_of("0123456789.eE+-") == std::string::npos;
    return withSectionKey(yamlText, keyPath.substr(0, dot), keyPath.substr(dot + 1), plain || number ? value : quotedYaml(value));
}

Result<std::string> withTokenData(const std::string& yamlText, const std::vector<std::string>& paths,
                                  const std::string& tokenizer)
{
    std::string list = "[";
    for (const auto& path : paths)
        list += (list.size() > 1 ? ", " : "") + quotedYaml(path);
    list += "]";
    auto edited = withSectionKey(yamlText, "data", "type", "tokens");
    if (edited && !paths.empty()) // empty: the tokenizer alone
        edited = withSectionKey(*edited, "data", "path", paths.size() == 1 ? quotedYaml(paths.front()) : list);
    if (edited && !tokenizer.empty())
        edited = withSectionKey(*edited, "data", "tokenizer", quotedYaml(tokenizer));
    return edited;
}

namespace {

// A double as its shortest text that reads back as the same double (Python's repr: 0.1, not
// yaml-cpp's 17 digits 0.10000000000000001), always with a point or an exponent so that it
// reads back as a float.
std::string yamlNumber(double value)
{
    std::string text = shortestNumber(value);
    if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos)
        text += ".0";
    return text;
}

} // namespace

std::string recipeToYaml(const Recipe& r)
{
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << r.name;
    out << YAML::Key << "seed" << YAML::Value << r.seed;
    out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "type" << YAML::Value << r.model.type;
    if (r.model.type == "gpt") {
        out << YAML::Key << "vocab_size" << YAML::Value << r.model.vocabSize << YAML::Key << "n_layer" << YAML::Value
            << r.model.nLayer << YAML::Key << "n_embd" << YAML::Value << r.model.nEmbd << YAML::Key << "n_head" << YAML::Value
            << r.model.nHead << YAML::Key << "block_size" << YAML::Value << r.model.blockSize;
        if (r.model.dropout > 0)
            out << YAML::Key << "dropout" << YAML::Value << yamlNumber(r.model.dropout);
        if (!r.model.pretrained.empty())
            out << YAML::Key << "pretrained" << YAML::Value << r.model.pretrained;
    } else if (isHfFamilyType(r.model.type)) {
        out << YAML::Key << "block_size" << YAML::Value << r.model.blockSize;
        if (!r.model.pretrained.empty())
            out << YAML::Key << "pretrained" << YAML::Value << r.model.pretrained;
        for (const auto& [key, value] : r.model.architecture)
            out << YAML::Key << key << YAML::Value << YAML::Load(value);
    } else {
        out << YAML::Key << "input_dim" << YAML::Value << r.model.inputDim << YAML::Key << "hidden_dim" << YAML::Value
            << r.model.hiddenDim << YAML::Key << "depth" << YAML::Value << r.model.depth << YAML::Key << "output_dim"
            << YAML::Value << r.model.outputDim;
    }
    if (!r.model.frozen.empty())
        out << YAML::Key << "frozen" << YAML::Value << YAML::Flow << r.model.frozen;
    if (r.model.loadDtype != "float32")
        out << YAML::Key << "load_dtype" << YAML::Value << r.model.loadDtype;
    if (r.model.lora.enabled) {
        const LoraRecipe& l = r.model.lora;
        out << YAML::Key << "lora" << YAML::Value << YAML::BeginMap << YAML::Key << "r" << YAML::Value << l.r << YAML::Key
            << "alpha" << YAML::Value << yamlNumber(l.alpha) << YAML::Key << "dropout" << YAML::Value << yamlNumber(l.dropout);
        if (!l.targetModules.empty())
            out << YAML::Key << "target_modules" << YAML::Value << YAML::Flow << l.targetModules;
        out << YAML::Key << "bias" << YAML::Value << l.bias << YAML::EndMap;
    }
    out << YAML::EndMap;
    out << YAML::Key << "data" << YAML::Value << YAML::BeginMap << YAML::Key << "type" << YAML::Value << r.data.type;
    if (r.data.paths.size() > 1)
        out << YAML::Key << "path" << YAML::Value << YAML::Flow << r.data.paths;
    else
        out << YAML::Key << "path" << YAML::Value << r.data.path;
    if (!r.data.tokenizer.empty())
        out << YAML::Key << "tokenizer" << YAML::Value << r.data.tokenizer;
    if (r.data.field != "text")
        out << YAML::Key << "field" << YAML::Value << r.data.field;
    if (!r.data.tokenDtype.empty())
        out << YAML::Key << "token_dtype" << YAML::Value << r.data.tokenDtype;
    out << YAML::Key << "num_samples" << YAML::Value << r.data.numSamples << YAML::Key << "noise" << YAML::Value
        << yamlNumber(r.data.noise) << YAML::Key << "shuffle" << YAML::Value << r.data.shuffle << YAML::Key << "drop_last"
        << YAML::Value << r.data.dropLast << YAML::Key << "even_batches" << YAML::Value << r.data.evenBatches << YAML::Key
        << "eval_fraction" << YAML::Value << yamlNumber(r.data.evalFraction) << YAML::EndMap;
    out << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap << YAML::Key << "type" << YAML::Value << r.optimizer.type
        << YAML::Key << "lr" << YAML::Value << yamlNumber(r.optimizer.lr) << YAML::Key << "weight_decay" << YAML::Value
        << yamlNumber(r.optimizer.weightDecay) << YAML::Key << "beta1" << YAML::Value << yamlNumber(r.optimizer.beta1)
        << YAML::Key << "beta2" << YAML::Value << yamlNumber(r.optimizer.beta2) << YAML::Key << "eps" << YAML::Value
        << yamlNumber(r.optimizer.eps) << YAML::Key << "momentum" << YAML::Value << yamlNumber(r.optimizer.momentum);
    if (!r.optimizer.noWeightDecay.empty())
        out << YAML::Key << "no_weight_decay" << YAML::Value << YAML::Flow << r.optimizer.noWeightDecay;
    out << YAML::EndMap;
    out << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap << YAML::Key << "type" << YAML::Value << r.schedule.type
        << YAML::Key << "warmup_steps" << YAML::Value << r.schedule.warmupSteps << YAML::EndMap;
    out << YAML::Key << "ddp" << YAML::Value << YAML::BeginMap << YAML::Key << "bucket_cap_mb" << YAML::Value
        << yamlNumber(r.ddp.bucketCapMb) << YAML::Key << "first_bucket_cap_mb" << YAML::Value
        << yamlNumber(r.ddp.firstBucketCapMb) << YAML::Key << "overlap" << YAML::Value << r.ddp.overlap << YAML::EndMap;
    out << YAML::Key << "loss_scaler" << YAML::Value << YAML::BeginMap << YAML::Key << "init_scale" << YAML::Value
        << yamlNumber(r.lossScaler.initScale) << YAML::Key << "growth_factor" << YAML::Value
        << yamlNumber(r.lossScaler.growthFactor) << YAML::Key << "backoff_factor" << YAML::Value
        << yamlNumber(r.lossScaler.backoffFactor) << YAML::Key << "growth_interval" << YAML::Value << r.lossScaler.growthInterval
        << YAML::EndMap;
    out << YAML::Key << "training" << YAML::Value << YAML::BeginMap << YAML::Key << "per_device_batch_size" << YAML::Value
        << r.perDeviceBatchSize << YAML::Key << "gradient_accumulation_steps" << YAML::Value << r.gradientAccumulationSteps
        << YAML::Key << "max_steps" << YAML::Value << r.maxSteps << YAML::Key << "max_grad_norm" << YAML::Value
        << yamlNumber(r.maxGradNorm) << YAML::Key << "stop_on_nonfinite" << YAML::Value << r.stopOnNonfinite << YAML::Key
        << "log_every" << YAML::Value << r.logEvery << YAML::Key << "eval_every" << YAML::Value << r.evalEvery << YAML::Key
        << "eval_prompts" << YAML::Value << YAML::Flow << r.evalPrompts << YAML::Key << "eval_sample_tokens" << YAML::Value
        << r.evalSampleTokens << YAML::Key << "checkpoint_every" << YAML::Value << r.checkpointEvery << YAML::Key
        << "checkpoint_keep" << YAML::Value << r.checkpointKeep << YAML::EndMap;
    out << YAML::Key << "export" << YAML::Value << YAML::BeginMap << YAML::Key << "enabled" << YAML::Value
        << r.exportModel.enabled << YAML::Key << "dtype" << YAML::Value << r.exportModel.dtype << YAML::Key << "max_shard_mb"
        << YAML::Value << yamlNumber(r.exportModel.maxShardMb) << YAML::Key << "merge_lora" << YAML::Value
        << r.exportModel.mergeLora << YAML::EndMap;
    if (r.profileStartStep >= 0)
        out << YAML::Key << "profile" << YAML::Value << YAML::BeginMap << YAML::Key << "start_step" << YAML::Value
            << r.profileStartStep << YAML::Key << "steps" << YAML::Value << r.profileSteps << YAML::EndMap;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

} // namespace shardscope::config

namespace shardscope::config {

std::string modelFingerprint(const ModelRecipe& m)
{
    std::ostringstream out;
    out.precision(17);
    auto list = [](const std::vector<std::string>& items) {
        std::string joined;
        for (const auto& item : items)
            joined += (joined.empty() ? "" : ",") + item;
        return joined;
    };
    out << "type=" << m.type << "\nvocab_size=" << m.vocabSize << "\nn_layer=" << m.nLayer << "\nn_embd=" << m.nEmbd
        << "\nn_head=" << m.nHead << "\nblock_size=" << m.blockSize << "\ndropout=" << m.dropout
        << "\nattention_dropout=" << m.attentionDropout << "\nembedding_dropout=" << m.embeddingDropout
        << "\ninput_dim=" << m.inputDim << "\nhidden_dim=" << m.hiddenDim << "\ndepth=" << m.depth
        << "\noutput_dim=" << m.outputDim << "\nload_dtype=" << m.loadDtype << "\nfrozen=" << list(m.frozen) << "\n";
    for (const auto& [key, value] : m.architecture)
        out << "architecture." << key << "=" << value << "\n";
    if (m.lora.enabled)
        out << "lora.r=" << m.lora.r << "\nlora.alpha=" << m.lora.alpha << "\nlora.dropout=" << m.lora.dropout
            << "\nlora.target_modules=" << list(m.lora.targetModules) << "\nlora.bias=" << m.lora.bias << "\n";
    return out.str();
}

} // namespace shardscope::config
