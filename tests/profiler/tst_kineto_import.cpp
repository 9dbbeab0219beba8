// torch.profiler (Kineto) traces into the trace model (profiler/kineto_trace.h): the real traces of
// ../shared/corpus/kineto-traces/ (GPU with NCCL, CPU-only with Gloo) import, and their breakdown
// and overlap equal Holistic Trace Analysis' on the same files within 1 % — HTA's numbers computed
// now by tests/tools/hta_reference.py from the project venv (holistictraceanalysis pinned in
// scripts/requirements-no-deps.txt). Then the mapping on small hand-made traces, bad input
// (not JSON, a truncated .gz, a trace of another rank count) and cancelling.

#include "profiler/analysis.h"
#include "profiler/chrome_trace.h"
#include "profiler/kineto_trace.h"
#include "tests/common/files.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

using namespace shardscope::profiler;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kCorpus = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/../shared/corpus/kineto-traces/");
const QStringList kCorpusFiles = {
    QStringLiteral("trace_filter_sampled_rank-0.json.gz"),
    QStringLiteral("trace_filter_sampled_rank-1.json.gz"),
    QStringLiteral("nccl_parser_config_nccl_data.json.gz"),
    QStringLiteral("rank_non_gpu_rank_non_gpu.json.gz"),
    QStringLiteral("cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"),
};

// Equal within 1 % of `reference` (and of `scale`, for a part that is small against the whole).
bool withinOnePercent(double ours, double reference, double scale)
{
    return std::abs(ours - reference) <= 0.01 * std::max(std::abs(reference), 1e-9) || std::abs(ours - reference) <= 1e-4 * scale;
}

std::string writeFile(const QTemporaryDir& dir, const char* name, const std::string& bytes)
{
    const QString path = dir.filePath(QString::fromLatin1(name));
    shardscope::testing::writeFile(path, QByteArray::fromStdString(bytes));
    return path.toStdString();
}

std::string readBytes(const QString& path)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

const Span* findSpan(const RankTrace& trace, const std::string& name)
{
    auto it = std::find_if(trace.spans.begin(), trace.spans.end(), [&](const Span& s) { return s.name == name; });
    return it == trace.spans.end() ? nullptr : &*it;
}

} // namespace

class TestKinetoImport : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void matchesHta_data();
    void matchesHta();
    void cpuOnlyGloo();
    void mapping();
    void lastProfilerStepLeftOut();
    void shardscopeFilesStillRead();
    void badInput();
    void rankCount();
    void progressAndCancel();

private:
    std::map<QString, QJsonObject> m_reference; // file name -> hta_reference.py's line
};

void TestKinetoImport::initTestCase()
{
    QStringList args{QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/hta_reference.py"), QStringLiteral("breakdown")};
    for (const QString& file : kCorpusFiles)
        args << kCorpus + file;
    QProcess python;
    python.start(kPython, args);
    QVERIFY2(python.waitForFinished(300000) && python.exitCode() == 0,
             qPrintable("hta_reference.py failed (./scripts/setup.sh installs holistictraceanalysis into .venv): "
                        + python.readAllStandardError().right(3000)));
    const QList<QByteArray> lines = python.readAllStandardOutput().split('\n');
    for (const QByteArray& line : lines) {
        if (line.trimmed().isEmpty())
            continue;
        const QJsonObject object = QJsonDocument::fromJson(line).object();
        m_reference[object.value(QStringLiteral("file")).toString()] = object;
    }
    QCOMPARE(m_reference.size(), std::size_t(kCorpusFiles.size()));
}

void TestKinetoImport::matchesHta_data()
{
    QTest::addColumn<QString>("file");
    for (const QString& file : kCorpusFiles)
        QTest::newRow(qPrintable(file)) << file;
}

void TestKinetoImport::matchesHta()
{
    QFETCH(QString, file);
    const QJsonObject ref = m_reference.at(file);
    auto read = readTraceFile((kCorpus + file).toStdString());
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QCOMPARE(read->size(), std::size_t(1));
    const RankTrace& trace = read->front();
    QCOMPARE(trace.rank, ref.value(QStringLiteral("rank")).toInt());
    QVERIFY(!trace.spans.empty());
    const RankAnalysis analysis = analyseRank(trace);
    const bool gpu = ref.value(QStringLiteral("gpu")).toBool();
    QCOMPARE(analysis.deviceSpans, gpu);
    if (!gpu) {
        // HTA analyses GPU kernels only: for a CPU-only trace it has no breakdown (its call fails);
        // ours is on the host ops (Note [Analysed spans]) and must at least cover them.
        QVERIFY(analysis.total.spanNs > 0);
        QVERIFY(analysis.total.computeNs > 0);
        return;
    }
    const Breakdown& b = analysis.total;
    const double us = 1e-3;
    const double kernel = ref.value(QStringLiteral("kernel_us")).toDouble();
    const auto check = [&](const char* what, double ours, const char* key) {
        const double theirs = ref.value(QLatin1String(key)).toDouble();
        QVERIFY2(withinOnePercent(ours, theirs, kernel),
                 qPrintable(QStringLiteral("%1 %2: ours %3 µs, HTA %4 µs").arg(file, QLatin1String(what)).arg(ours).arg(theirs)));
    };
    check("kernel time", double(b.spanNs) * us, "kernel_us");
    check("compute", double(b.computeNs) * us, "compute_us");
    check("non-compute", double(b.commNs + b.memoryNs) * us, "non_compute_us");
    check("idle", double(b.idleNs) * us, "idle_us");
    const double overlap = ref.value(QStringLiteral("overlap")).toDouble();
    // HTA rounds the overlap to 0.01 percentage points.
    QVERIFY2(std::abs(b.overlap() - overlap) <= std::max(0.01 * overlap, 1e-4),
             qPrintable(QStringLiteral("%1 overlap: ours %2, HTA %3").arg(file).arg(b.overlap()).arg(overlap)));
    QVERIFY(std::any_of(trace.spans.begin(), trace.spans.end(),
                        [](const Span& s) { return s.device >= 0 && s.lane == Lane::Communication; }));
}

void TestKinetoImport::cpuOnlyGloo()
{
    // A Gloo rank of a 300-rank job: distributedInfo gives rank and world size, its collectives are
    // communication, the profiler step is a step.
    auto read = readTraceFile((kCorpus + kCorpusFiles.at(4)).toStdString());
    QVERIFY(read);
    const RankTrace& trace = read->front();
    QCOMPARE(trace.rank, 34);
    QCOMPARE(trace.worldSize, 300);
    QCOMPARE(trace.source, std::string(kSourceHost));
    QVERIFY(std::any_of(trace.spans.begin(), trace.spans.end(), [](const Span& s) { return s.lane == Lane::Communication; }));
    QVERIFY(std::any_of(trace.spans.begin(), trace.spans.end(), [](const Span& s) { return s.category == category::kStep; }));
    QVERIFY(!analyseRank(trace).steps.empty());
}

void TestKinetoImport::mapping()
{
    const std::string doc = R"json({"schemaVersion": 1, "distributedInfo": {"rank": 1, "world_size": 2, "backend": "nccl"},
        "baseTimeNanoseconds": 1700000000000000000,
        "traceEvents": [
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 1000.0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 1001.5, "dur": 2.25},
          {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 10, "tid": 10, "ts": 1010, "dur": 5,
           "args": {"Collective name": "allreduce"}},
          {"ph": "X", "cat": "user_annotation", "name": "gloo:all_gather", "pid": 10, "tid": 99, "ts": 1020, "dur": 5},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1002, "dur": 1,
           "args": {"correlation": 7}},
          {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           "pid": 0, "tid": 7, "ts": 1003, "dur": 10, "args": {"stream": 7, "device": 0, "correlation": 7}},
          {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 1014, "dur": 1,
           "args": {"stream": 7, "device": 0}},
          {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", "pid": 0, "tid": 13,
           "ts": 1004, "dur": 3, "args": {"stream": 13, "device": 0}},
          {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 13, "ts": 1008, "dur": 1,
           "args": {"stream": 13, "device": 0}},
          {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 0, "tid": 13, "ts": 1003, "dur": 50,
           "args": {"stream": 13, "device": 0}},
          {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 10, "tid": 10, "ts": 1005, "s": "t"}
        ]})json";
    auto parsed = parseKinetoTrace(doc, "hand-made");
    QVERIFY2(parsed, parsed ? "" : parsed.error().message.c_str());
    const RankTrace& trace = *parsed;
    QCOMPARE(trace.rank, 1);
    QCOMPARE(trace.worldSize, 2);
    QCOMPARE(trace.clockOffsetNs, std::int64_t(1700000000000000000));
    QCOMPARE(trace.source, std::string(kSourceCupti));
    const Span* step = findSpan(trace, "ProfilerStep#3");
    QVERIFY(step && step->category == category::kStep && step->step == 3 && step->lane == Lane::Host);
    const Span* mm = findSpan(trace, "aten::mm");
    QVERIFY(mm && mm->lane == Lane::Compute && mm->device < 0);
    QCOMPARE(mm->startNs, std::int64_t(1001500)); // µs kept to the ns
    QCOMPARE(mm->durationNs(), std::int64_t(2250));
    const Span* comms = findSpan(trace, "record_param_comms");
    QVERIFY(comms && comms->lane == Lane::Communication && comms->category == "all_reduce");
    // The op ran on a thread that computes: also a wait there.
    const Span* wait = findSpan(trace, "wait: record_param_comms");
    QVERIFY(wait && wait->lane == Lane::Host && wait->category == category::kWait);
    const Span* gloo = findSpan(trace, "gloo:all_gather");
    QVERIFY(gloo && gloo->lane == Lane::Communication && gloo->category == "all_gather");
    QVERIFY(!findSpan(trace, "wait: gloo:all_gather")); // Gloo's own thread: no compute to take out
    const Span* nccl = findSpan(trace, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
    QVERIFY(nccl && nccl->lane == Lane::Communication && nccl->category == "all_reduce" && nccl->track == "stream 7");
    QCOMPARE(nccl->device, 0);
    QCOMPARE(nccl->correlationId, std::uint64_t(7));
    const Span* copy = findSpan(trace, "Memcpy DtoH (Device -> Pinned)");
    QVERIFY(copy && copy->lane == Lane::Memory && copy->category == category::kMemcpy);
    const Span* kernel = findSpan(trace, "void at::native::vectorized_elementwise_kernel<4>");
    QVERIFY(kernel && kernel->lane == Lane::Compute && kernel->category == category::kKernel && kernel->track == "stream 13");
    const Span* sync = findSpan(trace, "Stream Sync");
    QVERIFY(sync && sync->lane == Lane::Memory && sync->category == "other"); // HTA: not computation
    QVERIFY(!findSpan(trace, "forward")); // GPU copies of annotations: left out, as HTA does
    QVERIFY(!findSpan(trace, "marker"));
    // Analysed on the device: compute 1004-1007 under the NCCL kernel 1003-1013.
    const RankAnalysis analysis = analyseRank(trace);
    QVERIFY(analysis.deviceSpans);
    QCOMPARE(analysis.total.overlapNs, std::int64_t(3000));
    QCOMPARE(analysis.total.commTotalNs, std::int64_t(10000));
}

void TestKinetoImport::lastProfilerStepLeftOut()
{
    // Two steps: kernels launched in the last one (Note [The last profiler step]) are left out.
    const std::string doc = R"json({"traceEvents": [
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 90, "dur": 1, "args": {"correlation": 1}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
          {"ph": "X", "cat": "kernel", "name": "early", "pid": 0, "tid": 7, "ts": 95, "dur": 20, "args": {"stream": 7, "correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": 120, "dur": 20, "args": {"stream": 7, "correlation": 2}},
          {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 50, "dur": 5, "args": {"stream": 7, "correlation": 9}}
        ]})json";
    auto parsed = parseKinetoTrace(doc);
    QVERIFY(parsed);
    QVERIFY(findSpan(*parsed, "early"));
    QVERIFY(!findSpan(*parsed, "late"));
    QVERIFY(!findSpan(*parsed, "orphan")); // launched by nothing in the trace: HTA drops it too
    QVERIFY(findSpan(*parsed, "ProfilerStep#2")); // host events stay
    QVERIFY(std::any_of(parsed->notes.begin(), parsed->notes.end(),
                        [](const std::string& n) { return n.find("last profiler step") != std::string::npos; }));
}

void TestKinetoImport::shardscopeFilesStillRead()
{
    // readTraceFile tells Shardscope's own files (plain or gzip) from Kineto's, though both carry
    // distributedInfo.
    RankTrace trace;
    trace.rank = 3;
    Span s;
    s.name = "forward";
    s.category = "forward";
    s.lane = Lane::Compute;
    s.startNs = 10;
    s.endNs = 20;
    trace.spans.push_back(s);
    const std::string json = toChromeTraceJson(trace);
    QVERIFY(!looksLikeKineto(json.substr(0, 4096)));
    QTemporaryDir dir;
    const std::string plain = writeFile(dir, "rank3.json", json);
    const std::string gz = dir.filePath(QStringLiteral("rank3.json.gz")).toStdString();
    gzFile out = gzopen(gz.c_str(), "wb");
    QVERIFY(out);
    gzwrite(out, json.data(), static_cast<unsigned>(json.size()));
    gzclose(out);
    for (const std::string& path : {plain, gz}) {
        auto read = readTraceFile(path);
        QVERIFY2(read, read ? "" : read.error().message.c_str());
        QCOMPARE(read->size(), std::size_t(1));
        QCOMPARE(read->front().rank, 3);
        QCOMPARE(read->front().spans.front().name, std::string("forward"));
    }
}

void TestKinetoImport::badInput()
{
    QTemporaryDir dir;
    const std::string notJson = writeFile(dir, "notjson.pt.trace.json",
                                          "{\"schemaVersion\": 1, \"traceEvents\": [ this is not json");
    auto read = readTraceFile(notJson);
    QVERIFY(!read);
    QVERIFY2(read.error().message.find("not valid JSON") != std::string::npos, read.error().message.c_str());
    QVERIFY(read.error().message.find("notjson.pt.trace.json") != std::string::npos);

    const std::string whole = readBytes(kCorpus + kCorpusFiles.at(2));
    const std::string truncated = writeFile(dir, "truncated.json.gz", whole.substr(0, whole.size() / 2));
    read = readTraceFile(truncated);
    QVERIFY(!read);
    QVERIFY2(read.error().message.find("truncated or corrupt") != std::string::npos, read.error().message.c_str());

    const std::string empty = writeFile(dir, "empty.json", "");
    QVERIFY(!readTraceFile(empty));
    QVERIFY(!readTraceFile(dir.filePath(QStringLiteral("missing.json")).toStdString()));

    // An event with a timestamp that is not a number: the error names the event.
    auto bad = parseKinetoTrace(
        R"json({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "soon"}]})json",
        "bad.json");
    QVERIFY(!bad);
    QVERIFY2(bad.error().message.find("traceEvents[0] (aten::mm)") != std::string::npos, bad.error().message.c_str());
    auto bare = parseKinetoTrace("42", "bare.json");
    QVERIFY(!bare);
}

void TestKinetoImport::rankCount()
{
    RankTrace a, b;
    a.rank = 0;
    a.worldSize = 2;
    b.rank = 1;
    b.worldSize = 2;
    QVERIFY(checkRankCount({a, b}, 2));
    QVERIFY(checkRankCount({a, b}, 0));
    auto wrong = checkRankCount({a, b}, 4);
    QVERIFY(!wrong);
    QVERIFY2(wrong.error().message.find("2-rank job") != std::string::npos
                 && wrong.error().message.find("4 ranks") != std::string::npos,
             wrong.error().message.c_str());
    b.worldSize = 8;
    auto mixed = checkRankCount({a, b}, 0);
    QVERIFY(!mixed);
    QVERIFY2(mixed.error().message.find("8-rank job") != std::string::npos, mixed.error().message.c_str());
    RankTrace far;
    far.rank = 5; // no distributedInfo: the rank alone is checked
    QVERIFY(!checkRankCount({far}, 2));
    QVERIFY(checkRankCount({far}, 0));
}

void TestKinetoImport::progressAndCancel()
{
    const std::string path = (kCorpus + kCorpusFiles.at(2)).toStdString();
    std::uint64_t lastDone = 0, lastTotal = 0;
    int calls = 0;
    bool ordered = true;
    auto read = readKinetoTrace(path, [&](std::uint64_t done, std::uint64_t total) {
        ordered = ordered && done >= lastDone && done <= total;
        lastDone = done;
        lastTotal = total;
        ++calls;
        return true;
    });
    QVERIFY(read);
    QVERIFY(ordered);
    QVERIFY(calls >= 2);
    QCOMPARE(lastDone, lastTotal);
    auto cancelled = readKinetoTrace(path, [](std::uint64_t, std::uint64_t) { return false; });
    QVERIFY(!cancelled);
    QVERIFY2(cancelled.error().message.find("cancelled") != std::string::npos, cancelled.error().message.c_str());
}

QTEST_APPLESS_MAIN(TestKinetoImport)
#include "tst_kineto_import.moc"
