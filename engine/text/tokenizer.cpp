#include "engine/text/tokenizer.h"

#include "engine/text/bpe_model.h"
#include "engine/text/regex.h"
#include "engine/text/tokenizer_components.h"
#include "engine/text/unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace shardscope::text {

using nlohmann::json;

namespace {

struct AddedToken {
    std::int32_t id = 0;
    std::string content;
    bool singleWord = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// The tokens of one matching set (added_vocabulary.rs's split_trie or split_normalized_trie),
// bucketed by first byte and longest first: the leftmost match, and there the longest, as
// aho-corasick's LeftmostLongest finds it.
class AddedTokenMatcher {
public:
    void add(std::string pattern, const AddedToken* token)
    {
        if (pattern.empty())
            return;
        auto& bucket = m_byFirstByte[static_cast<unsigned char>(pattern[0])];
        bucket.push_back({std::move(pattern), token});
        std::stable_sort(bucket.begin(), bucket.end(),
                         [](const Entry& a, const Entry& b) { return a.pattern.size() > b.pattern.size(); });
        m_empty = false;
    }
    bool empty() const { return m_empty; }
    // The match at or after `from`: its start, end and token.
    bool find(std::string_view s, std::size_t from, std::size_t& start, std::size_t& end, const AddedToken*& token) const
    {
        for (std::size_t i = from; i < s.size(); ++i) {
            for (const Entry& e : m_byFirstByte[static_cast<unsigned char>(s[i])]) {
                if (s.compare(i, e.pattern.size(), e.pattern) == 0) {
                    start = i;
                    end = i + e.pattern.size();
                    token = e.token;
                    return true;
                }
            }
        }
        return false;
    }

private:
    struct Entry {
        std::string pattern;
        const AddedToken* token;
    };
    std::array<std::vector<Entry>, 256> m_byFirstByte;
    bool m_empty = true;
};

Result<std::string> readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return inFile(makeError("cannot read " + path, ErrorKind::Io), path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

bool fileExists(const std::string& path) { return std::ifstream(path).good(); }

// tokenizer_config.json's bos_token / eos_token: a string, or an AddedToken object.
std::optional<std::string> tokenName(const json& config, const char* key)
{
    const auto it = config.find(key);
    if (it == config.end() || it->is_null())
        return std::nullopt;
    if (it->is_string())
        return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
    return std::nullopt;
}

} // namespace

struct Tokenizer::Impl {
    std::string source;
    std::vector<AddedToken> added; // stable: the matchers point into it
    std::unordered_map<std::int32_t, const AddedToken*> addedById;
    AddedTokenMatcher rawMatcher, normalizedMatcher;
    Normalizer normalizer;
    PreTokenizer preTokenizer;
    std::optional<BpeModel> model;
    SingleTemplate postProcessor;
    Decoder decoder;
    std::optional<std::int32_t> bos, eos;
    Regex wordAtEnd = *Regex::compile(R"(\w$)", false);
    Regex wordAtStart = *Regex::compile(R"(^\w)", false);
    Regex spaceAtEnd = *Regex::compile(R"(\s*$)", false);
    Regex spaceAtStart = *Regex::compile(R"(^\s*)", false);

    std::optional<std::int32_t> idOf(std::string_view token) const
    {
        for (const AddedToken& a : added)
            if (a.content == token)
                return a.id;
        return model->idOf(token);
    }
    std::unordered_set<std::string> specialContents;

    Result<void> applyConfig(const std::string& configJson, const std::string& configSource);
    void splitOnAddedTokens(const AddedTokenMatcher& matcher, Piece&& piece, std::vector<Piece>& out) const;
    void encodePieces(std::string_view text, std::vector<std::int32_t>& ids) const;
};

// added_vocabulary.rs find_matches: each match of an added token becomes its own piece, widened
// over the whitespace beside it for lstrip / rstrip, dropped when single_word and inside a word.
void Tokenizer::Impl::splitOnAddedTokens(const AddedTokenMatcher& matcher, Piece&& piece, std::vector<Piece>& out) const
{
    const std::string& s = piece.text;
    if (matcher.empty() || s.empty()) {
        if (!s.empty()) // empty pieces are dropped at every split (PreTokenizedString::split)
            out.push_back(std::move(piece));
        return;
    }
    std::size_t offset = 0, searchFrom = 0, start = 0, end = 0;
    const AddedToken* token = nullptr;
    const auto emit = [&](std::size_t from, std::size_t to, std::int32_t id) {
        if (to > from)
            out.push_back({s.substr(from, to - from), piece.atInputStart && from == 0, id});
    };
    while (matcher.find(s, searchFrom, start, end, token)) {
        searchFrom = end;
        Match m;
        if (token->singleWord) {
            const bool spaceBefore = start == 0 || !wordAtEnd.find(std::string_view(s).substr(0, start), 0, m);
            const bool spaceAfter = end == s.size() || !wordAtStart.find(std::string_view(s).substr(end), 0, m);
            if (!spaceBefore || !spaceAfter)
                continue;
        }
        if (token->lstrip && spaceAtEnd.find(std::string_view(s).substr(0, start), 0, m))
            start = std::max(m.start, offset);
        if (token->rstrip && spaceAtStart.find(std::string_view(s).substr(end), 0, m))
            end += m.end;
        emit(offset, start, -1);
        emit(start, end, token->id);
        offset = end;
        searchFrom = end;
    }
    emit(offset, s.size(), -1);
}

void Tokenizer::Impl::encodePieces(std::string_view text, std::vector<std::int32_t>& ids) const
{
    // 1. Added tokens that match the raw text; 2. the rest normalized, then the added tokens that
    // match normalized text; 3. pre-tokenized; 4. the model (AddedVocabulary::extract_and_normalize
    // and TokenizerImpl::encode_single_sequence).
    std::vector<Piece> raw, normalized, pre;
    splitOnAddedTokens(rawMatcher, Piece{std::string(text), true, -1}, raw);
    for (Piece& piece : raw) {
        if (piece.token >= 0) {
            normalized.push_back(std::move(piece));
            continue;
        }
        if (normalizer)
            normalizer(piece.text);
        splitOnAddedTokens(normalizedMatcher, std::move(piece), normalized);
    }
    for (Piece& piece : normalized) {
        if (piece.token >= 0 || !preTokenizer) {
            if (piece.token >= 0 || !piece.text.empty())
                pre.push_back(std::move(piece));
            continue;
        }
        preTokenizer(std::move(piece), pre);
    }
    for (const Piece& piece : pre) {
        if (piece.token >= 0)
            ids.push_back(piece.token);
        else
            model->tokenize(piece.text, ids);
    }
}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : m_impl(std::move(impl)) { }
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

namespace {

Result<BpeModel> parseModel(const json& model, const std::string& source)
{
    const auto where = [&](const std::string& key) { return source + ": model" + (key.empty() ? "" : "." + key); };
    const std::string type = model.value("type", std::string("BPE"));
    if (type != "BPE")
        return makeError(where("type") + ": the model '" + type
                             + "' is not supported (Shardscope implements BPE, the model of GPT-2, Llama, Mistral and "
                               "Qwen2 tokenizers)",
                         ErrorKind::BadValue);
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
        return makeError(where("dropout") + ": BPE dropout is not supported (it makes tokenization random); set it to null",
                         ErrorKind::BadValue);
    if (!model.contains("vocab") || !model["vocab"].is_object())
        return makeError(where("vocab") + ": missing (an object of token: id)", ErrorKind::BadValue);
    TokenIds vocab;
    for (const auto& [token, id] : model["vocab"].items()) {
        if (!id.is_number_integer())
            return makeError(where("vocab") + ": the id of '" + token + "' is not an integer", ErrorKind::BadValue);
        vocab.emplace(token, id.get<std::int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> merges;
    const json& list = model.contains("merges") ? model["merges"] : json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const json& merge = list[i];
        if (merge.is_string()) { // "a b", the older format
            const auto text = merge.get<std::string>();
            const auto space = text.find(' ', 1);
            if (space == std::string::npos)
                return makeError(where("merges[" + std::to_string(i) + "]") + ": '" + text + "' is not two tokens",
                                 ErrorKind::BadValue);
            merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
            merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
        } else {
            return makeError(where("merges[" + std::to_string(i) + "]") + ": not a pair of tokens", ErrorKind::BadValue);
        }
    }
    BpeOptions options;
    if (model.contains("unk_token") && model["unk_token"].is_string())
        options.unkToken = model["unk_token"].get<std::string>();
    const auto optionalText = [&](const char* key) {
        return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : std::string();
    };
    options.continuingSubwordPrefix = optionalText("continuing_subword_prefix");
    options.endOfWordSuffix = optionalText("end_of_word_suffix");
    options.fuseUnk = model.value("fuse_unk", false);
    options.byteFallback = model.value("byte_fallback", false);
    options.ignoreMerges = model.value("ignore_merges", false);
    auto bpe = BpeModel::make(std::move(vocab), merges, std::move(options));
    if (!bpe)
        return makeError(where("") + ": " + bpe.error().message, ErrorKind::BadValue);
    return bpe;
}

Result<std::vector<AddedToken>> parseAddedTokens(const json& root, const std::string& source)
{
    std::vector<AddedToken> added;
    const json& list = root.contains("added_tokens") ? root["added_tokens"] : json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const json& t = list[i];
        if (!t.is_object() || !t.contains("id") || !t.contains("content") || !t["content"].is_string())
            return makeError(source + ": added_tokens[" + std::to_string(i) + "]: needs an id and a content",
                             ErrorKind::BadValue);
        AddedToken token;
        token.id = t["id"].get<std::int32_t>();
        token.content = t["content"].get<std::string>();
        token.singleWord = t.value("single_word", false);
        token.lstrip = t.value("lstrip", false);
        token.rstrip = t.value("rstrip", false);
        token.special = t.value("special", false);
        token.normalized = t.value("normalized", !token.special);
        added.push_back(std::move(token));
    }
    return added;
}

} // namespace

// tokenizer_config.json as transformers 5.23 reads it beside a tokenizer.json: bos_token and
// eos_token name tokens; add_bos_token / add_eos_token are dropped (tokenization_utils_base.py,
// _from_pretrained: "if tokenizer_file ... init_kwargs.pop('add_bos_token')"), so tokenizer.json's
// post-processor alone decides what encode adds. transformers 4 honoured them; 5.23 does not.
Result<void> Tokenizer::Impl::applyConfig(const std::string& configJson, const std::string& configSource)
{
    json config = json::object();
    if (!configJson.empty()) {
        config = json::parse(configJson, nullptr, false);
        if (config.is_discarded() || !config.is_object())
            return inFile(makeError(configSource + ": not a JSON object", ErrorKind::Syntax), configSource);
    }
    const auto idFor = [&](const char* key) -> Result<std::optional<std::int32_t>> {
        const auto name = tokenName(config, key);
        if (!name)
            return std::optional<std::int32_t>{};
        const auto id = idOf(*name);
        if (!id)
            return inFile(
                makeError(configSource + ": " + key + " '" + *name + "' is not a token of the tokenizer", ErrorKind::BadValue),
                configSource);
        return std::optional<std::int32_t>(*id);
    };
    auto bosToken = idFor("bos_token");
    if (!bosToken)
        return bosToken.error();
    auto eosToken = idFor("eos_token");
    if (!eosToken)
        return eosToken.error();
    bos = *bosToken;
    eos = *eosToken;
    return {};
}

Result<Tokenizer> Tokenizer::fromJson(const std::string& tokenizerJson, const std::string& source, const std::string& configJson,
                                      const std::string& configSource)
{
    const json root = json::parse(tokenizerJson, nullptr, false);
    if (root.is_discarded() || !root.is_object())
        return inFile(
            makeError(source + ": not a JSON object (is it a tokenizer.json of Hugging Face tokenizers?)", ErrorKind::Syntax),
            source);
    auto impl = std::make_shared<Impl>();
    impl->source = source;
    auto model = parseModel(root.value("model", json::object()), source);
    if (!model)
        return model.error();
    impl->model.emplace(std::move(*model));
    auto normalizer = parseNormalizer(root.value("normalizer", json()), "normalizer");
    auto preTokenizer = parsePreTokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer");
    auto decoder = parseDecoder(root.value("decoder", json()), "decoder");
    auto postProcessor = parsePostProcessor(root.value("post_processor", json()), "post_processor");
    auto added = parseAddedTokens(root, source);
    for (const Error* e : {normalizer ? nullptr : &normalizer.error(), preTokenizer ? nullptr : &preTokenizer.error(),
                           decoder ? nullptr : &decoder.error(), postProcessor ? nullptr : &postProcessor.error(),
                           added ? nullptr : &added.error()})
        if (e)
            return inFile(makeError(source + ": " + e->message, e->kind), source);
    impl->normalizer = std::move(*normalizer);
    impl->preTokenizer = std::move(*preTokenizer);
    impl->decoder = std::move(*decoder);
    impl->postProcessor = std::move(*postProcessor);
    impl->added = std::move(*added);
    for (const AddedToken& token : impl->added) {
        impl->addedById.emplace(token.id, &token);
        if (token.special)
            impl->specialContents.insert(token.content);
        if (!token.normalized) {
            impl->rawMatcher.add(token.content, &token);
        } else {
            std::string pattern = token.content;
            if (impl->normalizer)
                impl->normalizer(pattern);
            impl->normalizedMatcher.add(std::move(pattern), &token);
        }
    }
    if (auto config = impl->applyConfig(configJson, configSource); !config)
        return config.error();
    return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::load(const std::string& folder)
{
    const std::string tokenizerPath = folder + "/tokenizer.json";
    if (!fileExists(tokenizerPath))
        return inFile(makeError(folder
                                    + " has no tokenizer.json (Shardscope reads the Hugging Face tokenizers format; a folder "
                                      "with only tokenizer.model or vocab.json/merges.txt can be converted by loading it "
                                      "with transformers' AutoTokenizer and calling save_pretrained)",
                                ErrorKind::Io),
                      tokenizerPath);
    auto tokenizerJson = readFile(tokenizerPath);
    if (!tokenizerJson)
        return tokenizerJson.error();
    const std::string configPath = folder + "/tokenizer_config.json";
    std::string configJson;
    if (fileExists(configPath)) {
        auto config = readFile(configPath);
        if (!config)
            return config.error();
        configJson = std::move(*config);
    }
    auto tokenizer = fromJson(*tokenizerJson, tokenizerPath, configJson, configPath);
    if (tokenizer) {
        auto impl = std::const_pointer_cast<Impl>(tokenizer->m_impl);
        impl->source = folder;
    }
    return tokenizer;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const
{
    std::vector<std::int32_t> ids;
    if (addSpecialTokens)
        ids = m_impl->postProcessor.before;
    m_impl->encodePieces(text, ids);
    if (addSpecialTokens)
        ids.insert(ids.end(), m_impl->postProcessor.after.begin(), m_impl->postProcessor.after.end());
    return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skipSpecialTokens) const
{
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const std::int32_t id : ids) {
        if (const auto added = m_impl->addedById.find(id); added != m_impl->addedById.end()) {
            if (!(skipSpecialTokens && added->second->special))
                tokens.push_back(added->second->content);
            continue;
        }
        const std::string* token = m_impl->model->tokenOf(id);
        if (!token)
            continue;
        // A model token spelled like a special added token counts as special too (is_special_token
        // looks the content up).
        if (!(skipSpecialTokens && m_impl->specialContents.count(*token)))
            tokens.push_back(*token);
    }
    if (!m_impl->decoder) {
        std::string joined;
        for (std::size_t i = 0; i < tokens.size(); ++i)
            joined += (i ? " " : "") + tokens[i];
        return joined;
    }
    m_impl->decoder(tokens);
    std::string joined;
    for (const std::string& t : tokens)
        joined += t;
    return joined;
}

std::int32_t Tokenizer::idBound() const
{
    std::int32_t bound = m_impl->model->idBound();
    for (const AddedToken& a : m_impl->added)
        bound = std::max(bound, a.id + 1);
    return bound;
}

std::optional<std::int32_t> Tokenizer::tokenToId(std::string_view token) const { return m_impl->idOf(token); }

std::optional<std::string> Tokenizer::idToToken(std::int32_t id) const
{
    if (const auto added = m_impl->addedById.find(id); added != m_impl->addedById.end())
        return added->second->content;
    if (const std::string* token = m_impl->model->tokenOf(id))
        return *token;
    return std::nullopt;
}

std::optional<std::int32_t> Tokenizer::bosId() const { return m_impl->bos; }
std::optional<std::int32_t> Tokenizer::eosId() const { return m_impl->eos; }
const std::string& Tokenizer::source() const { return m_impl->source; }

} // namespace shardscope::text
