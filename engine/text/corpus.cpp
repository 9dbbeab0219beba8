#include "engine/text/corpus.h"

#include "engine/text/unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

namespace shardscope::text {

namespace {

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Error at(const std::string& file, std::int64_t line, const std::string& what)
{
    Error e = inFile(makeError(file + ":" + std::to_string(line) + ": " + what, ErrorKind::BadValue), file);
    e.line = static_cast<int>(line);
    return e;
}

std::string jsonTypeName(const nlohmann::json& v)
{
    return v.is_number()    ? "a number"
           : v.is_boolean() ? "a boolean"
           : v.is_null()    ? "null"
           : v.is_array()   ? "an array"
                            : "an object";
}

Result<std::string> jsonLineDocument(const std::string& file, std::int64_t line, const std::string& text,
                                     const std::string& field)
{
    nlohmann::json value;
    try {
        value = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        std::string why = e.what();
        why = why.substr(why.find(": ") == std::string::npos ? 0 : why.find(": ") + 2);
        return at(file, line, "not JSON (" + why + "); each line of a JSON Lines file is one JSON object");
    }
    if (!value.is_object())
        return at(file, line, "is " + jsonTypeName(value) + ", not a JSON object with a \"" + field + "\" field");
    const auto it = value.find(field);
    if (it == value.end()) {
        std::string keys;
        for (const auto& [key, unused] : value.items())
            keys += (keys.empty() ? "" : ", ") + key;
        return at(file, line,
                  "has no \"" + field + "\" field (it has: " + (keys.empty() ? "nothing" : keys)
                      + "); set data.field in the recipe (--field for data prepare) to the field with the text");
    }
    if (!it->is_string())
        return at(file, line, "its \"" + field + "\" is " + jsonTypeName(*it) + ", not a string");
    return it->get<std::string>();
}

} // namespace

CorpusFormat corpusFormatOf(const std::string& path)
{
    return endsWith(path, ".jsonl") || endsWith(path, ".ndjson") || endsWith(path, ".json") ? CorpusFormat::JsonLines
                                                                                            : CorpusFormat::Text;
}

Result<std::vector<std::string>> documentsOf(const CorpusChunk& chunk, const std::string& field)
{
    std::vector<std::string> documents;
    if (chunk.format == CorpusFormat::Text) {
        const std::string& text = chunk.lines.front();
        if (const auto bad = firstInvalidUtf8(text)) {
            const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
            return at(chunk.file, line,
                      "not UTF-8 (byte " + std::to_string(*bad) + " of the file); convert the file to UTF-8, e.g. with iconv");
        }
        if (!text.empty()) // an empty file is no document
            documents.push_back(text);
        return documents;
    }
    for (std::size_t i = 0; i < chunk.lines.size(); ++i) {
        const std::string& line = chunk.lines[i];
        if (std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; }))
            continue;
        auto document = jsonLineDocument(chunk.file, chunk.firstLine + static_cast<std::int64_t>(i), line, field);
        if (!document)
            return document.error();
        documents.push_back(std::move(*document));
    }
    return documents;
}

Result<CorpusReader> CorpusReader::open(const std::vector<std::string>& paths)
{
    if (paths.empty())
        return makeError("no input files: name the text or JSON Lines files of the corpus", ErrorKind::BadValue);
    CorpusReader reader;
    for (const std::string& path : paths) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (ec || !std::ifstream(path).good())
            return inFile(makeError(path + ": cannot be read (" + (ec ? ec.message() : std::string("permission denied")) + ")",
                                    ErrorKind::Io),
                          path);
        reader.m_totalBytes += static_cast<std::int64_t>(size);
    }
    reader.m_paths = paths;
    return reader;
}

Result<std::optional<CorpusChunk>> CorpusReader::next(std::size_t targetBytes)
{
    while (m_current < m_paths.size()) {
        const std::string& path = m_paths[m_current];
        const CorpusFormat format = corpusFormatOf(path);
        if (!m_in) {
            m_in = std::make_unique<std::ifstream>(path, std::ios::binary);
            m_line = 0;
            if (!*m_in)
                return inFile(makeError(path + ": cannot be read", ErrorKind::Io), path);
        }
        CorpusChunk chunk;
        chunk.file = path;
        chunk.format = format;
        if (format == CorpusFormat::Text) {
            std::ostringstream all;
            all << m_in->rdbuf();
            chunk.lines.push_back(all.str());
            chunk.bytes = static_cast<std::int64_t>(chunk.lines.back().size());
            m_in.reset();
            ++m_current;
            return std::optional<CorpusChunk>(std::move(chunk));
        }
        chunk.firstLine = m_line + 1;
        std::string line;
        while (chunk.bytes < static_cast<std::int64_t>(targetBytes) && std::getline(*m_in, line)) {
            ++m_line;
            chunk.bytes += static_cast<std::int64_t>(line.size()) + 1;
            chunk.lines.push_back(std::move(line));
        }
        if (m_in->bad())
            return inFile(makeError(path + ": reading failed after line " + std::to_string(m_line), ErrorKind::Io), path);
        if (chunk.lines.empty() || m_in->eof()) {
            m_in.reset();
            ++m_current;
        }
        if (!chunk.lines.empty())
            return std::optional<CorpusChunk>(std::move(chunk));
    }
    return std::optional<CorpusChunk>();
}

} // namespace shardscope::text
