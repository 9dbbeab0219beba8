#include "profiler/kineto_trace.h"

#include "profiler/chrome_trace.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <iterator>
#include <map>
#include <set>
#include <streambuf>

namespace shardscope::profiler {

using nlohmann::json;

namespace {

std::string lowered(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool startsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// Kineto's microseconds (a double that may carry a fraction) to nanoseconds without losing the
// fraction to the double's precision: ts of 1.7e15 µs times 1000 would round to 256 ns.
std::int64_t microsToNanos(double micros)
{
    const double whole = std::floor(micros);
    return static_cast<std::int64_t>(whole) * 1000 + std::llround((micros - whole) * 1000.0);
}

std::optional<std::int64_t> intOf(const json& object, const char* key)
{
    auto it = object.find(key);
    if (it == object.end())
        return std::nullopt;
    if (it->is_number_integer())
        return it->get<std::int64_t>();
    if (it->is_number_float())
        return static_cast<std::int64_t>(it->get<double>());
    return std::nullopt;
}

// HTA's kernel types (hta/utils/utils.py get_kernel_type), on the kernel's own name:
// communication `^nccl.*Kernel`; memory `^(Memcpy|Memset|dma)`; computation whatever matches none
// of `^nccl.*Kernel`, `.*Memcpy`, `^Memset`, `.*Sync`; the rest (synchronisations, copy kernels)
// "other", which HTA counts as non-compute time: here the memory lane, category "other".
void classifyDeviceSpan(Span& span)
{
    const std::string& name = span.name;
    const bool nccl = startsWith(name, "nccl") && name.find("Kernel", 4) != std::string::npos;
    if (nccl) {
        span.lane = Lane::Communication;
        span.category = collectiveKindOf(name);
    } else if (startsWith(name, "Memcpy") || startsWith(name, "Memset") || startsWith(name, "dma")) {
        span.lane = Lane::Memory;
        span.category = std::string(startsWith(name, "Memset") ? category::kMemset : category::kMemcpy);
    } else if (name.find("Memcpy") == std::string::npos && name.find("Sync") == std::string::npos) {
        span.lane = Lane::Compute;
        span.category = std::string(category::kKernel);
    } else {
        span.lane = Lane::Memory;
        span.category = "other";
    }
}

// The state of one file's import: spans as they come, and what is decided once all are in.
class KinetoImporter {
public:
    explicit KinetoImporter(std::string origin) : m_origin(std::move(origin)) { }

    // One element of traceEvents; an error names the event.
    Result<void> addEvent(const json& e);
    void setTopLevel(const std::string& key, const json& value) { m_top[key] = value; }
    Result<RankTrace> finish();
    std::int64_t eventCount() const { return m_index; }

private:
    Result<void> addComplete(const json& e, const std::string& name, const std::string& cat);
    void leaveOutLastProfilerStep();

    std::string m_origin;
    RankTrace m_trace;
    std::map<std::string, json> m_top;
    std::int64_t m_index = 0;
    std::int64_t m_skipped = 0; // events of phases that carry no span (flows, instants, metadata)
    std::set<std::pair<std::int64_t, std::int64_t>> m_threadsWithOps; // (pid, tid) running compute ops
    struct HostCollective {
        std::pair<std::int64_t, std::int64_t> thread;
        std::size_t span; // index in m_trace.spans
    };
    std::vector<HostCollective> m_hostCollectives;
    std::map<std::uint64_t, std::int64_t> m_launchStartNs; // correlation id -> earliest host event
};

Result<void> KinetoImporter::addEvent(const json& e)
{
    const std::int64_t index = m_index++;
    if (!e.is_object())
        return makeError(m_origin + ": traceEvents[" + std::to_string(index) + "] is " + e.type_name() + ", not an event object");
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string())
        return makeError(m_origin + ": traceEvents[" + std::to_string(index) + "] has no phase (\"ph\")");
    if (*ph != "X") {
        ++m_skipped;
        return {};
    }
    auto name = e.find("name");
    auto cat = e.find("cat");
    const std::string nameText = name != e.end() && name->is_string() ? name->get<std::string>() : std::string();
    const std::string catText = cat != e.end() && cat->is_string() ? cat->get<std::string>() : std::string();
    if (auto added = addComplete(e, nameText, catText); !added)
        return makeError(m_origin + ": traceEvents[" + std::to_string(index) + "] (" + nameText + "): " + added.error().message);
    return {};
}

Result<void> KinetoImporter::addComplete(const json& e, const std::string& name, const std::string& cat)
{
    auto ts = e.find("ts");
    if (ts == e.end() || !ts->is_number())
        return makeError("no numeric \"ts\"");
    auto dur = e.find("dur");
    if (dur != e.end() && !dur->is_number() && !dur->is_null())
        return makeError("\"dur\" is not a number");
    static const json kNoArgs = json::object();
    auto argsIt = e.find("args");
    const json& args = argsIt != e.end() && argsIt->is_object() ? *argsIt : kNoArgs;
    Span span;
    span.name = name;
    span.category = cat;
    span.startNs = microsToNanos(ts->get<double>());
    const double durMicros = dur != e.end() && dur->is_number() ? dur->get<double>() : 0.0;
    span.endNs = span.startNs + std::max<std::int64_t>(0, std::llround(durMicros * 1000.0));
    const auto stream = intOf(args, "stream");
    const auto correlation = intOf(args, "correlation");
    // Device activity as HTA takes it: any complete event on a CUDA stream except GPU-side copies of
    // user annotations (HTA drops those by default).
    if (cat == "gpu_user_annotation") { // the GPU's copy of a host annotation: HTA drops them, as here
        ++m_skipped;
        return {};
    }
    if (stream && *stream != -1) {
        // Note [Whole microseconds on the device]: HTA rounds device activity to whole µs, the
        // start up and the end down (hta/common/trace_parser.py round_down_time_stamps: Kineto's
        // ns-resolution kernels on one stream can overlap by a fraction of a µs, pytorch#122425).
        // Kernels a few µs long run back to back, so this moves the merged compute time of the
        // NCCL corpus trace by 2 %: done the same here, so that breakdown and overlap are HTA's.
        const double startMicros = ts->get<double>();
        span.startNs = static_cast<std::int64_t>(std::ceil(startMicros)) * 1000;
        span.endNs = std::max(span.startNs, static_cast<std::int64_t>(std::floor(startMicros + durMicros)) * 1000);
        span.track = "stream " + std::to_string(*stream);
        span.device = static_cast<int>(intOf(args, "device").value_or(intOf(e, "pid").value_or(0)));
        span.correlationId = static_cast<std::uint64_t>(std::max<std::int64_t>(0, correlation.value_or(0)));
        classifyDeviceSpan(span);
        m_trace.spans.push_back(std::move(span));
        return {};
    }
    if (correlation && *correlation > 0) { // a launch (CUDA runtime call): when its kernel was issued
        auto [it, inserted] = m_launchStartNs.try_emplace(static_cast<std::uint64_t>(*correlation), span.startNs);
        if (!inserted)
            it->second = std::min(it->second, span.startNs);
    }
    const std::pair<std::int64_t, std::int64_t> thread{intOf(e, "pid").value_or(0), intOf(e, "tid").value_or(0)};
    // gloo:* / nccl:* annotations, in any case; only an annotation's first five letters are lowered.
    const auto backendAnnotation = [&name] {
        const std::string head = lowered(std::string_view(name).substr(0, 5));
        return head == "gloo:" || head == "nccl:";
    };
    const bool hostCollective = (cat == "cpu_op" && (startsWith(name, "record_param_comms") || startsWith(name, "c10d::")))
                                || ((cat == "user_annotation" || cat == "cpu_op") && backendAnnotation());
    if (hostCollective) {
        span.lane = Lane::Communication;
        auto collective = args.find("Collective name");
        span.category = collectiveKindOf(collective != args.end() && collective->is_string() ? collective->get<std::string>()
                                                                                             : name);
        m_hostCollectives.push_back({thread, m_trace.spans.size()});
    } else if (cat == "cpu_op") {
        span.lane = Lane::Compute;
        m_threadsWithOps.insert(thread);
    } else if (startsWith(name, "ProfilerStep#")) {
        span.category = std::string(category::kStep);
        try {
            span.step = std::stoll(name.substr(13));
        } catch (const std::exception&) {
            span.step = -1;
        }
    }
    // Everything else (annotations, CUDA runtime calls, Python frames) stays on the host lane.
    m_trace.spans.push_back(std::move(span));
    return {};
}

// Note [The last profiler step]: HTA leaves out the device activity launched in the last
// ProfilerStep (the profiler stops inside it, so it is usually incomplete) when a trace has two
// steps or more: a kernel stays when the host event that launched it (same correlation id), or the
// kernel itself when nothing launched it, starts before the last step does. Done here the same
// way, so that breakdown and overlap are HTA's; the host events of that step stay.
void KinetoImporter::leaveOutLastProfilerStep()
{
    std::int64_t steps = 0;
    std::int64_t lastStartNs = std::numeric_limits<std::int64_t>::min();
    for (const Span& span : m_trace.spans)
        if (span.category == category::kStep && span.device < 0) {
            ++steps;
            lastStartNs = std::max(lastStartNs, span.startNs);
        }
    if (steps < 2)
        return;
    const auto before = m_trace.spans.size();
    std::erase_if(m_trace.spans, [&](const Span& span) {
        if (span.device < 0)
            return false;
        if (span.correlationId == 0)
            return span.startNs >= lastStartNs;
        auto launch = m_launchStartNs.find(span.correlationId);
        return launch == m_launchStartNs.end() || launch->second >= lastStartNs;
    });
    if (const auto dropped = before - m_trace.spans.size(); dropped > 0)
        m_trace.notes.push_back(std::to_string(dropped)
                                + " device events launched in the last profiler step (or by no host event) left out, as "
                                  "Holistic Trace Analysis leaves them out: the profiler stops inside that step");
}

Result<RankTrace> KinetoImporter::finish()
{
    if (auto info = m_top.find("distributedInfo"); info != m_top.end() && info->second.is_object()) {
        m_trace.rank = static_cast<int>(intOf(info->second, "rank").value_or(0));
        m_trace.worldSize = static_cast<int>(intOf(info->second, "world_size").value_or(0));
    }
    if (auto base = m_top.find("baseTimeNanoseconds"); base != m_top.end() && base->second.is_number())
        m_trace.clockOffsetNs = base->second.get<std::int64_t>();
    const bool device = std::any_of(m_trace.spans.begin(), m_trace.spans.end(), [](const Span& s) { return s.device >= 0; });
    m_trace.source = std::string(device ? kSourceCupti : kSourceHost);
    leaveOutLastProfilerStep();
    // A collective on a thread that also runs ops occupies it: that thread does not compute then.
    for (const auto& collective : m_hostCollectives) {
        if (!m_threadsWithOps.count(collective.thread))
            continue;
        Span wait = m_trace.spans[collective.span];
        wait.lane = Lane::Host;
        wait.category = std::string(category::kWait);
        wait.name = "wait: " + wait.name;
        m_trace.spans.push_back(std::move(wait));
    }
    m_trace.notes.push_back("imported from torch.profiler (Kineto) trace " + m_origin);
    if (m_skipped > 0)
        m_trace.notes.push_back(
            std::to_string(m_skipped)
            + " events without a span of their own (flows, instants, metadata, GPU copies of annotations) skipped");
    canonicalise(m_trace);
    return std::move(m_trace);
}

// SAX handler: builds one small JSON value per trace event (and per top-level key) and hands it
// on, so a large file never exists as one document.
class TraceSax : public nlohmann::json_sax<json> {
public:
    TraceSax(KinetoImporter& importer, std::function<bool()> keepGoing) : m_importer(importer), m_keepGoing(std::move(keepGoing))
    {
    }

    std::string error;

    bool null() override { return scalar(json()); }
    bool boolean(bool v) override { return scalar(json(v)); }
    bool number_integer(number_integer_t v) override { return scalar(json(v)); }
    bool number_unsigned(number_unsigned_t v) override { return scalar(json(v)); }
    bool number_float(number_float_t v, const string_t&) override { return scalar(json(v)); }
    bool string(string_t& v) override { return scalar(json(std::move(v))); }
    bool binary(binary_t&) override { return scalar(json()); }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& k) override
    {
        if (m_stack.empty() && m_depth == 1)
            m_topKey = k;
        else
            m_key = k;
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override
    {
        error = "not valid JSON at byte " + std::to_string(position) + " (" + ex.what() + ")";
        return false;
    }

private:
    // Structural levels: depth 1 is the top-level object (or a bare array of events), depth 2
    // traceEvents' array. Below them, values are built.
    bool building() const { return !m_stack.empty(); }
    bool atEventLevel() const { return m_depth == 2 || (m_depth == 1 && m_bareArray); }

    bool open(json value)
    {
        if (building()) {
            m_stack.push_back(&attach(std::move(value)));
            return true;
        }
        if (m_depth == 0) {
            m_bareArray = value.is_array();
            m_depth = 1;
            return true;
        }
        if (m_depth == 1 && !m_bareArray && m_topKey == "traceEvents" && value.is_array()) {
            m_depth = 2;
            return true;
        }
        m_current = std::move(value);
        m_stack.push_back(&m_current);
        return true;
    }

    bool close()
    {
        if (building()) {
            m_stack.pop_back();
            return building() || deliver();
        }
        --m_depth;
        return true;
    }

    bool scalar(json value)
    {
        if (building()) {
            attach(std::move(value));
            return true;
        }
        if (m_depth == 0) {
            error = "a trace must be a JSON object (or an array of events), not a bare value";
            return false;
        }
        m_current = std::move(value);
        return deliver();
    }

    json& attach(json value)
    {
        json& parent = *m_stack.back();
        if (parent.is_object())
            return parent[m_key] = std::move(value);
        parent.push_back(std::move(value));
        return parent.back();
    }

    bool deliver()
    {
        if (atEventLevel()) {
            if (auto added = m_importer.addEvent(m_current); !added) {
                error = added.error().message;
                return false;
            }
            if ((m_importer.eventCount() & 0xfff) == 0 && !m_keepGoing()) {
                error = "cancelled";
                return false;
            }
        } else if (m_depth == 1) {
            m_importer.setTopLevel(m_topKey, m_current);
        }
        m_current = json();
        return true;
    }

    KinetoImporter& m_importer;
    std::function<bool()> m_keepGoing;
    std::vector<json*> m_stack;
    json m_current;
    std::string m_key, m_topKey;
    int m_depth = 0;
    bool m_bareArray = false;
};

// A std::streambuf over zlib's gzFile, which reads gzip and plain files alike.
class GzStreamBuf : public std::streambuf {
public:
    explicit GzStreamBuf(gzFile file) : m_file(file) { }
    std::string error;
    bool reachedEnd = false;

protected:
    int_type underflow() override
    {
        const int n = gzread(m_file, m_buffer, sizeof m_buffer);
        if (n < 0) {
            int code = 0;
            error = gzerror(m_file, &code);
            return traits_type::eof();
        }
        if (n == 0) {
            int code = 0;
            const char* message = gzerror(m_file, &code);
            if (code != Z_OK && code != Z_STREAM_END)
                error = message;
            reachedEnd = true;
            return traits_type::eof();
        }
        setg(m_buffer, m_buffer, m_buffer + n);
        return traits_type::to_int_type(m_buffer[0]);
    }

private:
    gzFile m_file;
    char m_buffer[1 << 16];
};

} // namespace

std::string collectiveKindOf(std::string_view name)
{
    std::string key;
    for (char c : name)
        if (std::isalnum(static_cast<unsigned char>(c)))
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::pair<const char*, const char*> kKinds[] = {
        {"allreduce", "all_reduce"}, {"reducescatter", "reduce_scatter"},
        {"allgather", "all_gather"}, {"alltoall", "all_to_all"},
        {"all2all", "all_to_all"},   {"broadcast", "broadcast"},
        {"sendrecv", "send_recv"},   {"barrier", "barrier"},
        {"send", "send_recv"},       {"recv", "send_recv"},
        {"reduce", "reduce"},        {"gather", "gather"},
        {"scatter", "scatter"},
    };
    for (const auto& [spelling, kind] : kKinds)
        if (key.find(spelling) != std::string::npos)
            return kind;
    return "collective";
}

bool looksLikeKineto(std::string_view head)
{
    // Shardscope's own files start with their otherData (keys sorted: displayTimeUnit,
    // distributedInfo, otherData, traceEvents). Kineto writes schemaVersion / deviceProperties /
    // distributedInfo first and its events carry `cpu_op`, `kernel` or `user_annotation` categories.
    if (head.find("\"otherData\":{\"shardscope\"") != std::string_view::npos)
        return false;
    for (std::string_view marker : {"\"schemaVersion\"", "\"distributedInfo\"", "\"deviceProperties\"", "\"cat\": \"cpu_op\"",
                                    "\"cat\":\"cpu_op\"", "\"cat\": \"kernel\"", "\"cat\": \"user_annotation\""})
        if (head.find(marker) != std::string_view::npos)
            return true;
    return false;
}

Result<RankTrace> parseKinetoTrace(std::string_view text, std::string_view origin)
{
    KinetoImporter importer{std::string(origin)};
    TraceSax sax(importer, [] { return true; });
    json::sax_parse(text.begin(), text.end(), &sax);
    if (!sax.error.empty())
        return makeError(std::string(origin) + ": " + sax.error);
    return importer.finish();
}

Result<RankTrace> readKinetoTrace(const std::filesystem::path& path, const ReadProgress& progress)
{
    std::error_code ec;
    const std::uint64_t total = std::filesystem::file_size(path, ec);
    if (ec)
        return makeError("cannot read " + path.string() + ": " + ec.message());
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file)
        return makeError("cannot open " + path.string());
    gzbuffer(file, 1 << 17);
    GzStreamBuf buffer(file);
    std::istream in(&buffer);
    KinetoImporter importer{path.string()};
    TraceSax sax(importer,
                 [&] { return !progress || progress(static_cast<std::uint64_t>(std::max<long>(0, gzoffset(file))), total); });
    json::sax_parse(in, &sax);
    gzclose(file);
    if (!buffer.error.empty())
        return makeError(path.string() + ": the gzip data is truncated or corrupt (" + buffer.error + ")");
    if (sax.error == "cancelled")
        return makeError("reading " + path.string() + " was cancelled");
    if (!sax.error.empty())
        return makeError(path.string() + ": " + sax.error);
    if (progress)
        progress(total, total);
    return importer.finish();
}

Result<std::vector<RankTrace>> readTraceFile(const std::filesystem::path& path, const ReadProgress& progress)
{
    // The first bytes, decompressed, say whose trace it is.
    gzFile file = gzopen(path.c_str(), "rb");
    if (!file)
        return makeError("cannot open " + path.string());
    char head[4096];
    const int n = gzread(file, head, sizeof head);
    const bool gzip = gzdirect(file) == 0;
    gzclose(file);
    if (n < 0)
        return makeError(path.string() + ": the gzip data is truncated or corrupt");
    const bool kineto = looksLikeKineto(std::string_view(head, static_cast<std::size_t>(n)));
    if (gzip && !kineto) { // Shardscope's own file, compressed
        file = gzopen(path.c_str(), "rb");
        if (!file)
            return makeError("cannot open " + path.string());
        GzStreamBuf buffer(file);
        const std::string text{std::istreambuf_iterator<char>(&buffer), {}};
        gzclose(file);
        if (!buffer.error.empty())
            return makeError(path.string() + ": the gzip data is truncated or corrupt (" + buffer.error + ")");
        return parseChromeTrace(text, path.string());
    }
    if (kineto) {
        auto trace = readKinetoTrace(path, progress);
        if (!trace)
            return trace.error();
        return std::vector<RankTrace>{std::move(*trace)};
    }
    return readChromeTrace(path);
}

} // namespace shardscope::profiler

namespace shardscope::profiler {

bool isTraceFileName(std::string_view name) { return name.ends_with(".json") || name.ends_with(".json.gz"); }

Result<void> checkRankCount(const std::vector<RankTrace>& traces, int ranks, std::string_view what)
{
    int expected = ranks;
    std::string expectedFrom = std::string(what) + " has " + std::to_string(ranks) + " ranks";
    for (const RankTrace& trace : traces) {
        if (trace.worldSize <= 0)
            continue;
        if (expected <= 0) {
            expected = trace.worldSize;
            expectedFrom = "the first trace is of a " + std::to_string(expected) + "-rank job";
            continue;
        }
        if (trace.worldSize != expected)
            return makeError("the trace of rank " + std::to_string(trace.rank) + " is of a " + std::to_string(trace.worldSize)
                             + "-rank job, but " + expectedFrom
                             + " (distributedInfo.world_size); open the traces of one run together");
    }
    if (expected > 0)
        for (const RankTrace& trace : traces)
            if (trace.rank < 0 || trace.rank >= expected)
                return makeError("a trace is of rank " + std::to_string(trace.rank) + ", but " + expectedFrom + " (ranks 0.."
                                 + std::to_string(expected - 1) + "); it is not this run's");
    return {};
}

} // namespace shardscope::profiler
