#pragma once

// `shardscope data prepare`: a corpus (text / JSON Lines files) tokenized into a token file on all
// cores. Documents are encoded with the tokenizer's special tokens (its post-processor: Llama's
// BOS) and each is followed by EOS (unless its encoding already ends with it), so that the token
// file is the stream the engine packs into sequences, as transformers' run_clm joins texts.

#include "engine/common/result.h"
#include "engine/text/token_file.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shardscope::text {

class Tokenizer;

struct PrepareOptions {
    std::string tokenizer; // a folder with tokenizer.json
    std::vector<std::string> inputs;
    std::string output;
    std::string field = "text"; // JSON Lines: the field with the text
    int threads = 0; // 0: every core
    bool overwrite = false;
};

struct PrepareProgress {
    std::int64_t bytesDone = 0;
    std::int64_t bytesTotal = 0;
    std::int64_t documents = 0;
    std::int64_t tokens = 0;
    double seconds = 0;
};

struct PrepareStats {
    PrepareProgress totals;
    std::int64_t shortestDocument = 0; // tokens, with EOS
    std::int64_t longestDocument = 0;
    TokenDtype dtype = TokenDtype::UInt16;
    int threads = 1;
};

// "12.3 MB of 50.0 MB (24%), 10234 documents, 2.10 M tokens/s, ETA 14 s"
std::string formatProgress(const PrepareProgress& progress);
// The closing statistics, several lines.
std::string formatStats(const PrepareStats& stats, const std::string& output);

// The ids of one document as the token file stores it (encode + EOS).
std::vector<std::int32_t> encodeDocument(const Tokenizer& tokenizer, const std::string& text, std::int32_t eos);

// Reads and encodes a corpus on `threads` workers (0: every core), handing each document's ids
// (encodeDocument) to `onDocument` in input order, on the calling thread; the first error (a
// file:line of the corpus, or onDocument's) ends it. An empty corpus is an error.
Result<PrepareStats> encodeCorpus(const Tokenizer& tokenizer, const std::vector<std::string>& inputs, const std::string& field,
                                  int threads, const std::function<Result<void>(const std::vector<std::int32_t>&)>& onDocument,
                                  const std::function<void(const PrepareProgress&)>& progress = {});

// Nothing is left under options.output unless it succeeds. `progress` is called about twice a
// second from the calling thread.
Result<PrepareStats> prepareTokenFile(const PrepareOptions& options,
                                      const std::function<void(const PrepareProgress&)>& progress = {});

} // namespace shardscope::text
