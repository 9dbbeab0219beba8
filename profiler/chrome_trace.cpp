#include "profiler/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace shardscope::profiler {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// Export

// Note [Time origin]: timestamps are written relative to a whole second at or before the file's
// earliest event (otherData.shardscope.time_origin_ns). Steady-clock nanoseconds of a machine up
// for weeks exceed what a double holds to the nanosecond once divided into µs; small offsets
// keep ts exact to 1 ns and still let Perfetto show seconds since that origin.
constexpr std::int64_t kNsPerSecond = 1'000'000'000;

double toMicros(std::int64_t ns) { return double(ns) / 1000.0; }

std::string threadKey(const Span& span) { return span.track.empty() ? std::string(laneName(span.lane)) : span.track; }

// Orders thread keys: the four lanes first (in lane order), then tracks, "stream 7" before
// "stream 13" (shorter first, then alphabetical).
bool keyLess(const std::string& a, const std::string& b)
{
    auto rank = [](const std::string& key) {
        const auto lane = parseLane(key);
        return lane ? int(*lane) : 100;
    };
    const int ra = rank(a);
    const int rb = rank(b);
    if (ra != rb)
        return ra < rb;
    if (a.size() != b.size())
        return a.size() < b.size();
    return a < b;
}

std::int64_t earliestTime(const RankTrace& trace, std::int64_t offset, bool& any)
{
    std::int64_t earliest = 0;
    auto see = [&](std::int64_t t) {
        earliest = any ? std::min(earliest, t + offset) : t + offset;
        any = true;
    };
    for (const Span& span : trace.spans)
        see(span.startNs);
    for (const CounterSample& sample : trace.counters)
        see(sample.timeNs);
    return earliest;
}

std::int64_t floorToSecond(std::int64_t ns)
{
    std::int64_t q = ns / kNsPerSecond;
    if (ns % kNsPerSecond < 0)
        --q;
    return q * kNsPerSecond;
}

void appendRank(json& events, const RankTrace& trace, std::int64_t offset, std::int64_t origin)
{
    const int pid = trace.rank;
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(trace.rank)}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", trace.rank}}}});
    events.push_back(
        {{"name", "process_labels"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"labels", "source: " + trace.source}}}});

    // Group spans by thread key, then split each group into sub-threads on which events nest or
    // are disjoint (Note [Trace file layout]): a greedy pass in start order, each sub-thread a
    // stack of the ends of the spans still open on it.
    std::map<std::string, std::vector<std::size_t>, bool (*)(const std::string&, const std::string&)> groups(&keyLess);
    for (std::size_t i = 0; i < trace.spans.size(); ++i)
        groups[threadKey(trace.spans[i])].push_back(i);

    int nextTid = 1;
    for (auto& [key, indices] : groups) {
        std::stable_sort(indices.begin(), indices.end(), [&](std::size_t a, std::size_t b) {
            const Span& x = trace.spans[a];
            const Span& y = trace.spans[b];
            return x.startNs != y.startNs ? x.startNs < y.startNs : x.endNs > y.endNs;
        });
        std::vector<std::vector<std::int64_t>> stacks;
        std::vector<std::size_t> subOf(indices.size());
        for (std::size_t n = 0; n < indices.size(); ++n) {
            const Span& span = trace.spans[indices[n]];
            const std::int64_t end = std::max(span.endNs, span.startNs);
            std::size_t chosen = stacks.size();
            for (std::size_t k = 0; k < stacks.size(); ++k) {
                auto& stack = stacks[k];
                while (!stack.empty() && stack.back() <= span.startNs)
                    stack.pop_back();
                if (stack.empty() || end <= stack.back()) {
                    chosen = k;
                    break;
                }
            }
            if (chosen == stacks.size())
                stacks.emplace_back();
            stacks[chosen].push_back(end);
            subOf[n] = chosen;
        }
        const int firstTid = nextTid;
        for (std::size_t k = 0; k < std::max<std::size_t>(stacks.size(), 1); ++k) {
            const int tid = nextTid++;
            const std::string name = k == 0 ? key : key + " #" + std::to_string(k + 1);
            events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
            events.push_back(
                {{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
        }
        for (std::size_t n = 0; n < indices.size(); ++n) {
            const Span& span = trace.spans[indices[n]];
            json args = {{"lane", std::string(laneName(span.lane))}};
            if (!span.track.empty())
                args["track"] = span.track;
            if (span.bytes != 0)
                args["bytes"] = span.bytes;
            if (span.step >= 0)
                args["step"] = span.step;
            if (span.device >= 0)
                args["device"] = span.device;
            if (span.correlationId != 0)
                args["correlation"] = span.correlationId;
            json event = {{"name", span.name},
                          {"ph", "X"},
                          {"ts", toMicros(span.startNs + offset - origin)},
                          {"dur", toMicros(std::max<std::int64_t>(0, span.endNs - span.startNs))},
                          {"pid", pid},
                          {"tid", firstTid + int(subOf[n])},
                          {"args", std::move(args)}};
            if (!span.category.empty())
                event["cat"] = span.category;
            events.push_back(std::move(event));
        }
    }
    for (const CounterSample& sample : trace.counters) {
        events.push_back({{"name", sample.name},
                          {"ph", "C"},
                          {"ts", toMicros(sample.timeNs + offset - origin)},
                          {"pid", pid},
                          {"tid", 0},
                          {"args", {{sample.series, sample.value}}}});
    }
}

json rankMeta(const RankTrace& trace, std::int64_t offset, bool aligned)
{
    return {{"rank", trace.rank},
            {"source", trace.source},
            {"clock_offset_ns", offset},
            {"aligned", aligned},
            {"notes", trace.notes}};
}

std::string dumpFile(json events, json ranks, std::int64_t origin, const RankTrace* single)
{
    json file = {{"traceEvents", std::move(events)},
                 {"displayTimeUnit", "ms"},
                 {"otherData",
                  {{"shardscope", {{"version", kTraceFormatVersion}, {"time_origin_ns", origin}, {"ranks", std::move(ranks)}}}}}};
    if (single != nullptr)
        file["distributedInfo"] = {{"rank", single->rank}};
    // Replace, don't throw, on a name that is not UTF-8 (a kernel name from a broken record).
    return file.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<void> writeText(const std::filesystem::path& path, const std::string& text)
{
    std::error_code ec;
    if (path.has_parent_path())
        std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        return makeError("cannot write trace file " + path.string() + ": " + std::strerror(errno)
                         + "; check that its folder exists and is writable");
    out << text;
    out.flush();
    if (!out)
        return makeError("writing trace file " + path.string() + " failed: " + std::strerror(errno)
                         + "; check the free disk space");
    return {};
}

// ---------------------------------------------------------------------------------------------
// Import

constexpr int kMaxDepth = 64;
// |ts| * 1000 must stay an exact integer number of ns in a double and fit int64.
constexpr double kMaxMicros = 4.0e12;

// Rejects documents nested deeper than any trace file is before handing them to the parser, so
// that hostile input cannot exhaust the stack in recursive code further down.
std::optional<std::size_t> tooDeepAt(std::string_view text)
{
    int depth = 0;
    bool inString = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"')
            inString = true;
        else if (c == '[' || c == '{') {
            if (++depth > kMaxDepth)
                return i;
        } else if (c == ']' || c == '}')
            --depth;
    }
    return std::nullopt;
}

class Importer {
public:
    explicit Importer(std::string_view origin) : m_origin(origin) { }

    Result<std::vector<RankTrace>> run(std::string_view text);

private:
    Error fail(std::size_t index, const json& event, const std::string& what) const
    {
        std::string phase = "?";
        if (event.is_object()) {
            auto ph = event.find("ph");
            if (ph != event.end() && ph->is_string())
                phase = ph->get<std::string>();
        }
        return makeError(std::string(m_origin) + ": traceEvents[" + std::to_string(index) + "] (ph '" + phase + "'): " + what
                         + "; fix or remove this event, or re-export the trace");
    }
    Error failFile(const std::string& what) const { return makeError(std::string(m_origin) + ": " + what); }
    bool failed(std::size_t index, const json& event, const std::string& what)
    {
        m_error = fail(index, event, what);
        return false;
    }

    // Field readers: an empty optional with m_error set on a wrong type.
    bool readTime(std::size_t index, const json& event, const char* field, bool nonNegative, std::int64_t& out);
    bool readInt(std::size_t index, const json& event, const json& object, const char* field, std::int64_t lo, std::int64_t hi,
                 std::int64_t& out, bool required);
    bool readString(std::size_t index, const json& event, const json& object, const char* field, std::string& out, bool required);
    bool readThreadId(std::size_t index, const json& event, std::string& out);
    bool readMeta(const json& root);
    // Thread names by (pid, tid), from the metadata events wherever they are in the file.
    using ThreadNames = std::map<std::pair<std::int64_t, std::string>, std::string>;
    bool readThreadNames(const json& events, ThreadNames& names);
    // One span or counter event into its rank's trace; other phases are counted in `skipped`.
    bool readEvent(std::size_t i, const json& event, const ThreadNames& threadNames, std::map<std::string, std::size_t>& skipped);
    bool readSpan(std::size_t i, const json& event, const json& args, const ThreadNames& threadNames, std::int64_t pid,
                  const std::string& tid, std::int64_t ts, Span& span);
    RankTrace& traceFor(int rank);

    std::string_view m_origin;
    std::optional<Error> m_error;
    std::int64_t m_timeOrigin = 0;
    std::optional<int> m_fixedRank; // a foreign per-rank file: distributedInfo.rank
    bool m_ours = false;
    std::map<int, RankTrace> m_traces;
    std::map<int, bool> m_aligned;
};

bool Importer::readTime(std::size_t index, const json& event, const char* field, bool nonNegative, std::int64_t& out)
{
    auto it = event.find(field);
    if (it == event.end() || !it->is_number()) {
        m_error = fail(index, event,
                       std::string("'") + field + "' must be a number of µs"
                           + (it == event.end() ? ", but it is missing" : ", got " + std::string(it->type_name())));
        return false;
    }
    const double micros = it->get<double>();
    if (!std::isfinite(micros) || std::fabs(micros) > kMaxMicros || (nonNegative && micros < 0)) {
        m_error = fail(index, event,
                       std::string("'") + field + "' is out of range (" + it->dump() + " µs)"
                           + (nonNegative ? ", it must be >= 0" : ""));
        return false;
    }
    out = std::llround(micros * 1000.0);
    return true;
}

bool Importer::readInt(std::size_t index, const json& event, const json& object, const char* field, std::int64_t lo,
                       std::int64_t hi, std::int64_t& out, bool required)
{
    auto it = object.find(field);
    if (it == object.end()) {
        if (required)
            m_error = fail(index, event, std::string("'") + field + "' is missing; it must be an integer");
        return !required;
    }
    bool fits = false;
    if (it->is_number_unsigned()) {
        const auto v = it->get<std::uint64_t>();
        fits = v <= std::uint64_t(std::numeric_limits<std::int64_t>::max()) && std::int64_t(v) <= hi;
        if (fits)
            out = std::int64_t(v);
    } else if (it->is_number_integer()) {
        const auto v = it->get<std::int64_t>();
        fits = v >= lo && v <= hi;
        if (fits)
            out = v;
    } else {
        m_error = fail(index, event, std::string("'") + field + "' must be an integer, got " + it->type_name());
        return false;
    }
    if (!fits) {
        m_error = fail(index, event, std::string("'") + field + "' is out of range (" + it->dump() + ")");
        return false;
    }
    return true;
}

bool Importer::readString(std::size_t index, const json& event, const json& object, const char* field, std::string& out,
                          bool required)
{
    auto it = object.find(field);
    if (it == object.end()) {
        if (required)
            m_error = fail(index, event, std::string("'") + field + "' is missing; it must be a string");
        return !required;
    }
    if (!it->is_string()) {
        m_error = fail(index, event, std::string("'") + field + "' must be a string, got " + it->type_name());
        return false;
    }
    out = it->get<std::string>();
    return true;
}

bool Importer::readThreadId(std::size_t index, const json& event, std::string& out)
{
    auto it = event.find("tid");
    if (it == event.end()) {
        out = "0";
        return true;
    }
    if (it->is_number_integer() || it->is_string()) {
        out = it->is_string() ? "s:" + it->get<std::string>() : it->dump();
        return true;
    }
    m_error = fail(index, event, std::string("'tid' must be an integer or a string, got ") + it->type_name());
    return false;
}

RankTrace& Importer::traceFor(int rank)
{
    auto [it, inserted] = m_traces.try_emplace(rank);
    if (inserted)
        it->second.rank = rank;
    return it->second;
}

bool Importer::readMeta(const json& root)
{
    if (!root.is_object())
        return true;
    if (auto info = root.find("distributedInfo"); info != root.end() && info->is_object()) {
        if (auto rank = info->find("rank"); rank != info->end() && rank->is_number_integer()) {
            const auto r = rank->get<std::int64_t>();
            if (r >= 0 && r <= std::numeric_limits<int>::max())
                m_fixedRank = int(r);
        }
    }
    auto other = root.find("otherData");
    if (other == root.end() || !other->is_object())
        return true;
    auto ours = other->find("shardscope");
    if (ours == other->end())
        return true;
    auto bad = [this](const std::string& what) {
        m_error = failFile("otherData.shardscope: " + what + "; re-export the trace");
        return false;
    };
    if (!ours->is_object())
        return bad("must be an object");
    m_ours = true;
    m_fixedRank.reset(); // our files say pid = rank
    auto version = ours->find("version");
    if (version == ours->end() || !version->is_number_integer())
        return bad("'version' must be an integer");
    if (version->get<std::int64_t>() > kTraceFormatVersion)
        return bad("version " + version->dump() + " is newer than this Shardscope reads (" + std::to_string(kTraceFormatVersion)
                   + "); update Shardscope");
    auto origin = ours->find("time_origin_ns");
    if (origin != ours->end()) {
        if (!origin->is_number_integer())
            return bad("'time_origin_ns' must be an integer");
        m_timeOrigin = origin->get<std::int64_t>();
        if (m_timeOrigin < -(std::int64_t(1) << 62) || m_timeOrigin > (std::int64_t(1) << 62))
            return bad("'time_origin_ns' is out of range");
    }
    auto ranks = ours->find("ranks");
    if (ranks == ours->end())
        return true;
    if (!ranks->is_array())
        return bad("'ranks' must be an array");
    for (const json& entry : *ranks) {
        if (!entry.is_object())
            return bad("each entry of 'ranks' must be an object");
        auto rank = entry.find("rank");
        if (rank == entry.end() || !rank->is_number_integer() || rank->get<std::int64_t>() < 0
            || rank->get<std::int64_t>() > std::numeric_limits<int>::max())
            return bad("each entry of 'ranks' needs a 'rank' >= 0");
        RankTrace& trace = traceFor(int(rank->get<std::int64_t>()));
        auto source = entry.find("source");
        if (source != entry.end()) {
            if (!source->is_string())
                return bad("'source' must be a string");
            trace.source = source->get<std::string>();
        }
        bool aligned = false;
        if (auto a = entry.find("aligned"); a != entry.end()) {
            if (!a->is_boolean())
                return bad("'aligned' must be true or false");
            aligned = a->get<bool>();
        }
        m_aligned[trace.rank] = aligned;
        if (auto offset = entry.find("clock_offset_ns"); offset != entry.end()) {
            if (!offset->is_number_integer())
                return bad("'clock_offset_ns' must be an integer");
            // An aligned (merged) file already has the offset applied.
            trace.clockOffsetNs = aligned ? 0 : offset->get<std::int64_t>();
        }
        if (auto notes = entry.find("notes"); notes != entry.end()) {
            if (!notes->is_array())
                return bad("'notes' must be an array of strings");
            for (const json& note : *notes) {
                if (!note.is_string())
                    return bad("'notes' must be an array of strings");
                trace.notes.push_back(note.get<std::string>());
            }
        }
    }
    return true;
}

Lane laneFromHints(const std::string& threadName, const std::string& cat, const std::string& name)
{
    std::string base = threadName;
    if (auto hash = base.rfind(" #"); hash != std::string::npos)
        base.resize(hash);
    if (auto lane = parseLane(base))
        return *lane;
    // Kineto's categories.
    if (cat == "kernel")
        return name.rfind("nccl", 0) == 0 ? Lane::Communication : Lane::Compute;
    if (cat == "gpu_memcpy" || cat == "gpu_memset")
        return Lane::Memory;
    return Lane::Host;
}

bool Importer::readThreadNames(const json& events, ThreadNames& threadNames)
{
    for (std::size_t i = 0; i < events.size(); ++i) {
        const json& event = events[i];
        if (!event.is_object())
            return failed(i, event, std::string("an event must be an object, got ") + event.type_name());
        std::string ph;
        if (!readString(i, event, event, "ph", ph, true))
            return false;
        if (ph != "M")
            continue;
        std::string name;
        std::int64_t pid = 0;
        std::string tid;
        if (!readString(i, event, event, "name", name, true)
            || !readInt(i, event, event, "pid", std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), pid, true)
            || !readThreadId(i, event, tid))
            return false;
        if (name == "thread_name" || name == "process_name") {
            auto args = event.find("args");
            if (args == event.end() || !args->is_object())
                return failed(i, event, "'" + name + "' metadata needs an 'args' object with a 'name' string");
            std::string value;
            if (!readString(i, event, *args, "name", value, true))
                return false;
            if (name == "thread_name")
                threadNames[{pid, tid}] = value;
        }
    }
    return true;
}

bool Importer::readEvent(std::size_t i, const json& event, const ThreadNames& threadNames,
                         std::map<std::string, std::size_t>& skipped)
{
    const std::string ph = event.at("ph").get<std::string>();
    if (ph == "M")
        return true;
    if (ph != "X" && ph != "C") {
        ++skipped[ph];
        return true;
    }
    std::int64_t pid = 0;
    std::string name;
    std::string tid;
    std::int64_t ts = 0;
    if (!readString(i, event, event, "name", name, true)
        || !readInt(i, event, event, "pid", m_ours ? 0 : std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), pid,
                    true)
        || !readThreadId(i, event, tid) || !readTime(i, event, "ts", false, ts))
        return false;
    ts += m_timeOrigin;
    const int rank = m_fixedRank ? *m_fixedRank : int(pid);
    auto argsIt = event.find("args");
    if (argsIt != event.end() && !argsIt->is_object())
        return failed(i, event, std::string("'args' must be an object, got ") + argsIt->type_name());
    const json emptyArgs = json::object();
    const json& args = argsIt == event.end() ? emptyArgs : *argsIt;

    if (ph == "C") {
        RankTrace& trace = traceFor(rank);
        for (auto it = args.begin(); it != args.end(); ++it) {
            if (!it.value().is_number())
                return failed(i, event, "counter series '" + it.key() + "' must be a number, got " + it.value().type_name());
            trace.counters.push_back(CounterSample{name, it.key(), ts, it.value().get<double>()});
        }
        return true;
    }
    Span span;
    span.name = std::move(name);
    if (!readSpan(i, event, args, threadNames, pid, tid, ts, span))
        return false;
    traceFor(rank).spans.push_back(std::move(span));
    return true;
}

bool Importer::readSpan(std::size_t i, const json& event, const json& args, const ThreadNames& threadNames, std::int64_t pid,
                        const std::string& tid, std::int64_t ts, Span& span)
{
    std::int64_t dur = 0;
    if (!readTime(i, event, "dur", true, dur) || !readString(i, event, event, "cat", span.category, false))
        return false;
    span.startNs = ts;
    span.endNs = ts + dur;
    std::string laneText;
    std::int64_t device = -1;
    std::int64_t correlation = 0;
    if (!readString(i, event, args, "lane", laneText, false) || !readString(i, event, args, "track", span.track, false)
        || !readInt(i, event, args, "bytes", 0, std::numeric_limits<std::int64_t>::max(), span.bytes, false)
        || !readInt(i, event, args, "step", -1, std::numeric_limits<std::int64_t>::max(), span.step, false)
        || !readInt(i, event, args, "device", -1, std::numeric_limits<int>::max(), device, false)
        || !readInt(i, event, args, "correlation", 0, std::numeric_limits<std::int64_t>::max(), correlation, false))
        return false;
    span.device = int(device);
    span.correlationId = std::uint64_t(correlation);
    if (!laneText.empty()) {
        auto lane = parseLane(laneText);
        if (!lane)
            return failed(i, event, "args.lane '" + laneText + "' is not one of compute, communication, memory, host");
        span.lane = *lane;
        return true;
    }
    auto named = threadNames.find({pid, tid});
    const std::string threadName = named == threadNames.end() ? std::string() : named->second;
    span.lane = laneFromHints(threadName, span.category, span.name);
    if (!threadName.empty() && !parseLane(threadName))
        span.track = threadName;
    return true;
}

Result<std::vector<RankTrace>> Importer::run(std::string_view text)
{
    if (auto at = tooDeepAt(text))
        return failFile("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels at byte " + std::to_string(*at)
                        + "; this is not a trace file");
    json root;
    try {
        root = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return failFile("not valid JSON (at byte " + std::to_string(e.byte) + "): " + e.what()
                        + "; the file is truncated or not a trace");
    } catch (const json::exception& e) {
        // E.g. a number too large for a double (1e400): valid JSON, unreadable as a trace.
        return failFile(std::string("not readable as JSON: ") + e.what() + "; the file is damaged or not a trace");
    }
    const json* events = nullptr;
    if (root.is_array()) {
        events = &root;
    } else if (root.is_object()) {
        auto it = root.find("traceEvents");
        if (it == root.end() || !it->is_array())
            return failFile("expected a 'traceEvents' array in the top-level object; is this a Chrome trace?");
        events = &*it;
    } else {
        return failFile(std::string("expected a JSON object with 'traceEvents' or an array of events, got ") + root.type_name());
    }
    if (!readMeta(root))
        return *m_error;

    ThreadNames threadNames;
    if (!readThreadNames(*events, threadNames))
        return *m_error;
    std::map<std::string, std::size_t> skipped;
    for (std::size_t i = 0; i < events->size(); ++i)
        if (!readEvent(i, (*events)[i], threadNames, skipped))
            return *m_error;

    std::vector<RankTrace> out;
    for (auto& [rank, trace] : m_traces) {
        canonicalise(trace);
        out.push_back(std::move(trace));
    }
    if (!skipped.empty() && !out.empty()) {
        std::string note = "skipped events of phases not imported:";
        for (const auto& [ph, count] : skipped)
            note += " " + ph + " x" + std::to_string(count);
        out.front().notes.push_back(note);
    }
    return out;
}

} // namespace

Result<std::vector<std::int64_t>> clockOffsets(const std::vector<RankTrace>& traces, const ClockAlignment& alignment)
{
    std::vector<std::int64_t> offsets;
    if (alignment.mode == ClockAlignment::Mode::Offsets) {
        for (const RankTrace& trace : traces)
            offsets.push_back(trace.clockOffsetNs);
        return offsets;
    }
    std::vector<std::int64_t> reference;
    for (const RankTrace& trace : traces) {
        const Span* first = nullptr;
        for (const Span& span : trace.spans) {
            if (span.name == alignment.referenceName && (first == nullptr || span.startNs < first->startNs))
                first = &span;
        }
        if (first == nullptr)
            return makeError("cannot align rank " + std::to_string(trace.rank) + ": it has no span named '"
                             + alignment.referenceName
                             + "'; record the reference event on every rank or align by measured clock offsets");
        reference.push_back(alignment.alignOnEnd ? first->endNs : first->startNs);
    }
    for (std::size_t i = 0; i < traces.size(); ++i)
        offsets.push_back(traces.front().clockOffsetNs + reference.front() - reference[i]);
    return offsets;
}

std::string toChromeTraceJson(const RankTrace& trace)
{
    bool any = false;
    const std::int64_t origin = floorToSecond(earliestTime(trace, 0, any));
    json events = json::array();
    appendRank(events, trace, 0, any ? origin : 0);
    return dumpFile(std::move(events), json::array({rankMeta(trace, trace.clockOffsetNs, false)}), any ? origin : 0, &trace);
}

Result<std::string> toMergedChromeTraceJson(const std::vector<RankTrace>& traces, const ClockAlignment& alignment)
{
    std::set<int> seen;
    for (const RankTrace& trace : traces) {
        if (!seen.insert(trace.rank).second)
            return makeError("cannot merge traces: rank " + std::to_string(trace.rank)
                             + " appears twice; pass one trace per rank");
    }
    auto offsets = clockOffsets(traces, alignment);
    if (!offsets)
        return offsets.error();
    bool any = false;
    std::int64_t earliest = 0;
    for (std::size_t i = 0; i < traces.size(); ++i) {
        bool rankAny = false;
        const std::int64_t t = earliestTime(traces[i], (*offsets)[i], rankAny);
        if (rankAny) {
            earliest = any ? std::min(earliest, t) : t;
            any = true;
        }
    }
    const std::int64_t origin = any ? floorToSecond(earliest) : 0;
    json events = json::array();
    json ranks = json::array();
    for (std::size_t i = 0; i < traces.size(); ++i) {
        appendRank(events, traces[i], (*offsets)[i], origin);
        ranks.push_back(rankMeta(traces[i], (*offsets)[i], true));
    }
    return dumpFile(std::move(events), std::move(ranks), origin, nullptr);
}

Result<void> writeRankTrace(const std::filesystem::path& path, const RankTrace& trace)
{
    return writeText(path, toChromeTraceJson(trace));
}

Result<void> writeMergedTrace(const std::filesystem::path& path, const std::vector<RankTrace>& traces,
                              const ClockAlignment& alignment)
{
    auto text = toMergedChromeTraceJson(traces, alignment);
    if (!text)
        return text.error();
    return writeText(path, *text);
}

Result<std::vector<RankTrace>> parseChromeTrace(std::string_view json, std::string_view origin)
{
    Importer importer(origin);
    try {
        return importer.run(json);
    } catch (const nlohmann::json::exception& e) {
        // Every field is type-checked before it is read, so this is a bug; still, bad input must
        // come back as a value, never as an exception through the GUI's trace page.
        return makeError(std::string(origin) + ": unexpected JSON error while importing: " + e.what()
                         + "; please report this file");
    }
}

Result<std::vector<RankTrace>> readChromeTrace(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return makeError("cannot open trace file " + path.string() + ": " + std::strerror(errno)
                         + "; check the path (traces live in runs/<id>/traces/)");
    std::ostringstream text;
    text << in.rdbuf();
    return parseChromeTrace(text.str(), path.string());
}

} // namespace shardscope::profiler
