#pragma once

// Reading a corpus: text files (each file one document) and JSON Lines (one document per line, its
// text in a named field, `text` by default; blank lines are skipped). Every problem names the file
// and line: a line that is not JSON, one without the field or whose field is not a string, text
// that is not UTF-8.

#include "engine/common/result.h"

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardscope::text {

enum class CorpusFormat { Text, JsonLines };
// By extension: .jsonl, .ndjson and .json are JSON Lines; anything else is text.
CorpusFormat corpusFormatOf(const std::string& path);

// One unit of reading: raw lines of a JSON Lines file (parsed by whoever encodes them, so that
// parsing runs on many threads) or a whole text file.
struct CorpusChunk {
    std::string file;
    CorpusFormat format = CorpusFormat::Text;
    std::int64_t firstLine = 1; // of lines[0]
    std::vector<std::string> lines; // JSON Lines: the raw lines; text: one element, the file
    std::int64_t bytes = 0;
};

// The documents of a chunk, in order; errors name file:line.
Result<std::vector<std::string>> documentsOf(const CorpusChunk& chunk, const std::string& field);

class CorpusReader {
public:
    // Checks that every file can be read (and sums their sizes for progress).
    static Result<CorpusReader> open(const std::vector<std::string>& paths);
    // The next chunk of about `targetBytes`, or an empty optional at the end.
    Result<std::optional<CorpusChunk>> next(std::size_t targetBytes);
    std::int64_t totalBytes() const { return m_totalBytes; }

private:
    std::vector<std::string> m_paths;
    std::size_t m_current = 0;
    std::unique_ptr<std::ifstream> m_in;
    std::int64_t m_line = 0;
    std::int64_t m_totalBytes = 0;
};

} // namespace shardscope::text
