// The CUPTI seam on CPU: kernel classification (HTA's rules, both NCCL naming generations),
// collective kinds, demangling, device spans from synthetic activity records (clock offset,
// streams, skipped records), attaching them to a host trace (steps, source "cupti", analysis on
// device spans), the fallback when no collector can start, and, in CUPTI builds, the conversion
// from CUPTI's own structs.

#include "profiler/analysis.h"
#include "profiler/cupti/activity_record.h"
#include "profiler/cupti/cupti_collector.h"
#include "profiler_test_util.h"
#ifdef SHARDSCOPE_PROFILER_HAS_CUPTI
#include "profiler/cupti/cupti_records.h"
#endif

#include <QtTest>

using namespace shardscope::profiler;
using namespace profiler_test;

Q_DECLARE_METATYPE(shardscope::profiler::Lane)
Q_DECLARE_METATYPE(shardscope::profiler::ActivityRecord::Kind)

namespace {

ActivityRecord record(ActivityRecord::Kind kind, std::string name, std::int64_t start, std::int64_t end, std::uint32_t stream,
                      std::int64_t bytes = 0, int device = 0)
{
    ActivityRecord r;
    r.kind = kind;
    r.name = std::move(name);
    r.startNs = start;
    r.endNs = end;
    r.stream = stream;
    r.bytes = bytes;
    r.device = device;
    r.correlationId = std::uint32_t(start);
    return r;
}

} // namespace

class TestProfilerCupti : public QObject {
    Q_OBJECT

private slots:
    void classify_data();
    void classify();
    void collectiveKinds_data();
    void collectiveKinds();
    void demangledNcclNameIsCommunication();
    void spansFromRecords();
    void attachToHostTrace();
    void collectorFallback();
    void conversionFromCuptiStructs();
};

void TestProfilerCupti::classify_data()
{
    QTest::addColumn<ActivityRecord::Kind>("kind");
    QTest::addColumn<QString>("name");
    QTest::addColumn<Lane>("lane");
    using K = ActivityRecord::Kind;
    QTest::newRow("NCCL 2.19+ all-reduce") << K::Kernel << "ncclDevKernel_AllReduce_Sum_f32_RING_LL" << Lane::Communication;
    QTest::newRow("NCCL 2.19+ reduce-scatter bf16")
        << K::Kernel << "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL" << Lane::Communication;
    QTest::newRow("NCCL SendRecv") << K::Kernel << "ncclDevKernel_SendRecv" << Lane::Communication;
    QTest::newRow("NCCL Generic") << K::Kernel << "ncclDevKernel_Generic" << Lane::Communication;
    QTest::newRow("old NCCL name") << K::Kernel << "ncclKernel_AllGather_RING_LL_Sum_int8_t" << Lane::Communication;
    QTest::newRow("demangled NCCL with args")
        << K::Kernel << "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)" << Lane::Communication;
    QTest::newRow("elementwise") << K::Kernel << "void at::native::vectorized_elementwise_kernel<4, float>(int)" << Lane::Compute;
    QTest::newRow("cutlass gemm") << K::Kernel << "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n" << Lane::Compute;
    QTest::newRow("nccl not at the start") << K::Kernel << "my_nccl_like_kernel" << Lane::Compute;
    QTest::newRow("memcpy record") << K::Memcpy << "Memcpy HtoD" << Lane::Memory;
    QTest::newRow("memset record") << K::Memset << "Memset" << Lane::Memory;
    QTest::newRow("kernel named Memcpy") << K::Kernel << "Memcpy DtoD (Device -> Device)" << Lane::Memory;
    QTest::newRow("kernel named Memset") << K::Kernel << "Memset (Device)" << Lane::Memory;
}

void TestProfilerCupti::classify()
{
    QFETCH(ActivityRecord::Kind, kind);
    QFETCH(QString, name);
    QFETCH(Lane, lane);
    QCOMPARE(classifyActivity(kind, name.toStdString()), lane);
}

void TestProfilerCupti::collectiveKinds_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("kind");
    QTest::newRow("all_reduce") << "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
                                << "all_reduce";
    QTest::newRow("all_gather") << "ncclDevKernel_AllGather_RING_LL"
                                << "all_gather";
    QTest::newRow("reduce_scatter") << "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"
                                    << "reduce_scatter";
    QTest::newRow("broadcast") << "ncclDevKernel_Broadcast_RING_LL"
                               << "broadcast";
    QTest::newRow("reduce, not reduce_scatter") << "ncclDevKernel_Reduce_Sum_f32_RING_LL"
                                                << "reduce";
    QTest::newRow("send/recv") << "ncclDevKernel_SendRecv"
                               << "send_recv";
    QTest::newRow("old naming") << "ncclKernel_AllGather_RING_LL_Sum_int8_t"
                                << "all_gather";
    QTest::newRow("generic") << "ncclDevKernel_Generic"
                             << "nccl";
    QTest::newRow("demangled") << "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                               << "all_reduce";
}

void TestProfilerCupti::collectiveKinds()
{
    QFETCH(QString, name);
    QFETCH(QString, kind);
    QCOMPARE(QString::fromStdString(collectiveKind(name.toStdString())), kind);
}

void TestProfilerCupti::demangledNcclNameIsCommunication()
{
    // CUPTI hands out mangled names; the "nccl" prefix only shows after demangling.
    const char* mangled = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
    QCOMPARE(classifyActivity(ActivityRecord::Kind::Kernel, mangled), Lane::Compute);
    const std::string name = demangleKernelName(mangled);
    QCOMPARE(QString::fromStdString(name),
             QStringLiteral("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
    QCOMPARE(classifyActivity(ActivityRecord::Kind::Kernel, name), Lane::Communication);
    QCOMPARE(QString::fromStdString(demangleKernelName("not_mangled")), QStringLiteral("not_mangled"));
    QCOMPARE(QString::fromStdString(demangleKernelName(nullptr)), QStringLiteral("<unnamed kernel>"));
}

void TestProfilerCupti::spansFromRecords()
{
    using K = ActivityRecord::Kind;
    const std::vector<ActivityRecord> records{
        record(K::Kernel, "void gemm<float>()", 1000, 2000, 7),
        record(K::Kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1500, 3000, 13),
        record(K::Memcpy, "Memcpy HtoD", 500, 700, 7, 4096),
        record(K::Memset, "Memset", 700, 710, 7, 128),
        record(K::Kernel, "unknown timestamps", 0, 0, 7),
        record(K::Kernel, "reversed", 50, 40, 7),
    };
    const DeviceSpansResult result = spansFromActivity(records, 1'000'000);
    QCOMPARE(result.skipped, std::size_t(2));
    QCOMPARE(result.spans.size(), std::size_t(4));
    const Span& gemm = result.spans[0];
    QCOMPARE(gemm.lane, Lane::Compute);
    QCOMPARE(QString::fromStdString(gemm.category), QStringLiteral("kernel"));
    QCOMPARE(QString::fromStdString(gemm.track), QStringLiteral("stream 7"));
    QCOMPARE(gemm.startNs, 1'001'000LL);
    QCOMPARE(gemm.endNs, 1'002'000LL);
    QCOMPARE(gemm.device, 0);
    QCOMPARE(gemm.correlationId, 1000ULL);
    const Span& nccl = result.spans[1];
    QCOMPARE(nccl.lane, Lane::Communication);
    QCOMPARE(QString::fromStdString(nccl.category), QStringLiteral("all_reduce"));
    QCOMPARE(QString::fromStdString(nccl.track), QStringLiteral("stream 13"));
    QCOMPARE(result.spans[2].lane, Lane::Memory);
    QCOMPARE(QString::fromStdString(result.spans[2].category), QStringLiteral("memcpy"));
    QCOMPARE(result.spans[2].bytes, 4096LL);
    QCOMPARE(QString::fromStdString(result.spans[3].category), QStringLiteral("memset"));

    // Several devices in one rank: the device goes into the track name.
    const auto two = spansFromActivity({record(K::Kernel, "k", 1, 2, 7, 0, 0), record(K::Kernel, "k", 1, 2, 7, 0, 1)}, 0);
    QCOMPARE(QString::fromStdString(two.spans[1].track), QStringLiteral("cuda:1 stream 7"));
}

void TestProfilerCupti::attachToHostTrace()
{
    using K = ActivityRecord::Kind;
    RankTrace trace;
    trace.rank = 1;
    trace.spans.push_back(span(Lane::Host, 10'000, 20'000, "step 0", "step", 0));
    trace.spans.push_back(span(Lane::Host, 20'000, 30'000, "step 1", "step", 1));
    trace.spans.push_back(span(Lane::Compute, 10'000, 19'000, "backward", "backward", 0));
    // Device clock = host clock - 5000 ns. Step 0: compute 0-100 and NCCL 50-150 (in device ns
    // relative to 10'000 host); a kernel launched late in step 0 still runs at host 20'100.
    const std::int64_t offset = 5000;
    const std::vector<ActivityRecord> records{
        record(K::Kernel, "gemm", 5000, 5100, 7),
        record(K::Kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5050, 5150, 13),
        record(K::Kernel, "gemm", 15'100, 15'200, 7),
        record(K::Kernel, "gemm", 4000, 4001, 7), // before any step
        record(K::Kernel, "lost", 0, 0, 7),
    };
    attachDeviceActivity(trace, records, offset);
    QCOMPARE(QString::fromStdString(trace.source), QStringLiteral("cupti"));
    QCOMPARE(trace.notes.size(), std::size_t(1));
    QVERIFY(QString::fromStdString(trace.notes[0]).contains("1 CUPTI record(s) had no timestamps"));
    std::vector<const Span*> device;
    for (const Span& s : trace.spans) {
        if (s.device >= 0)
            device.push_back(&s);
    }
    QCOMPARE(device.size(), std::size_t(4));
    QCOMPARE(device[0]->step, -1LL); // 9000: before step 0
    QCOMPARE(device[1]->step, 0LL); // 10'000
    QCOMPARE(device[2]->step, 0LL); // 10'050
    QCOMPARE(device[3]->step, 1LL); // 20'100: in step 1's window

    // Analysis uses device spans only: step 0 = host window 10'000-20'000, compute 100, comm 100, overlap 50.
    const RankAnalysis a = analyseRank(trace);
    QVERIFY(a.deviceSpans);
    QCOMPARE(a.steps.size(), std::size_t(2));
    QCOMPARE(a.steps[0].breakdown.computeNs, 100LL);
    QCOMPARE(a.steps[0].breakdown.commTotalNs, 100LL);
    QCOMPARE(a.steps[0].breakdown.overlap(), 0.5);
    QCOMPARE(a.steps[0].breakdown.idleNs, 10'000LL - 150);
    QCOMPARE(a.collectives.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(a.collectives[0].kind), QStringLiteral("all_reduce"));
}

void TestProfilerCupti::collectorFallback()
{
    // Without CUPTI (or with CUPTI that can't start: no GPU, another subscriber) start() is an
    // error value with a message, never a crash, and the host trace stays a "host" trace.
    auto collector = CuptiCollector::start();
    if (!CuptiCollector::compiledIn()) {
        QVERIFY(!collector.ok());
        QVERIFY(QString::fromStdString(collector.error().message).contains("host spans only"));
        return;
    }
    if (!collector.ok()) {
        QVERIFY(!collector.error().message.empty());
        qInfo("CUPTI did not start here (expected without a GPU): %s", collector.error().message.c_str());
        return;
    }
    // A second collector in the same process is refused (one subscriber per process).
    auto second = CuptiCollector::start();
    QVERIFY(!second.ok());
    auto records = (*collector)->stop();
    QVERIFY(records.ok());
    QVERIFY(!(*collector)->stop().ok());
}

void TestProfilerCupti::conversionFromCuptiStructs()
{
#ifndef SHARDSCOPE_PROFILER_HAS_CUPTI
    QSKIP("built without CUPTI: the struct conversion is tested in CUPTI builds");
#else
    CUpti_ActivityKernel10 kernel{};
    kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    kernel.name = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
    kernel.start = 1000;
    kernel.end = 2500;
    kernel.deviceId = 1;
    kernel.streamId = 13;
    kernel.correlationId = 99;
    auto k = activityRecordFromCupti(reinterpret_cast<const CUpti_Activity*>(&kernel));
    QVERIFY(k.has_value());
    QCOMPARE(k->kind, ActivityRecord::Kind::Kernel);
    QVERIFY(QString::fromStdString(k->name).startsWith("ncclDevKernel_AllReduce"));
    QCOMPARE(k->startNs, 1000LL);
    QCOMPARE(k->endNs, 2500LL);
    QCOMPARE(k->device, 1);
    QCOMPARE(k->stream, 13U);
    QCOMPARE(k->correlationId, 99U);

    CUpti_ActivityMemcpy6 copy{};
    copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
    copy.bytes = 4096;
    copy.start = 10;
    copy.end = 20;
    auto c = activityRecordFromCupti(reinterpret_cast<const CUpti_Activity*>(&copy));
    QVERIFY(c.has_value());
    QCOMPARE(QString::fromStdString(c->name), QStringLiteral("Memcpy DtoH"));
    QCOMPARE(c->bytes, 4096LL);

    CUpti_ActivityMemset4 set{};
    set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    set.bytes = 64;
    auto s = activityRecordFromCupti(reinterpret_cast<const CUpti_Activity*>(&set));
    QVERIFY(s.has_value());
    QCOMPARE(s->kind, ActivityRecord::Kind::Memset);
    QCOMPARE(s->bytes, 64LL);

    CUpti_Activity other{};
    other.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    QVERIFY(!activityRecordFromCupti(&other).has_value());
#endif
}

QTEST_APPLESS_MAIN(TestProfilerCupti)
#include "tst_profiler_cupti.moc"
