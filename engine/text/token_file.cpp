#include "engine/text/token_file.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardscope::text {

static_assert(std::endian::native == std::endian::little, "token files are little-endian and read in place");

namespace {

constexpr std::int32_t llmcMagic = 20240520;
constexpr std::size_t llmcHeaderBytes = 256 * sizeof(std::int32_t);
constexpr const char* formatName = "shardscope.tokens";

Error fileError(const std::string& path, const std::string& what, ErrorKind kind = ErrorKind::BadValue)
{
    return inFile(makeError(path + ": " + what, kind), path);
}

std::string systemError() { return std::strerror(errno); }

} // namespace

const char* tokenDtypeName(TokenDtype dtype) { return dtype == TokenDtype::UInt16 ? "uint16" : "uint32"; }

std::optional<TokenDtype> parseTokenDtype(const std::string& name)
{
    if (name == "uint16")
        return TokenDtype::UInt16;
    if (name == "uint32")
        return TokenDtype::UInt32;
    return std::nullopt;
}

std::size_t tokenDtypeBytes(TokenDtype dtype) { return dtype == TokenDtype::UInt16 ? 2 : 4; }

TokenDtype tokenDtypeFor(std::int64_t idBound) { return idBound <= 65536 ? TokenDtype::UInt16 : TokenDtype::UInt32; }

struct TokenFile::Mapping {
    void* address = MAP_FAILED;
    std::size_t length = 0;
    std::vector<std::uint32_t> owned; // fromIds: the ids themselves, nothing mapped
    ~Mapping()
    {
        if (address != MAP_FAILED)
            munmap(address, length);
    }
};

namespace {

// The sidecar F.json of a Shardscope token file.
Result<TokenFileInfo> readSidecar(const std::string& path)
{
    std::ifstream in(path + ".json");
    std::stringstream text;
    text << in.rdbuf();
    const auto sidecar = nlohmann::json::parse(text.str(), nullptr, false);
    if (sidecar.is_discarded() || !sidecar.is_object() || sidecar.value("format", "") != formatName)
        return fileError(path + ".json", std::string("is not a token file's description (a JSON object with \"format\": \"")
                                             + formatName
                                             + "\"); remove it, or prepare the file again with `shardscope data prepare`");
    TokenFileInfo info;
    const auto dtype = parseTokenDtype(sidecar.value("dtype", ""));
    if (!dtype)
        return fileError(path + ".json", "dtype must be \"uint16\" or \"uint32\"");
    info.dtype = *dtype;
    info.tokens = sidecar.value("tokens", std::int64_t{-1});
    info.documents = sidecar.value("documents", std::int64_t{0});
    info.vocabSize = sidecar.value("vocab_size", std::int64_t{0});
    if (sidecar.contains("eos_id") && sidecar["eos_id"].is_number_integer())
        info.eosId = sidecar["eos_id"].get<std::int32_t>();
    info.tokenizer = sidecar.value("tokenizer", "");
    return info;
}

} // namespace

Result<TokenFile> TokenFile::open(const std::string& path, std::optional<TokenDtype> dtype)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fileError(path, "cannot be opened: " + systemError() + " (data.path in the recipe)", ErrorKind::Io);
    struct stat st { };
    ::fstat(fd, &st);
    const auto bytes = static_cast<std::size_t>(st.st_size);
    auto map = std::make_shared<Mapping>();
    map->length = bytes;
    if (bytes > 0)
        map->address = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (bytes > 0 && map->address == MAP_FAILED)
        return fileError(path, "cannot be memory-mapped: " + systemError(), ErrorKind::Io);
    const auto* base = static_cast<const unsigned char*>(bytes > 0 ? map->address : nullptr);

    TokenFile file;
    file.m_path = path;
    std::size_t header = 0;
    std::error_code ec;
    std::int32_t head[3] = {0, 0, 0};
    if (bytes >= llmcHeaderBytes)
        std::memcpy(head, base, sizeof head);
    if (std::filesystem::exists(path + ".json", ec)) {
        auto info = readSidecar(path);
        if (!info)
            return info.error();
        file.m_info = *info;
    } else if (head[0] == llmcMagic) {
        if (head[1] != 1 && head[1] != 2)
            return fileError(path, "is an llm.c token file of version " + std::to_string(head[1])
                                       + "; versions 1 (uint16) and 2 (uint32) are read");
        file.m_info.layout = TokenFileLayout::LlmC;
        file.m_info.dtype = head[1] == 1 ? TokenDtype::UInt16 : TokenDtype::UInt32;
        file.m_info.tokens = head[2];
        header = llmcHeaderBytes;
    } else if (dtype) {
        file.m_info.layout = TokenFileLayout::Bare;
        file.m_info.dtype = *dtype;
    } else {
        return fileError(path, "has no description " + path
                                   + ".json and no llm.c header, so its dtype is unknown; set data.token_dtype "
                                     "(uint16 or uint32) in the recipe for a bare file of ids (nanoGPT's .bin), or "
                                     "prepare it with `shardscope data prepare`");
    }
    if (dtype && *dtype != file.m_info.dtype && file.m_info.layout != TokenFileLayout::Bare)
        return fileError(path, std::string("holds ") + tokenDtypeName(file.m_info.dtype) + " ids, but data.token_dtype says "
                                   + tokenDtypeName(*dtype) + "; remove data.token_dtype (the file says its dtype)");
    const std::size_t width = tokenDtypeBytes(file.m_info.dtype);
    const std::size_t payload = bytes - std::min(bytes, header);
    if (payload % width != 0)
        return fileError(path, "has " + std::to_string(payload) + " bytes of ids, not a multiple of " + std::to_string(width)
                                   + " (" + tokenDtypeName(file.m_info.dtype) + "): the file is truncated or its dtype is not "
                                   + tokenDtypeName(file.m_info.dtype));
    const auto count = static_cast<std::int64_t>(payload / width);
    if (file.m_info.layout == TokenFileLayout::Bare || file.m_info.tokens < 0)
        file.m_info.tokens = count;
    if (file.m_info.tokens != count)
        return fileError(path, "holds " + std::to_string(count) + " ids, but its "
                                   + (file.m_info.layout == TokenFileLayout::LlmC ? "header" : "description") + " says "
                                   + std::to_string(file.m_info.tokens)
                                   + ": the file is truncated or was changed; prepare it again");
    file.m_map = std::move(map);
    file.m_data = base ? base + header : nullptr;
    return file;
}

TokenFile TokenFile::fromIds(std::vector<std::uint32_t> ids, std::string name, TokenFileInfo info)
{
    auto held = std::make_shared<Mapping>();
    held->owned = std::move(ids);
    TokenFile file;
    file.m_info = std::move(info);
    file.m_info.dtype = TokenDtype::UInt32;
    file.m_info.tokens = static_cast<std::int64_t>(held->owned.size());
    file.m_data = reinterpret_cast<const unsigned char*>(held->owned.data());
    file.m_map = std::move(held);
    file.m_path = std::move(name);
    return file;
}

std::uint32_t TokenFile::at(std::int64_t i) const
{
    if (m_info.dtype == TokenDtype::UInt16) {
        std::uint16_t v;
        std::memcpy(&v, m_data + static_cast<std::size_t>(i) * 2, 2);
        return v;
    }
    std::uint32_t v;
    std::memcpy(&v, m_data + static_cast<std::size_t>(i) * 4, 4);
    return v;
}

void TokenFile::read(std::int64_t start, std::int64_t count, std::int64_t* out) const
{
    // The dataset's hot path (every sample of every batch): the dtype is decided once.
    const auto copy = [&](auto id) {
        const unsigned char* p = m_data + static_cast<std::size_t>(start) * sizeof id;
        for (std::int64_t k = 0; k < count; ++k, p += sizeof id) {
            std::memcpy(&id, p, sizeof id);
            out[k] = id;
        }
    };
    if (m_info.dtype == TokenDtype::UInt16)
        copy(std::uint16_t{});
    else
        copy(std::uint32_t{});
}

std::uint32_t TokenFile::maxId() const
{
    std::uint32_t best = 0;
    for (std::int64_t i = 0; i < m_info.tokens; ++i)
        best = std::max(best, at(i));
    return best;
}

std::vector<std::int64_t> TokenFile::documentEnds() const
{
    std::vector<std::int64_t> ends;
    std::ifstream in(m_path + ".idx", std::ios::binary);
    if (!in || m_info.layout != TokenFileLayout::Shardscope)
        return ends;
    std::uint64_t end = 0;
    while (in.read(reinterpret_cast<char*>(&end), sizeof end))
        ends.push_back(static_cast<std::int64_t>(end));
    return ends;
}

Result<TokenFileWriter> TokenFileWriter::create(const std::string& path, TokenDtype dtype, bool overwrite)
{
    std::error_code ec;
    if (!overwrite && std::filesystem::exists(path, ec))
        return fileError(path, "exists; choose another output, or pass --force to replace it", ErrorKind::Conflict);
    TokenFileWriter writer;
    writer.m_path = path;
    writer.m_partial = path + ".partial";
    writer.m_dtype = dtype;
    writer.m_file.reset(std::fopen(writer.m_partial.c_str(), "wb"));
    if (!writer.m_file)
        return fileError(writer.m_partial, "cannot be written: " + systemError(), ErrorKind::Io);
    return writer;
}

TokenFileWriter::TokenFileWriter(TokenFileWriter&& other) noexcept
    : m_path(std::move(other.m_path)), m_partial(std::move(other.m_partial)), m_dtype(other.m_dtype),
      m_file(std::move(other.m_file)), m_ends(std::move(other.m_ends)), m_tokens(other.m_tokens), m_committed(other.m_committed)
{
    other.m_committed = true; // the moved-from writer owns nothing to clean up
}

TokenFileWriter::~TokenFileWriter()
{
    if (m_committed)
        return;
    m_file.reset();
    std::error_code ec;
    for (const char* suffix : {".partial", ".json.partial", ".idx.partial"})
        std::filesystem::remove(m_path + suffix, ec);
}

Result<void> TokenFileWriter::appendDocument(const std::vector<std::int32_t>& ids)
{
    const std::size_t width = tokenDtypeBytes(m_dtype);
    m_buffer.resize(ids.size() * width);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto id = static_cast<std::uint32_t>(ids[i]);
        if (width == 2) {
            const auto v = static_cast<std::uint16_t>(id);
            std::memcpy(m_buffer.data() + i * 2, &v, 2);
        } else {
            std::memcpy(m_buffer.data() + i * 4, &id, 4);
        }
    }
    if (!m_buffer.empty() && std::fwrite(m_buffer.data(), 1, m_buffer.size(), m_file.get()) != m_buffer.size())
        return fileError(m_partial, "cannot be written: " + systemError() + " (is the disk full?)", ErrorKind::Io);
    m_tokens += static_cast<std::int64_t>(ids.size());
    m_ends.push_back(m_tokens);
    return {};
}

Result<void> TokenFileWriter::commit(TokenFileInfo info)
{
    if (std::fflush(m_file.get()) != 0 || ::fsync(::fileno(m_file.get())) != 0)
        return fileError(m_partial, "cannot be written: " + systemError() + " (is the disk full?)", ErrorKind::Io);
    m_file.reset();
    {
        std::ofstream idx(m_path + ".idx.partial", std::ios::binary);
        for (const std::int64_t end : m_ends) {
            const auto v = static_cast<std::uint64_t>(end);
            idx.write(reinterpret_cast<const char*>(&v), sizeof v);
        }
        nlohmann::json sidecar = {{"format", formatName},
                                  {"version", 1},
                                  {"dtype", tokenDtypeName(m_dtype)},
                                  {"tokens", m_tokens},
                                  {"documents", documents()},
                                  {"vocab_size", info.vocabSize},
                                  {"tokenizer", info.tokenizer}};
        if (info.eosId)
            sidecar["eos_id"] = *info.eosId;
        std::ofstream json(m_path + ".json.partial");
        json << sidecar.dump(2) << "\n";
        if (!idx || !json)
            return fileError(m_path + ".json.partial", "cannot be written (is the disk full?)", ErrorKind::Io);
    }
    // The ids move into place last: until then the final name holds nothing of this run.
    std::error_code ec;
    std::filesystem::rename(m_path + ".idx.partial", m_path + ".idx", ec);
    if (!ec)
        std::filesystem::rename(m_path + ".json.partial", m_path + ".json", ec);
    if (!ec)
        std::filesystem::rename(m_partial, m_path, ec);
    if (ec)
        return fileError(m_path, "cannot be put in place: " + ec.message(), ErrorKind::Io);
    m_committed = true;
    return {};
}

} // namespace shardscope::text
