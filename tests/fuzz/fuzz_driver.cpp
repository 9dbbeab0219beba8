// The fuzz driver for builds without libFuzzer (GCC): a main() for any LLVMFuzzerTestOneInput.
// It reads seed inputs, runs each once as it is (the regression seeds), then feeds seeded
// mutations of them for a bounded number of iterations or seconds. On a crash, an abort (a failed
// invariant, an escaped exception) or an input that runs too long, it saves the input, prints
// the seed, the iteration and the saved file's path, and dies of the same signal, so CTest and
// the shell see the failure. See Note [Fuzz targets] in tests/fuzz/CMakeLists.txt.
//
//   fuzz_x [options] [file or folder ...]    (no paths: the seed folders compiled in)
//     -seed=N             mutation seed (else $SHARDSCOPE_FUZZ_SEED, else 1)
//     -runs=N             mutated inputs to run (else $SHARDSCOPE_FUZZ_ITERATIONS; 0: no limit)
//     -max_total_time=S   seconds of mutation (else $SHARDSCOPE_FUZZ_SECONDS; 0: no limit)
//     -timeout=S          one input running longer is a failure (default 10)
//     -artifact_prefix=P  where failing inputs go (else $SHARDSCOPE_FUZZ_ARTIFACTS, else ./)
//   With neither a run count nor a time given: 20000 inputs or 4 seconds, whichever comes first.
//   Only files given (no folder, no -runs/-max_total_time): each is run once, as libFuzzer does
//   (replaying a saved failure).
// The option spelling is libFuzzer's, so one command line serves both builds.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// --- what the signal handler needs, prepared before each input ---
const std::uint8_t* g_input = nullptr;
std::size_t g_inputSize = 0;
char g_artifactPath[4096];
char g_report[8192];
std::size_t g_reportSize = 0;

void writeAll(int fd, const void* data, std::size_t size)
{
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = write(fd, p, size);
        if (n <= 0)
            return;
        p += n;
        size -= std::size_t(n);
    }
}

// Async-signal-safe: saves the input and prints the report prepared for it.
void onDeadlySignal(int sig)
{
    const int fd = open(g_artifactPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        writeAll(fd, g_input, g_inputSize);
        close(fd);
    }
    const char* what = sig == SIGALRM ? "==shardscope-fuzz== TIMEOUT: one input ran longer than -timeout\n"
                                      : "==shardscope-fuzz== DEADLY SIGNAL (crash, failed invariant or escaped exception)\n";
    writeAll(STDERR_FILENO, what, std::strlen(what));
    writeAll(STDERR_FILENO, g_report, g_reportSize);
    signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
    raise(sig == SIGALRM ? SIGABRT : sig);
}

void installHandlers()
{
    struct sigaction action { };
    action.sa_handler = onDeadlySignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS, SIGALRM})
        sigaction(sig, &action, nullptr);
}

std::string readFile(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// YAML and JSON tokens (every target reads one or the other) and numbers at type edges.
const char* const kTokens[] = {"{",           "}",       "[",
                               "]",           "\"",      "'",
                               ":",           ": ",      ",",
                               "- ",          "\n",      "\n  ",
                               "#",           "&a ",     "*a",
                               "!!int ",      "!!str ",  "!!binary ",
                               "<<: ",        "? ",      "|",
                               ">",           "---\n",   "...\n",
                               "~",           "null",    "true",
                               "false",       "NO",      "yes",
                               "\"auto\"",    "\\u0000", "\\ud800",
                               "\\",          "\t",      "\r",
                               "\xc3\xa9",    "\xff",    "\xef\xbb\xbf",
                               "%YAML 1.1\n", "{\"",     "\":",
                               "[]",          "{}",      "\"\"",
                               "2020-01-01"};
const char* const kNumbers[] = {"0",
                                "-0",
                                "1",
                                "-1",
                                "2",
                                "7",
                                "255",
                                "256",
                                "65535",
                                "65536",
                                "2147483647",
                                "2147483648",
                                "-2147483649",
                                "4294967296",
                                "9007199254740993",
                                "9223372036854775807",
                                "9223372036854775808",
                                "-9223372036854775809",
                                "18446744073709551616",
                                "1e308",
                                "1e309",
                                "-1e309",
                                "1e-400",
                                "4.9e-324",
                                "1.5",
                                "0.1",
                                ".inf",
                                "-.inf",
                                ".nan",
                                "NaN",
                                "0x7f",
                                "0o17",
                                "1_000",
                                "010",
                                "1e3",
                                "3e2"};
const std::uint8_t kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '\n', '"', '\\', ':', '{', '[', ' ', '-', '0', 'e'};

class Mutator {
public:
    Mutator(std::uint64_t seed, const std::vector<std::string>& corpus) : m_rng(seed), m_corpus(corpus) { }

    std::size_t below(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng); }

    std::string mutate(std::string s, std::size_t maxSize)
    {
        const std::size_t edits = 1 + below(below(8) + 1);
        for (std::size_t e = 0; e < edits; ++e)
            mutateOnce(s);
        if (s.size() > maxSize)
            s.resize(maxSize);
        return s;
    }

private:
    void mutateOnce(std::string& s)
    {
        const std::size_t pos = below(s.size() + 1);
        switch (below(13)) {
        case 0: // flip a bit
            if (!s.empty())
                s[below(s.size())] ^= char(1u << below(8));
            break;
        case 1: // a random byte
            if (!s.empty())
                s[below(s.size())] = char(below(256));
            break;
        case 2: // an interesting byte
            if (!s.empty())
                s[below(s.size())] = char(kBytes[below(std::size(kBytes))]);
            break;
        case 3: // insert bytes
            s.insert(pos, below(4) + 1, char(below(2) ? below(256) : kBytes[below(std::size(kBytes))]));
            break;
        case 4: // delete a range
            if (!s.empty())
                s.erase(below(s.size()), 1 + below(below(2) ? 4 : 64));
            break;
        case 5: { // duplicate a chunk elsewhere
            if (s.empty())
                break;
            const std::size_t from = below(s.size());
            const std::string chunk = s.substr(from, 1 + below(64));
            s.insert(below(s.size() + 1), chunk);
            break;
        }
        case 6: { // splice a chunk of another seed in
            const std::string& other = m_corpus[below(m_corpus.size())];
            if (other.empty())
                break;
            const std::size_t from = below(other.size());
            const std::string chunk = other.substr(from, 1 + below(256));
            if (below(2))
                s.insert(pos, chunk);
            else
                s.replace(pos, std::min(chunk.size(), s.size() - pos), chunk);
            break;
        }
        case 7: // a token
            s.insert(pos, kTokens[below(std::size(kTokens))]);
            break;
        case 8: { // replace a number (or insert one)
            std::size_t start = pos;
            while (start < s.size() && !std::isdigit(static_cast<unsigned char>(s[start])))
                ++start;
            if (start >= s.size()) {
                s.insert(pos, kNumbers[below(std::size(kNumbers))]);
                break;
            }
            std::size_t end = start;
            while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '.' || s[end] == '_'))
                ++end;
            if (start > 0 && s[start - 1] == '-')
                --start;
            s.replace(start, end - start, kNumbers[below(std::size(kNumbers))]);
            break;
        }
        case 9: // truncate
            s.resize(pos);
            break;
        case 10: { // duplicate a line
            const auto lineStart = pos == 0 ? 0 : s.rfind('\n', pos - 1);
            const std::size_t from = lineStart == std::string::npos ? 0 : lineStart + (pos == 0 ? 0 : 1);
            const auto lineEnd = s.find('\n', from);
            const std::string line = s.substr(from, lineEnd == std::string::npos ? std::string::npos : lineEnd - from + 1);
            s.insert(from, line);
            break;
        }
        case 11: // indentation
            s.insert(pos, std::string(1 + below(4), ' '));
            break;
        default: // swap two bytes
            if (s.size() > 1)
                std::swap(s[below(s.size())], s[below(s.size())]);
        }
    }

    std::mt19937_64 m_rng;
    const std::vector<std::string>& m_corpus;
};

struct Options {
    std::uint64_t seed = 1;
    long long runs = -1; // -1: not given
    double seconds = -1; // -1: not given
    unsigned timeout = 10; // seconds
    std::string artifactPrefix = "./";
    std::vector<std::string> paths;
};

const char* envOr(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

std::vector<std::string> defaultSeedPaths()
{
    std::vector<std::string> paths;
#ifdef SHARDSCOPE_FUZZ_SEED_DIRS
    std::stringstream list(SHARDSCOPE_FUZZ_SEED_DIRS);
    for (std::string item; std::getline(list, item, ';');)
        if (!item.empty())
            paths.push_back(item);
#endif
    return paths;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    if (const char* v = envOr("SHARDSCOPE_FUZZ_SEED"))
        o.seed = std::strtoull(v, nullptr, 10);
    if (const char* v = envOr("SHARDSCOPE_FUZZ_ITERATIONS"))
        o.runs = std::atoll(v);
    if (const char* v = envOr("SHARDSCOPE_FUZZ_SECONDS"))
        o.seconds = std::atof(v);
    if (const char* v = envOr("SHARDSCOPE_FUZZ_ARTIFACTS"))
        o.artifactPrefix = std::string(v) + "/";
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char* flag) -> const char* {
            const std::size_t n = std::strlen(flag);
            return arg.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
        };
        const char* seedValue = value("-seed=");
        const char* runsValue = value("-runs=");
        const char* timeValue = value("-max_total_time=");
        const char* timeoutValue = value("-timeout=");
        const char* prefixValue = value("-artifact_prefix=");
        if (seedValue)
            o.seed = std::strtoull(seedValue, nullptr, 10);
        else if (runsValue)
            o.runs = std::atoll(runsValue);
        else if (timeValue)
            o.seconds = std::atof(timeValue);
        else if (timeoutValue)
            o.timeout = unsigned(std::atoi(timeoutValue));
        else if (prefixValue)
            o.artifactPrefix = prefixValue;
        else if (arg.size() > 1 && arg[0] == '-')
            std::fprintf(stderr, "%s: ignoring libFuzzer option %s\n", argv[0], arg.c_str());
        else
            o.paths.push_back(arg);
    }
    const bool bounded = o.runs >= 0 || o.seconds >= 0;
    long long runLimit = -1; // -1: no limit
    double timeLimit = -1;
    if (!bounded) {
        runLimit = 20000;
        timeLimit = 4;
    } else {
        runLimit = o.runs > 0 ? o.runs : -1;
        timeLimit = o.seconds > 0 ? o.seconds : -1;
    }

    std::string name = fs::path(argv[0]).filename().string();
    bool anyFolder = false;
    if (o.paths.empty())
        o.paths = defaultSeedPaths();
    std::vector<std::pair<std::string, std::string>> seeds; // path, bytes
    for (const auto& p : o.paths) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            anyFolder = true;
            std::vector<fs::path> files;
            for (const auto& e : fs::directory_iterator(p, ec))
                if (e.is_regular_file(ec) && e.file_size(ec) <= (1u << 20))
                    files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files)
                seeds.emplace_back(f.string(), readFile(f));
        } else if (fs::is_regular_file(p, ec)) {
            seeds.emplace_back(p, readFile(p));
        } else {
            std::fprintf(stderr, "%s: no such seed file or folder: %s\n", name.c_str(), p.c_str());
        }
    }
    const bool replayOnly = !anyFolder && !bounded && !seeds.empty();
    if (seeds.empty())
        seeds.emplace_back("(empty input)", std::string());

    installHandlers();
    std::size_t maxSeed = 0;
    std::vector<std::string> corpus;
    for (const auto& [path, bytes] : seeds) {
        corpus.push_back(bytes);
        maxSeed = std::max(maxSeed, bytes.size());
    }
    const std::size_t maxSize = std::max<std::size_t>(4096, 2 * maxSeed);

    auto run = [&](const std::string& bytes, const std::string& label) {
        // An exact-size copy, so that reading past the end is caught by a sanitizer.
        std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[bytes.size() + (bytes.empty() ? 1 : 0)]);
        std::memcpy(copy.get(), bytes.data(), bytes.size());
        g_input = copy.get();
        g_inputSize = bytes.size();
        std::snprintf(g_artifactPath, sizeof g_artifactPath, "%scrash-%s-seed%llu-%s", o.artifactPrefix.c_str(), name.c_str(),
                      static_cast<unsigned long long>(o.seed), label.c_str());
        const int n = std::snprintf(g_report, sizeof g_report,
                                    "  target %s, seed %llu, input %s (%zu bytes)\n  saved to %s\n  replay: %s %s\n",
                                    name.c_str(), static_cast<unsigned long long>(o.seed), label.c_str(), bytes.size(),
                                    g_artifactPath, argv[0], g_artifactPath);
        g_reportSize = n < 0 ? 0 : std::min(std::size_t(n), sizeof g_report - 1);
        alarm(o.timeout);
        LLVMFuzzerTestOneInput(copy.get(), bytes.size());
        alarm(0);
    };

    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    for (std::size_t i = 0; i < seeds.size(); ++i)
        run(seeds[i].second, "seed" + std::to_string(i));
    if (replayOnly) {
        std::printf("%s: ran %zu input(s) once, no failure\n", name.c_str(), seeds.size());
        return 0;
    }

    Mutator mutator(o.seed, corpus);
    std::string previous;
    long long iteration = 0;
    for (; (runLimit < 0 || iteration < runLimit) && (timeLimit < 0 || elapsed() < timeLimit); ++iteration) {
        // Mostly fresh mutations of a seed; sometimes a mutation of the last input, to go deeper.
        const std::string& base = !previous.empty() && mutator.below(4) == 0 ? previous : corpus[mutator.below(corpus.size())];
        previous = mutator.mutate(base, maxSize);
        run(previous, "iteration" + std::to_string(iteration));
    }
    std::printf("%s: %zu seeds, %lld mutated inputs in %.1f s (seed %llu), no failure\n", name.c_str(), seeds.size(), iteration,
                elapsed(), static_cast<unsigned long long>(o.seed));
    return 0;
}
