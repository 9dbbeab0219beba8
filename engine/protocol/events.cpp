#include "engine/protocol/events.h"

#include "engine/common/json_string.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <algorithm>
#include <set>

namespace shardscope::protocol {

using nlohmann::json;

namespace {

const char* typeNameOf(const EventBody& body)
{
    static constexpr const char* kNames[] = {"hello", "step",  "eval", "memory",    "trace",     "checkpoint",
                                             "log",   "error", "done", "heartbeat", "straggler", "loss_spike"};
    static_assert(std::size(kNames) == std::variant_size_v<EventBody>);
    return kNames[body.index()];
}

json memoryJson(const MemoryStats& m)
{
    return {{"params", m.params},
            {"grads", m.grads},
            {"peak_params", m.peakParams},
            {"peak_grads", m.peakGrads},
            {"optimizer", m.optimizer},
            {"activations_peak", m.activationsPeak},
            {"allocated", m.allocated},
            {"reserved", m.reserved},
            {"peak_allocated", m.peakAllocated},
            {"rss", m.rss},
            {"fp8_scaling", m.fp8Scaling}};
}

json bodyJson(const EventBody& body)
{
    return std::visit(
        [](const auto& e) -> json {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, HelloEvent>) {
                return {{"pid", e.pid},
                        {"host", e.host},
                        {"device", e.device},
                        {"torch", e.torch},
                        {"world_size", e.worldSize},
                        {"local_rank", e.localRank},
                        {"machine_rank", e.machineRank},
                        {"peak_flops", e.peakFlops},
                        {"peak_dtype", e.peakDtype},
                        {"peak_source", e.peakSource},
                        {"precision_emulated", e.precisionEmulated},
                        {"threads", e.threads}};
            } else if constexpr (std::is_same_v<T, StepEvent>) {
                json j = {{"step", e.step},
                          {"epoch", e.epoch},
                          {"batch", e.batch},
                          {"loss", e.loss},
                          {"local_loss", e.localLoss},
                          {"skipped", e.skipped},
                          {"skipped_steps", e.skippedSteps},
                          {"step_time", e.stepTime},
                          {"data_time", e.dataTime},
                          {"wait_time", e.waitTime},
                          {"optimizer_time", e.optimizerTime},
                          {"compute_time", e.computeTime},
                          {"mem", memoryJson(e.mem)},
                          {"phase_memory",
                           {{"after_forward", e.phaseMemory.afterForward},
                            {"after_backward", e.phaseMemory.afterBackward},
                            {"after_optimizer", e.phaseMemory.afterOptimizer}}},
                          {"comm",
                           {{"all_reduce", e.comm.allReduce},
                            {"all_gather", e.comm.allGather},
                            {"reduce_scatter", e.comm.reduceScatter},
                            {"broadcast", e.comm.broadcast}}}};
                // Only under tensor parallelism: every other run's lines stay as they were.
                if (e.comm.tensorAllReduce > 0)
                    j["comm"]["tp_all_reduce"] = e.comm.tensorAllReduce;
                if (e.lossScale)
                    j["loss_scale"] = *e.lossScale;
                if (e.hasLr)
                    j["lr"] = e.lr;
                if (e.hasGradNorm)
                    j["grad_norm"] = e.gradNorm;
                if (e.hasTokens) {
                    j["tokens"] = e.tokens;
                    j["samples"] = e.samples;
                    j["tokens_per_s"] = e.tokensPerS;
                }
                if (e.flops > 0)
                    j["flops"] = e.flops;
                if (e.mfu)
                    j["mfu"] = *e.mfu;
                return j;
            } else if constexpr (std::is_same_v<T, EvalEvent>) {
                json j = {{"step", e.step}, {"loss", e.loss}};
                for (const auto& [name, value] : e.metrics)
                    j[name] = value;
                if (!e.samples.empty()) {
                    json samples = json::array();
                    for (const auto& sample : e.samples)
                        samples.push_back({{"prompt", sample.prompt}, {"text", sample.text}});
                    j["samples"] = std::move(samples);
                }
                return j;
            } else if constexpr (std::is_same_v<T, MemoryEvent>) {
                return memoryJson(e.mem);
            } else if constexpr (std::is_same_v<T, TraceEvent>) {
                return {{"path", e.path},
                        {"source", e.source},
                        {"summary",
                         {{"compute", e.summary.compute},
                          {"comm", e.summary.comm},
                          {"memory", e.summary.memory},
                          {"idle", e.summary.idle},
                          {"overlap", e.summary.overlap}}}};
            } else if constexpr (std::is_same_v<T, CheckpointEvent>) {
                return {{"step", e.step}, {"path", e.path}, {"kind", e.kind}, {"bytes", e.bytes}};
            } else if constexpr (std::is_same_v<T, LogEvent>) {
                return {{"level", e.level}, {"message", e.message}};
            } else if constexpr (std::is_same_v<T, ErrorEvent>) {
                return {{"kind", e.kind}, {"message", e.message}};
            } else if constexpr (std::is_same_v<T, DoneEvent>) {
                return {{"status", e.status}, {"steps", e.steps}, {"wall", e.wall}};
            } else if constexpr (std::is_same_v<T, HeartbeatEvent>) {
                json j = {{"step", e.step}, {"phase", e.phase}, {"cpu_seconds", e.cpuSeconds}};
                if (!e.waitingFor.empty())
                    j["waiting"] = {{"collective", e.waitingFor},
                                    {"group", e.waitingGroup},
                                    {"seq", e.waitingSeq},
                                    {"seconds", e.waitingSeconds}};
                return j;
            } else if constexpr (std::is_same_v<T, StragglerEvent>) {
                return {{"step", e.step},
                        {"compute_time", e.computeTime},
                        {"others_time", e.othersTime},
                        {"window", e.window},
                        {"threshold", e.threshold}};
            } else if constexpr (std::is_same_v<T, LossSpikeEvent>) {
                return {{"step", e.step},   {"loss", e.loss},     {"median", e.median}, {"epoch", e.epoch},
                        {"batch", e.batch}, {"window", e.window}, {"factor", e.factor}};
            } else {
                static_assert(sizeof(T) != sizeof(T), "every event type needs an encoder"); // false, but only when instantiated
            }
        },
        body);
}

// Reads fields of one JSON object, remembering the first problem (its key path and what was
// expected) instead of throwing, so a bad line becomes one clear message.
class FieldReader {
public:
    FieldReader(const json& object, std::string path, std::string* error)
        : m_object(object), m_path(std::move(path)), m_error(error)
    {
    }

    template <typename T>
    void read(const char* key, T& out, bool required = false)
    {
        if (!m_error->empty())
            return;
        auto it = m_object.find(key);
        if constexpr (std::is_floating_point_v<T>) {
            if (it != m_object.end() && (it->is_null() || it->is_string())) {
                // Non-finite numbers (Note [non-finite numbers]); any other string is an error.
                const auto value = it->is_null() ? std::optional<T>(std::numeric_limits<T>::quiet_NaN())
                                                 : nonFinite<T>(it->template get_ref<const std::string&>());
                if (!value)
                    *m_error = "field '" + m_path + key + "' should be a number, not the string '"
                               + it->template get_ref<const std::string&>().substr(0, 40) + "'";
                else
                    out = *value;
                return;
            }
        }
        if (it == m_object.end() || it->is_null()) {
            if (required)
                *m_error = "missing field '" + m_path + key + "'";
            return;
        }
        if (!matches<T>(*it)) {
            *m_error = "field '" + m_path + key + "' should be " + expected<T>() + ", not " + it->type_name();
            return;
        }
        out = it->template get<T>();
    }

    FieldReader child(const char* key)
    {
        static const json kEmpty = json::object();
        auto it = m_object.find(key);
        if (it != m_object.end() && !it->is_object() && m_error->empty())
            *m_error = "field '" + m_path + key + "' should be an object, not " + it->type_name();
        const json& sub = (it != m_object.end() && it->is_object()) ? *it : kEmpty;
        return FieldReader(sub, m_path + key + ".", m_error);
    }

    const json& object() const { return m_object; }

private:
    template <typename T>
    static std::optional<T> nonFinite(const std::string& text)
    {
        if (text == "NaN")
            return std::numeric_limits<T>::quiet_NaN();
        if (text == "Infinity")
            return std::numeric_limits<T>::infinity();
        if (text == "-Infinity")
            return -std::numeric_limits<T>::infinity();
        return std::nullopt;
    }

    template <typename T>
    static bool matches(const json& j)
    {
        if constexpr (std::is_same_v<T, bool>)
            return j.is_boolean();
        else if constexpr (std::is_integral_v<T>)
            return j.is_number_integer();
        else if constexpr (std::is_floating_point_v<T>)
            return j.is_number();
        else if constexpr (std::is_same_v<T, std::string>)
            return j.is_string();
        else
            return false;
    }
    template <typename T>
    static std::string expected()
    {
        if constexpr (std::is_same_v<T, bool>)
            return "a boolean";
        else if constexpr (std::is_integral_v<T>)
            return "an integer";
        else if constexpr (std::is_floating_point_v<T>)
            return "a number";
        else
            return "a string";
    }

    const json& m_object;
    std::string m_path;
    std::string* m_error;
};

void readMemory(FieldReader r, MemoryStats& m)
{
    r.read("params", m.params);
    r.read("grads", m.grads);
    r.read("peak_params", m.peakParams);
    r.read("peak_grads", m.peakGrads);
    r.read("optimizer", m.optimizer);
    r.read("activations_peak", m.activationsPeak);
    r.read("allocated", m.allocated);
    r.read("reserved", m.reserved);
    r.read("peak_allocated", m.peakAllocated);
    r.read("rss", m.rss);
    r.read("fp8_scaling", m.fp8Scaling);
}

// Note [non-finite numbers]: JSON has no NaN or infinity, and nlohmann writes them as null,
// which lost every non-finite loss (a required field read as missing: the step was dropped). They
// are written as the strings "NaN", "Infinity" and "-Infinity" (protobuf's JSON mapping), and read
// back from those, from null (what earlier writers made of NaN), and from Python's bare NaN /
// Infinity tokens (`json.dumps`'s default, which strict JSON parsers refuse).
void protectNonFinite(json& j)
{
    if (j.is_number_float()) {
        const double v = j.get<double>();
        if (!std::isfinite(v))
            j = std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
    } else if (j.is_structured()) {
        for (auto& item : j)
            protectNonFinite(item);
    }
}

} // namespace

std::string_view Event::typeName() const { return typeNameOf(body); }

std::string encodeEvent(const Event& event)
{
    json j = bodyJson(event.body);
    j["v"] = event.version;
    j["type"] = typeNameOf(event.body);
    j["rank"] = event.rank;
    j["time"] = event.time;
    protectNonFinite(j);
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Event> decodeEvent(std::string_view line)
{
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && (line.find("NaN") != std::string_view::npos || line.find("Infinity") != std::string_view::npos))
        j = json::parse(replaceBareNonFinite(line, [](std::string_view word) { return "\"" + std::string(word) + "\""; }),
                        nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
        return makeError("not valid JSON (a truncated or garbled event line)");
    if (!j.is_object())
        return makeError(std::string("an event must be a JSON object, not ") + j.type_name());

    std::string error;
    FieldReader r(j, "", &error);
    Event event;
    std::string type;
    r.read("v", event.version, true);
    r.read("type", type, true);
    r.read("rank", event.rank, true);
    r.read("time", event.time, true);
    if (!error.empty())
        return makeError(error);
    // Bounds a reader can trust: whoever reads a rank or world size builds per-rank tables from it
    // (an imported world_size of 2e9 was a hang), and events are ordered by time (NaN is no order).
    if (event.rank < 0 || event.rank >= kMaxRanks)
        return makeError("rank " + std::to_string(event.rank) + " is not a rank (0 to " + std::to_string(kMaxRanks - 1) + ")");
    if (!std::isfinite(event.time))
        return makeError("time is not a finite number of seconds");
    if (event.version > kProtocolVersion)
        return makeError("event schema version " + std::to_string(event.version) + " is newer than this build's "
                         + std::to_string(kProtocolVersion) + "; update shardscope");

    if (type == "hello") {
        HelloEvent e;
        r.read("pid", e.pid, true);
        r.read("host", e.host);
        r.read("device", e.device, true);
        r.read("torch", e.torch);
        r.read("world_size", e.worldSize, true);
        if (error.empty() && (e.worldSize < 1 || e.worldSize > kMaxRanks))
            error = "world_size " + std::to_string(e.worldSize) + " is not a number of ranks (1 to " + std::to_string(kMaxRanks)
                    + ")";
        r.read("local_rank", e.localRank);
        r.read("machine_rank", e.machineRank);
        r.read("peak_flops", e.peakFlops);
        r.read("peak_dtype", e.peakDtype);
        r.read("peak_source", e.peakSource);
        r.read("precision_emulated", e.precisionEmulated);
        r.read("threads", e.threads);
        event.body = e;
    } else if (type == "step") {
        StepEvent e;
        r.read("step", e.step, true);
        r.read("epoch", e.epoch);
        r.read("batch", e.batch);
        r.read("loss", e.loss, true);
        r.read("local_loss", e.localLoss);
        e.hasLr = j.contains("lr");
        e.hasGradNorm = j.contains("grad_norm");
        e.hasTokens = j.contains("tokens");
        r.read("lr", e.lr);
        r.read("grad_norm", e.gradNorm);
        double scale = 0;
        if (j.contains("loss_scale") && !j["loss_scale"].is_null()) {
            r.read("loss_scale", scale);
            e.lossScale = scale;
        }
        r.read("skipped", e.skipped);
        r.read("skipped_steps", e.skippedSteps);
        r.read("tokens", e.tokens);
        r.read("samples", e.samples);
        r.read("step_time", e.stepTime);
        r.read("data_time", e.dataTime);
        r.read("wait_time", e.waitTime);
        r.read("optimizer_time", e.optimizerTime);
        r.read("compute_time", e.computeTime);
        r.read("tokens_per_s", e.tokensPerS);
        r.read("flops", e.flops);
        if (j.contains("mfu") && !j["mfu"].is_null()) {
            double mfu = 0;
            r.read("mfu", mfu);
            e.mfu = mfu;
        }
        readMemory(r.child("mem"), e.mem);
        if (j.contains("phase_memory")) { // since #22
            auto phases = r.child("phase_memory");
            phases.read("after_forward", e.phaseMemory.afterForward);
            phases.read("after_backward", e.phaseMemory.afterBackward);
            phases.read("after_optimizer", e.phaseMemory.afterOptimizer);
        }
        auto comm = r.child("comm");
        comm.read("all_reduce", e.comm.allReduce);
        comm.read("all_gather", e.comm.allGather);
        comm.read("reduce_scatter", e.comm.reduceScatter);
        comm.read("broadcast", e.comm.broadcast);
        if (j.contains("comm") && j["comm"].contains("tp_all_reduce")) // since 2026-12-07
            comm.read("tp_all_reduce", e.comm.tensorAllReduce);
        event.body = e;
    } else if (type == "eval") {
        EvalEvent e;
        r.read("step", e.step, true);
        r.read("loss", e.loss, true);
        for (const auto& [key, value] : j.items()) {
            static const std::set<std::string> kReserved = {"v", "type", "rank", "time", "step", "loss"};
            if (kReserved.count(key) || (key == "samples" && value.is_array()))
                continue; // an array of samples is text (below); a number named samples is a metric
            if (value.is_number())
                e.metrics[key] = value.get<double>();
            else if (value.is_null()
                     || (value.is_string()
                         && std::set<std::string>{"NaN", "Infinity", "-Infinity"}.count(value.get<std::string>())))
                r.read(key.c_str(),
                       e.metrics[key]); // a non-finite metric (Note [non-finite numbers]); other text is not a metric
        }
        if (const auto samples = j.find("samples"); samples != j.end() && !samples->is_number()) {
            const auto isSample = [](const json& s) {
                return s.is_object() && s.contains("prompt") && s["prompt"].is_string() && s.contains("text")
                       && s["text"].is_string();
            };
            if (!samples->is_array() || !std::all_of(samples->begin(), samples->end(), isSample))
                return makeError("field 'samples' should be a list of {\"prompt\": text, \"text\": text}");
            for (const auto& sample : *samples)
                e.samples.push_back({sample["prompt"].get<std::string>(), sample["text"].get<std::string>()});
        }
        event.body = e;
    } else if (type == "memory") {
        MemoryEvent e;
        readMemory(r, e.mem);
        event.body = e;
    } else if (type == "trace") {
        TraceEvent e;
        r.read("path", e.path, true);
        r.read("source", e.source, true);
        auto s = r.child("summary");
        s.read("compute", e.summary.compute);
        s.read("comm", e.summary.comm);
        s.read("memory", e.summary.memory);
        s.read("idle", e.summary.idle);
        s.read("overlap", e.summary.overlap);
        event.body = e;
    } else if (type == "checkpoint") {
        CheckpointEvent e;
        r.read("step", e.step, true);
        r.read("path", e.path, true);
        r.read("kind", e.kind, true);
        r.read("bytes", e.bytes);
        event.body = e;
    } else if (type == "log") {
        LogEvent e;
        r.read("level", e.level, true);
        r.read("message", e.message, true);
        event.body = e;
    } else if (type == "error") {
        ErrorEvent e;
        r.read("kind", e.kind, true);
        r.read("message", e.message, true);
        event.body = e;
    } else if (type == "done") {
        DoneEvent e;
        r.read("status", e.status, true);
        r.read("steps", e.steps);
        r.read("wall", e.wall);
        event.body = e;
    } else if (type == "heartbeat") {
        HeartbeatEvent e;
        r.read("step", e.step);
        r.read("phase", e.phase);
        r.read("cpu_seconds", e.cpuSeconds);
        if (j.contains("waiting")) {
            auto w = r.child("waiting");
            w.read("collective", e.waitingFor, true);
            w.read("group", e.waitingGroup);
            w.read("seq", e.waitingSeq);
            w.read("seconds", e.waitingSeconds);
        }
        event.body = e;
    } else if (type == "straggler") {
        StragglerEvent e;
        r.read("step", e.step, true);
        r.read("compute_time", e.computeTime, true);
        r.read("others_time", e.othersTime, true);
        r.read("window", e.window);
        r.read("threshold", e.threshold);
        event.body = e;
    } else if (type == "loss_spike") {
        LossSpikeEvent e;
        r.read("step", e.step, true);
        r.read("loss", e.loss, true);
        r.read("median", e.median, true);
        r.read("epoch", e.epoch);
        r.read("batch", e.batch);
        r.read("window", e.window);
        r.read("factor", e.factor);
        event.body = e;
    } else {
        return makeError("unknown event type '" + type + "'");
    }
    if (!error.empty())
        return makeError(type + " event: " + error);
    return event;
}

} // namespace shardscope::protocol
