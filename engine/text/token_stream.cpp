#include "engine/text/token_stream.h"

#include "engine/text/data_prepare.h"
#include "engine/text/tokenizer.h"

#include <algorithm>
#include <filesystem>

namespace shardscope::text {

bool isCorpusPath(const std::string& path)
{
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext == ".jsonl" || ext == ".ndjson" || ext == ".json" || ext == ".txt" || ext == ".text" || ext == ".md";
}

Result<TokenStream> TokenStream::open(const TokenSourceOptions& options)
{
    if (options.paths.empty())
        return makeError("data.path names no files; name token files or text / JSON Lines corpora", ErrorKind::BadValue);
    TokenStream stream;
    for (const std::string& path : options.paths) {
        if (!isCorpusPath(path)) {
            auto file = TokenFile::open(path, options.tokenDtype);
            if (!file)
                return file.error();
            stream.m_parts.push_back(std::move(*file));
            continue;
        }
        if (!options.tokenizer)
            return makeError(path
                                 + " is a corpus to tokenize, and the recipe names no tokenizer; set data.tokenizer: DIR "
                                   "(a folder with tokenizer.json), or model.pretrained to a folder that has one",
                             ErrorKind::BadValue);
        const Tokenizer& tokenizer = *options.tokenizer;
        std::vector<std::uint32_t> ids;
        auto encoded = encodeCorpus(tokenizer, {path}, options.field, options.threads,
                                    [&ids](const std::vector<std::int32_t>& document) -> Result<void> {
                                        ids.insert(ids.end(), document.begin(), document.end());
                                        return {};
                                    });
        if (!encoded)
            return encoded.error();
        TokenFileInfo info;
        info.documents = encoded->totals.documents;
        info.vocabSize = tokenizer.idBound();
        info.eosId = tokenizer.eosId();
        info.tokenizer = tokenizer.source();
        stream.m_parts.push_back(TokenFile::fromIds(std::move(ids), path, info));
    }
    for (const auto& part : stream.m_parts) {
        stream.m_starts.push_back(stream.m_size);
        stream.m_size += part.size();
    }
    return stream;
}

void TokenStream::read(std::int64_t start, std::int64_t count, std::int64_t* out) const
{
    // The part holding `start`: the last whose first position is not after it.
    auto part = static_cast<std::size_t>(std::upper_bound(m_starts.begin(), m_starts.end(), start) - m_starts.begin() - 1);
    while (count > 0) {
        const std::int64_t offset = start - m_starts[part];
        const std::int64_t n = std::min(count, m_parts[part].size() - offset);
        m_parts[part].read(offset, n, out);
        out += n;
        start += n;
        count -= n;
        ++part;
    }
}

TokenStream::Highest TokenStream::highestId() const
{
    Highest best;
    for (const auto& part : m_parts) {
        for (std::int64_t i = 0; i < part.size(); ++i) {
            const std::uint32_t id = part.at(i);
            if (id > best.id || best.path.empty()) {
                best = {id, i, part.path()};
            }
        }
    }
    return best;
}

} // namespace shardscope::text
