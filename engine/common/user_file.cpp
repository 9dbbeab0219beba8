#include "engine/common/user_file.h"

#include "engine/common/byte_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>

namespace shardscope {

namespace {

Error fileError(const std::filesystem::path& file, const std::string& message, const std::string& fix = {})
{
    Error error = makeError(message, ErrorKind::Io);
    error.file = file.string();
    error.fix = fix;
    return error;
}

std::string typeOf(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a file";
}

// Opens without blocking (a FIFO with no writer would block the open itself) and checks the type
// on the descriptor; the descriptor is made blocking again for a regular file's reads.
Result<int> openRegular(const std::filesystem::path& file, const std::string& what)
{
    const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fileError(file,
                         file.string() + ": cannot open " + what + " for reading (" + std::strerror(errno)
                             + "); check the path and its permissions",
                         "check the path and its permissions");
    struct stat info { };
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        const std::string type = typeOf(info.st_mode);
        ::close(fd);
        return fileError(file, file.string() + " is not a regular file (" + type + "); " + what
                                   + " must be a file: give the path of one");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

std::string tooLarge(const std::filesystem::path& file, const UserFileKind& kind)
{
    return file.string() + " is larger than " + formatBytes(static_cast<double>(kind.maxBytes)) + ", more than " + kind.what
           + " ever is; give the right file";
}

std::string tookTooLong(const std::filesystem::path& file, const UserFileKind& kind)
{
    const auto seconds = std::max<std::int64_t>(0, (kind.deadline.count() + 999) / 1000);
    return "reading " + file.string() + " took longer than " + std::to_string(seconds) + " s (" + kind.what
           + "); is its filesystem answering? Copy it to a local disk and give that";
}

// Reads on this thread; what a worker thread hands back to the reader waiting for it.
struct Reading {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    Result<std::string> result = std::string();
};

Result<std::string> readWhole(const std::filesystem::path& file, const UserFileKind& kind)
{
    auto fd = openRegular(file, kind.what);
    if (!fd)
        return fd.error();
    struct stat info { };
    if (::fstat(*fd, &info) == 0 && static_cast<std::uint64_t>(info.st_size) > kind.maxBytes) {
        ::close(*fd);
        return fileError(file, tooLarge(file, kind));
    }
    std::string text;
    char buffer[65536];
    for (;;) {
        const ssize_t got = ::read(*fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            const std::string reason = std::strerror(errno);
            ::close(*fd);
            return fileError(file, file.string() + ": reading " + kind.what + " failed (" + reason + ")");
        }
        if (got == 0)
            break;
        text.append(buffer, static_cast<std::size_t>(got));
        if (text.size() > kind.maxBytes) { // it grew while being read
            ::close(*fd);
            return fileError(file, tooLarge(file, kind));
        }
    }
    ::close(*fd);
    return text;
}

} // namespace

Result<std::string> readUserFileFrom(const std::filesystem::path& file, const std::string& what, std::uint64_t offset,
                                     std::uint64_t maxBytes)
{
    auto fd = openRegular(file, what);
    if (!fd)
        return fd.error();
    std::string bytes;
    char buffer[65536];
    while (bytes.size() < maxBytes) {
        const std::size_t want = std::min<std::uint64_t>(sizeof buffer, maxBytes - bytes.size());
        const ssize_t got = ::pread(*fd, buffer, want, static_cast<off_t>(offset + bytes.size()));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        bytes.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(*fd);
    return bytes;
}

Result<std::uint64_t> readUserFileLines(const std::filesystem::path& file, const UserFileKind& kind,
                                        const std::function<void(const std::string& line)>& onLine)
{
    constexpr std::uint64_t kPiece = 16u << 20;
    constexpr std::size_t kLongestLine = 64u << 20; // no line a run writes; a file of zeros has one
    const auto started = std::chrono::steady_clock::now();
    if (struct stat info{};
        ::stat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode) && static_cast<std::uint64_t>(info.st_size) > kind.maxBytes)
        return fileError(file, tooLarge(file, kind));
    std::uint64_t offset = 0, lines = 0;
    std::string partial;
    for (;;) {
        // Between pieces: a file on a filesystem that crawls ends in an error, naming it.
        if (std::chrono::steady_clock::now() - started > kind.deadline)
            return fileError(file, tookTooLong(file, kind));
        auto piece = readUserFileFrom(file, kind.what, offset, kPiece);
        if (!piece)
            return piece.error();
        if (piece->empty())
            break;
        offset += piece->size();
        if (offset > kind.maxBytes)
            return fileError(file, tooLarge(file, kind));
        partial += *piece;
        std::size_t start = 0;
        for (std::size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1, ++lines)
            onLine(partial.substr(start, end - start));
        partial.erase(0, start);
        if (partial.size() > kLongestLine)
            return fileError(file, file.string() + " has a line longer than " + formatBytes(static_cast<double>(kLongestLine))
                                       + "; " + kind.what + " has no such line (is it the right file?)");
    }
    if (!partial.empty()) {
        onLine(partial);
        ++lines;
    }
    return lines;
}

Result<std::string> readUserFile(const std::filesystem::path& file, const UserFileKind& kind)
{
    // The read runs on a thread of its own: a file on a network mount that stopped answering
    // blocks in read() beyond any signal, and this one must still return. A reader past its
    // deadline is left to finish (or hang) alone; what it reads then is dropped.
    auto reading = std::make_shared<Reading>();
    std::thread([reading, file, kind] {
        auto result = readWhole(file, kind);
        std::lock_guard<std::mutex> lock(reading->mutex);
        reading->result = std::move(result);
        reading->finished = true;
        reading->done.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(reading->mutex);
    if (!reading->done.wait_for(lock, kind.deadline, [&] { return reading->finished; }))
        return fileError(file, tookTooLong(file, kind));
    return std::move(reading->result);
}

} // namespace shardscope
