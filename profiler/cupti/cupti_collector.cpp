// The CUPTI activity collector (Note [One CUPTI subscriber] in cupti_collector.h). Built only
// where CUPTI is found; cupti_collector_stub.cpp stands in elsewhere.

#include "profiler/cupti/cupti_collector.h"
#include "profiler/cupti/cupti_records.h"
#include "profiler/span_recorder.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace shardscope::profiler {

namespace {

// CUPTI's activity callbacks are process-global C function pointers, so the collected records
// live in process-global state too; at most one collector runs at a time.
std::mutex g_mutex;
bool g_running = false;
std::vector<ActivityRecord> g_records;
std::atomic<std::uint64_t> g_dropped{0};
std::size_t g_bufferBytes = 8u << 20;
CUpti_SubscriberHandle g_subscriber = nullptr;

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

std::string resultText(CUptiResult result)
{
    const char* text = nullptr;
    if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr)
        return "CUPTI error " + std::to_string(int(result));
    return text;
}

const char* memcpyName(std::uint8_t copyKind)
{
    switch (copyKind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return "Memcpy PtoP";
    default:
        return "Memcpy";
    }
}

// A subscriber that asks for no callbacks: it exists to claim (and detect who holds) CUPTI.
void CUPTIAPI ignoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) { }

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
{
    // CUPTI wants 8-byte aligned buffers; aligned_alloc needs a size that is a multiple of 8.
    const std::size_t bytes = (g_bufferBytes + 7) / 8 * 8;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
    *size = *buffer != nullptr ? bytes : 0;
    *maxNumRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t, size_t validSize)
{
    // Runs on a CUPTI thread: copy records out, no CUDA calls.
    std::vector<ActivityRecord> records;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
        if (auto converted = activityRecordFromCupti(record))
            records.push_back(std::move(*converted));
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, streamId, &dropped) == CUPTI_SUCCESS)
        g_dropped.fetch_add(dropped, std::memory_order_relaxed);
    std::free(buffer);
    std::lock_guard lock(g_mutex);
    if (g_running)
        g_records.insert(g_records.end(), std::make_move_iterator(records.begin()), std::make_move_iterator(records.end()));
}

// Undoes whatever start() managed before failing, so that a failed start leaves CUPTI as it was.
void release(std::size_t enabledKinds)
{
    for (std::size_t i = 0; i < enabledKinds; ++i)
        cuptiActivityDisable(kKinds[i]);
    if (g_subscriber != nullptr) {
        cuptiUnsubscribe(g_subscriber);
        g_subscriber = nullptr;
    }
}

} // namespace

std::optional<ActivityRecord> activityRecordFromCupti(const CUpti_Activity* record)
{
    if (record == nullptr)
        return std::nullopt;
    ActivityRecord out;
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        out.kind = ActivityRecord::Kind::Kernel;
        out.name = demangleKernelName(k->name);
        out.startNs = std::int64_t(k->start);
        out.endNs = std::int64_t(k->end);
        out.device = int(k->deviceId);
        out.stream = k->streamId;
        out.correlationId = k->correlationId;
        return out;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        out.kind = ActivityRecord::Kind::Memcpy;
        out.name = memcpyName(m->copyKind);
        out.startNs = std::int64_t(m->start);
        out.endNs = std::int64_t(m->end);
        out.device = int(m->deviceId);
        out.stream = m->streamId;
        out.correlationId = m->correlationId;
        out.bytes = std::int64_t(m->bytes);
        return out;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        out.kind = ActivityRecord::Kind::Memset;
        out.name = "Memset";
        out.startNs = std::int64_t(m->start);
        out.endNs = std::int64_t(m->end);
        out.device = int(m->deviceId);
        out.stream = m->streamId;
        out.correlationId = m->correlationId;
        out.bytes = std::int64_t(m->bytes);
        return out;
    }
    default:
        return std::nullopt;
    }
}

bool CuptiCollector::compiledIn() { return true; }

Result<std::unique_ptr<CuptiCollector>> CuptiCollector::start(const CuptiOptions& options)
{
    std::lock_guard lock(g_mutex);
    if (g_running)
        return makeError("CUPTI collector already running in this process; stop it before starting another");

    CUptiResult result = cuptiSubscribe(&g_subscriber, &ignoreCallback, nullptr);
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        g_subscriber = nullptr;
        return makeError("CUPTI already has a subscriber in this process (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_"
                         "SUPPORTED): the torch profiler (Kineto), KINETO_USE_DAEMON=1 or an Nsight/cuda-gdb tool owns "
                         "it; recording host spans only. Don't start the torch profiler in the run, unset "
                         "KINETO_USE_DAEMON, or profile without the external tool");
    }
    if (result != CUPTI_SUCCESS) {
        g_subscriber = nullptr;
        return makeError("CUPTI subscribe failed: " + resultText(result)
                         + "; recording host spans only. Check that the CUDA driver and libcupti match the torch "
                           "build");
    }
    g_bufferBytes = options.bufferBytes;
    result = cuptiActivityRegisterCallbacks(&bufferRequested, &bufferCompleted);
    if (result != CUPTI_SUCCESS) {
        release(0);
        return makeError("CUPTI activity callbacks could not be registered: " + resultText(result)
                         + "; recording host spans only");
    }
    for (std::size_t i = 0; i < std::size(kKinds); ++i) {
        result = cuptiActivityEnable(kKinds[i]);
        if (result != CUPTI_SUCCESS) {
            release(i);
            return makeError("CUPTI activity kind " + std::to_string(int(kKinds[i]))
                             + " could not be enabled: " + resultText(result) + "; recording host spans only");
        }
    }

    // Note [Device clock]: CUPTI's timestamps are not guaranteed to be the steady clock; sample
    // both, taking the host time halfway around the CUPTI read.
    std::uint64_t cuptiNow = 0;
    const std::int64_t before = steadyNowNs();
    result = cuptiGetTimestamp(&cuptiNow);
    const std::int64_t after = steadyNowNs();
    if (result != CUPTI_SUCCESS) {
        release(std::size(kKinds));
        return makeError("CUPTI timestamp unavailable: " + resultText(result) + "; recording host spans only");
    }

    auto collector = std::unique_ptr<CuptiCollector>(new CuptiCollector());
    collector->m_offsetNs = before + (after - before) / 2 - std::int64_t(cuptiNow);
    collector->m_running = true;
    g_records.clear();
    g_dropped.store(0);
    g_running = true;
    return collector;
}

Result<std::vector<ActivityRecord>> CuptiCollector::stop()
{
    if (!m_running)
        return makeError("CUPTI collector already stopped");
    m_running = false;
    // Forced: also hands over buffers that are not full yet. Runs bufferCompleted on this thread
    // or CUPTI's, which takes g_mutex, so it must be called without holding it.
    const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(g_mutex);
    release(std::size(kKinds));
    g_running = false;
    std::vector<ActivityRecord> records = std::move(g_records);
    g_records.clear();
    if (flushed != CUPTI_SUCCESS)
        return makeError("CUPTI flush failed: " + resultText(flushed) + "; the device trace is incomplete");
    return records;
}

std::uint64_t CuptiCollector::droppedRecords() const { return g_dropped.load(std::memory_order_relaxed); }

CuptiCollector::~CuptiCollector()
{
    if (m_running)
        (void)stop();
}

} // namespace shardscope::profiler
