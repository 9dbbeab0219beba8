#include "engine/text/bpe_model.h"

#include "engine/text/unicode.h"

#include <atomic>
#include <cstdio>
#include <queue>

namespace shardscope::text {

namespace {

std::atomic<std::uint64_t> nextSerial{1};

// tokenizers' per-thread cache of merged words: its capacity and longest key.
constexpr std::size_t cacheCapacity = 10000;
constexpr std::size_t cacheMaxKeyBytes = 256;

struct WordCache {
    std::uint64_t serial = 0;
    std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> words;
};

WordCache& threadCache(std::uint64_t serial)
{
    thread_local WordCache cache;
    if (cache.serial != serial) {
        cache.words.clear();
        cache.serial = serial;
    }
    return cache;
}

} // namespace

Result<BpeModel> BpeModel::make(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                BpeOptions options)
{
    BpeModel model;
    std::int32_t maxId = -1;
    for (const auto& [token, id] : vocab) {
        if (id < 0)
            return makeError("the vocabulary gives '" + token + "' the negative id " + std::to_string(id), ErrorKind::BadValue);
        maxId = std::max(maxId, id);
    }
    model.m_tokens.assign(static_cast<std::size_t>(maxId + 1), {});
    model.m_hasId.assign(static_cast<std::size_t>(maxId + 1), false);
    for (const auto& [token, id] : vocab) {
        model.m_tokens[static_cast<std::size_t>(id)] = token;
        model.m_hasId[static_cast<std::size_t>(id)] = true;
    }
    const std::size_t prefixBytes = options.continuingSubwordPrefix.size();
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [left, right] = merges[rank];
        const auto a = vocab.find(left), b = vocab.find(right);
        const std::string merged = left + right.substr(std::min(prefixBytes, right.size()));
        const auto c = vocab.find(merged);
        if (a == vocab.end() || b == vocab.end() || c == vocab.end())
            return makeError("merge " + std::to_string(rank) + " ('" + left + "' '" + right + "'): '"
                                 + (a == vocab.end()   ? left
                                    : b == vocab.end() ? right
                                                       : merged)
                                 + "' is not in the vocabulary",
                             ErrorKind::BadValue);
        // A pair listed twice takes its last rank, as in tokenizers (its merges are collected into
        // a map, later entries replacing earlier ones).
        model.m_merges.insert_or_assign(pairKey(a->second, b->second), MergeRule{static_cast<std::uint32_t>(rank), c->second});
    }
    if (options.unkToken) {
        const auto unk = vocab.find(*options.unkToken);
        if (unk == vocab.end())
            return makeError("the unknown token '" + *options.unkToken + "' is not in the vocabulary", ErrorKind::BadValue);
        model.m_unkId = unk->second;
    }
    model.m_vocab = std::move(vocab);
    model.m_options = std::move(options);
    model.m_serial = nextSerial++;
    return model;
}

std::optional<std::int32_t> BpeModel::idOf(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    if (it == m_vocab.end())
        return std::nullopt;
    return it->second;
}

const std::string* BpeModel::tokenOf(std::int32_t id) const
{
    if (id < 0 || id >= idBound() || !m_hasId[static_cast<std::size_t>(id)])
        return nullptr;
    return &m_tokens[static_cast<std::size_t>(id)];
}

void BpeModel::tokenize(std::string_view piece, std::vector<std::int32_t>& out) const
{
    if (piece.empty())
        return;
    if (m_options.ignoreMerges) {
        if (const auto id = idOf(piece)) {
            out.push_back(*id);
            return;
        }
    }
    WordCache& cache = threadCache(m_serial);
    if (const auto hit = cache.words.find(piece); hit != cache.words.end()) {
        out.insert(out.end(), hit->second.begin(), hit->second.end());
        return;
    }
    std::vector<std::int32_t> ids;
    mergeWord(piece, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (piece.size() < cacheMaxKeyBytes && cache.words.size() < cacheCapacity)
        cache.words.emplace(std::string(piece), std::move(ids));
}

// The symbols before merging (model.rs merge_word): each character's id; for one not in the
// vocabulary its bytes' <0xNN> tokens (byte fallback), else the unknown token, consecutive unknowns
// fused into one when fuse_unk says so.
void BpeModel::initialSymbols(std::string_view piece, std::vector<std::int32_t>& ids) const
{
    std::int32_t pendingUnk = -1; // an unknown token not yet pushed (it may fuse with the next)
    std::string symbol;
    for (std::size_t i = 0; i < piece.size();) {
        const std::size_t n = std::min(utf8Length(static_cast<unsigned char>(piece[i])), piece.size() - i);
        const bool first = i == 0, last = i + n == piece.size();
        symbol.clear();
        if (!first)
            symbol += m_options.continuingSubwordPrefix;
        symbol.append(piece.substr(i, n));
        if (last)
            symbol += m_options.endOfWordSuffix;
        i += n;
        if (const auto id = idOf(symbol)) {
            if (pendingUnk >= 0) {
                ids.push_back(pendingUnk);
                pendingUnk = -1;
            }
            ids.push_back(*id);
            continue;
        }
        if (m_options.byteFallback) {
            std::vector<std::int32_t> bytes;
            for (const char byte : symbol) {
                char code[8];
                std::snprintf(code, sizeof code, "<0x%02X>", static_cast<unsigned char>(byte));
                const auto id = idOf(code);
                if (!id)
                    break;
                bytes.push_back(*id);
            }
            if (bytes.size() == symbol.size()) {
                // As tokenizers: a pending unknown token is not flushed before the bytes.
                ids.insert(ids.end(), bytes.begin(), bytes.end());
                continue;
            }
        }
        if (m_unkId) {
            if (pendingUnk >= 0 && !m_options.fuseUnk)
                ids.push_back(pendingUnk);
            pendingUnk = *m_unkId;
        }
    }
    if (pendingUnk >= 0)
        ids.push_back(pendingUnk);
}

// word.rs merge_all without dropout: a queue of mergeable neighbour pairs by (rank, position);
// stale entries (a side already merged away) are skipped when they come up.
void BpeModel::mergeWord(std::string_view piece, std::vector<std::int32_t>& out) const
{
    std::vector<std::int32_t> ids;
    initialSymbols(piece, ids);
    const auto n = static_cast<std::int64_t>(ids.size());
    std::vector<std::int64_t> prev(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
    std::vector<bool> removed(static_cast<std::size_t>(n), false);
    for (std::int64_t i = 0; i < n; ++i) {
        prev[static_cast<std::size_t>(i)] = i - 1;
        next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
    }
    struct Candidate {
        std::uint32_t rank;
        std::int64_t pos;
        std::int32_t newId;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto push = [&](std::int64_t pos) {
        const std::int64_t right = next[static_cast<std::size_t>(pos)];
        if (right < 0)
            return;
        const auto rule = m_merges.find(pairKey(ids[static_cast<std::size_t>(pos)], ids[static_cast<std::size_t>(right)]));
        if (rule != m_merges.end())
            queue.push({rule->second.rank, pos, rule->second.newId});
    };
    for (std::int64_t i = 0; i + 1 < n; ++i)
        push(i);
    while (!queue.empty()) {
        const Candidate top = queue.top();
        queue.pop();
        const auto pos = static_cast<std::size_t>(top.pos);
        if (removed[pos] || next[pos] < 0)
            continue;
        const auto right = static_cast<std::size_t>(next[pos]);
        const auto rule = m_merges.find(pairKey(ids[pos], ids[right]));
        if (rule == m_merges.end() || rule->second.newId != top.newId)
            continue; // stale: one side changed since this pair was queued
        ids[pos] = top.newId;
        removed[right] = true;
        next[pos] = next[right];
        if (next[pos] >= 0)
            prev[static_cast<std::size_t>(next[pos])] = top.pos;
        if (prev[pos] >= 0)
            push(prev[pos]);
        push(top.pos);
    }
    for (std::int64_t i = 0; i < n; ++i)
        if (!removed[static_cast<std::size_t>(i)])
            out.push_back(ids[static_cast<std::size_t>(i)]);
}

} // namespace shardscope::text
