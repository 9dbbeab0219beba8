#include "engine/text/data_prepare.h"

#include "engine/text/corpus.h"
#include "engine/text/tokenizer.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

namespace shardscope::text {

namespace {

// Workers that live for the whole preparation, so that each keeps its tokenizer caches (the BPE
// word cache, the regex JIT stack) warm across chunks.
class WorkerPool {
public:
    explicit WorkerPool(int threads)
    {
        for (int i = 0; i < threads; ++i)
            m_threads.emplace_back([this] { run(); });
    }
    ~WorkerPool()
    {
        {
            const std::lock_guard lock(m_mutex);
            m_stopping = true;
        }
        m_wake.notify_all();
        for (auto& t : m_threads)
            t.join();
    }
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    template <typename F>
    auto submit(F task) -> std::future<decltype(task())>
    {
        auto packaged = std::make_shared<std::packaged_task<decltype(task())()>>(std::move(task));
        auto future = packaged->get_future();
        {
            const std::lock_guard lock(m_mutex);
            m_tasks.emplace_back([packaged] { (*packaged)(); });
        }
        m_wake.notify_one();
        return future;
    }

private:
    void run()
    {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock lock(m_mutex);
                m_wake.wait(lock, [this] { return m_stopping || !m_tasks.empty(); });
                if (m_tasks.empty())
                    return;
                task = std::move(m_tasks.front());
                m_tasks.pop_front();
            }
            task();
        }
    }
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<std::function<void()>> m_tasks;
    std::vector<std::thread> m_threads;
    bool m_stopping = false;
};

struct EncodedChunk {
    Result<std::vector<std::vector<std::int32_t>>> documents = std::vector<std::vector<std::int32_t>>{};
    std::int64_t bytes = 0;
};

std::string megabytes(std::int64_t bytes)
{
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MB", static_cast<double>(bytes) / 1e6);
    return s;
}

} // namespace

std::string formatProgress(const PrepareProgress& p)
{
    const double rate = p.seconds > 0 ? static_cast<double>(p.tokens) / p.seconds : 0.0;
    const double fraction = p.bytesTotal > 0 ? static_cast<double>(p.bytesDone) / static_cast<double>(p.bytesTotal) : 1.0;
    char eta[32] = "-";
    if (fraction > 0 && fraction < 1)
        std::snprintf(eta, sizeof eta, "%.0f s", p.seconds * (1 - fraction) / fraction);
    char line[256];
    std::snprintf(line, sizeof line, "%s of %s (%.0f%%), %lld documents, %.2f M tokens/s, ETA %s", megabytes(p.bytesDone).c_str(),
                  megabytes(p.bytesTotal).c_str(), 100 * fraction, static_cast<long long>(p.documents), rate / 1e6, eta);
    return line;
}

std::string formatStats(const PrepareStats& s, const std::string& output)
{
    const auto& t = s.totals;
    char text[1024];
    std::snprintf(
        text, sizeof text,
        "wrote %s (%s ids, %s.json, %s.idx)\n"
        "  documents      %lld\n"
        "  tokens         %lld (EOS after each document included)\n"
        "  mean length    %.1f tokens (shortest %lld, longest %lld)\n"
        "  input          %s in %.2f s on %d threads: %.2f M tokens/s, %.1f MB/s\n",
        output.c_str(), tokenDtypeName(s.dtype), output.c_str(), output.c_str(), static_cast<long long>(t.documents),
        static_cast<long long>(t.tokens), t.documents ? static_cast<double>(t.tokens) / static_cast<double>(t.documents) : 0.0,
        static_cast<long long>(s.shortestDocument), static_cast<long long>(s.longestDocument), megabytes(t.bytesTotal).c_str(),
        t.seconds, s.threads, t.seconds > 0 ? static_cast<double>(t.tokens) / t.seconds / 1e6 : 0.0,
        t.seconds > 0 ? static_cast<double>(t.bytesTotal) / t.seconds / 1e6 : 0.0);
    return text;
}

std::vector<std::int32_t> encodeDocument(const Tokenizer& tokenizer, const std::string& text, std::int32_t eos)
{
    std::vector<std::int32_t> ids = tokenizer.encode(text, true);
    if (ids.empty() || ids.back() != eos)
        ids.push_back(eos);
    return ids;
}

Result<PrepareStats> encodeCorpus(const Tokenizer& tokenizer, const std::vector<std::string>& inputs, const std::string& field,
                                  int threads, const std::function<Result<void>(const std::vector<std::int32_t>&)>& onDocument,
                                  const std::function<void(const PrepareProgress&)>& progress)
{
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    const auto eos = tokenizer.eosId();
    if (!eos)
        return makeError(tokenizer.source()
                             + ": tokenizer_config.json names no eos_token, which documents are joined with; "
                               "add \"eos_token\" to it",
                         ErrorKind::BadValue);
    auto reader = CorpusReader::open(inputs);
    if (!reader)
        return reader.error();
    PrepareStats stats;
    stats.dtype = tokenDtypeFor(tokenizer.idBound());
    stats.threads = threads > 0 ? threads : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));

    WorkerPool pool(stats.threads);
    std::deque<std::future<EncodedChunk>> inFlight;
    PrepareProgress& totals = stats.totals;
    totals.bytesTotal = reader->totalBytes();
    auto lastReport = started;
    stats.shortestDocument = std::numeric_limits<std::int64_t>::max();
    // Hands the oldest chunk's documents on (in input order) once it is encoded.
    const auto takeOldest = [&]() -> Result<void> {
        EncodedChunk done = inFlight.front().get();
        inFlight.pop_front();
        if (!done.documents)
            return done.documents.error();
        for (const auto& ids : *done.documents) {
            if (auto taken = onDocument(ids); !taken)
                return taken.error();
            const auto length = static_cast<std::int64_t>(ids.size());
            stats.shortestDocument = std::min(stats.shortestDocument, length);
            stats.longestDocument = std::max(stats.longestDocument, length);
            ++totals.documents;
            totals.tokens += length;
        }
        totals.bytesDone += done.bytes;
        totals.seconds = std::chrono::duration<double>(Clock::now() - started).count();
        if (progress && Clock::now() - lastReport > std::chrono::milliseconds(500)) {
            progress(totals);
            lastReport = Clock::now();
        }
        return {};
    };
    constexpr std::size_t chunkBytes = 1 << 20;
    for (;;) {
        auto chunk = reader->next(chunkBytes);
        if (!chunk)
            return chunk.error();
        if (!*chunk)
            break;
        inFlight.push_back(pool.submit([&tokenizer, &field, eosId = *eos, c = std::move(**chunk)]() {
            EncodedChunk encoded;
            encoded.bytes = c.bytes;
            auto texts = documentsOf(c, field);
            if (!texts) {
                encoded.documents = texts.error();
                return encoded;
            }
            std::vector<std::vector<std::int32_t>> ids;
            ids.reserve(texts->size());
            for (const std::string& text : *texts)
                ids.push_back(encodeDocument(tokenizer, text, eosId));
            encoded.documents = std::move(ids);
            return encoded;
        }));
        if (inFlight.size() > static_cast<std::size_t>(2 * stats.threads))
            if (auto taken = takeOldest(); !taken)
                return taken.error();
    }
    while (!inFlight.empty())
        if (auto taken = takeOldest(); !taken)
            return taken.error();
    if (totals.documents == 0)
        return makeError("the corpus has no documents (every input file is empty, or has only blank lines); name files with text",
                         ErrorKind::BadValue);
    totals.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return stats;
}

Result<PrepareStats> prepareTokenFile(const PrepareOptions& options, const std::function<void(const PrepareProgress&)>& progress)
{
    auto tokenizer = Tokenizer::load(options.tokenizer);
    if (!tokenizer)
        return tokenizer.error();
    if (!tokenizer->eosId())
        return makeError(options.tokenizer
                             + "/tokenizer_config.json names no eos_token, which documents are joined with; "
                               "add \"eos_token\" to it",
                         ErrorKind::BadValue);
    if (auto readable = CorpusReader::open(options.inputs); !readable)
        return readable.error(); // before the output is created
    auto writer = TokenFileWriter::create(options.output, tokenDtypeFor(tokenizer->idBound()), options.overwrite);
    if (!writer)
        return writer.error();
    auto stats = encodeCorpus(
        *tokenizer, options.inputs, options.field, options.threads,
        [&writer](const std::vector<std::int32_t>& ids) { return writer->appendDocument(ids); }, progress);
    if (!stats)
        return stats.error();
    TokenFileInfo info;
    info.vocabSize = tokenizer->idBound();
    info.eosId = tokenizer->eosId();
    info.tokenizer = options.tokenizer;
    if (auto committed = writer->commit(info); !committed)
        return committed.error();
    return stats;
}

} // namespace shardscope::text
