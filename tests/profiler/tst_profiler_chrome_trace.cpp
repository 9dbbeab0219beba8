// Chrome trace-event export and import. The exported JSON is checked with Qt's own JSON parser
// (independent of the exporter's) against the trace-event format: top level, field types, µs
// units, metadata naming every process and thread, and complete events that nest or are disjoint
// on every thread. Then round trips (per-rank and merged, clock alignment), bad input as error
// values, a foreign (Kineto-like) file, and a bounded mutation loop over the importer.

#include "profiler/chrome_trace.h"
#include "profiler_test_util.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <random>
#include <set>

using namespace shardscope::profiler;
using namespace profiler_test;

Q_DECLARE_METATYPE(shardscope::profiler::RankTrace)
Q_DECLARE_METATYPE(std::vector<shardscope::profiler::RankTrace>)

namespace {

// A rank of a DDP step on a steady clock a machine up for 40 days would show (3.5e15 ns): the
// large values are the point (Note [Time origin]).
RankTrace sampleTrace(int rank, std::int64_t base = 3'456'789'012'345'678LL)
{
    RankTrace t;
    t.rank = rank;
    t.source = "host";
    t.clockOffsetNs = -1234 * rank;
    auto add = [&](Lane lane, std::int64_t start, std::int64_t end, const char* name, const char* cat, std::int64_t bytes = 0,
                   std::int64_t step = 5) {
        Span s = span(lane, base + start, base + end, name, cat, step);
        s.bytes = bytes;
        t.spans.push_back(s);
    };
    add(Lane::Host, 0, 10'000'001, "step 5", "step");
    add(Lane::Host, 1, 999, "data", "data_loading");
    add(Lane::Compute, 1000, 3'000'000, "forward", "forward");
    add(Lane::Compute, 3'000'000, 8'000'000, "backward", "backward");
    add(Lane::Compute, 3'000'100, 3'000'200, "grad hook", "hook");
    // Two buckets in flight at once: they overlap without nesting, so they need two threads.
    add(Lane::Communication, 4'000'000, 6'000'000, "all_reduce bucket 0", "all_reduce", 25 << 20);
    add(Lane::Communication, 5'000'000, 8'500'000, "all_reduce bucket 1", "all_reduce", 25 << 20);
    add(Lane::Communication, 7'000'000, 7'000'000, "empty", "all_reduce");
    add(Lane::Compute, 8'600'000, 9'999'999, "optimizer", "optimizer");
    add(Lane::Memory, 9'000'000, 9'000'333, "offload copy", "memcpy", 1 << 20);
    Span kernel = span(Lane::Compute, base + 1500, base + 2500, "void gemm<float>(int)", "kernel", 5);
    kernel.track = "stream 7";
    kernel.device = 0;
    kernel.correlationId = 42;
    t.spans.push_back(kernel);
    Span nccl = span(Lane::Communication, base + 2000, base + 4321, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all_reduce", 5);
    nccl.track = "stream 13";
    nccl.device = 0;
    t.spans.push_back(nccl);
    t.counters.push_back(CounterSample{"memory", "allocated", base + 1000, 123456789.0});
    t.counters.push_back(CounterSample{"memory", "reserved", base + 1000, 2.5e9});
    t.counters.push_back(CounterSample{"memory", "allocated", base + 9'000'000, 0.125});
    t.notes.push_back("a note with \"quotes\" and µ");
    canonicalise(t);
    return t;
}

std::int64_t toNs(double micros) { return std::llround(micros * 1000.0); }

bool isInteger(const QJsonValue& v) { return v.isDouble() && std::floor(v.toDouble()) == v.toDouble(); }

// Validates `json` against the trace-event format; returns the first problem or an empty string.
QString validateTraceEvents(const QByteArray& json, int* completeEvents = nullptr)
{
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &error);
    if (error.error != QJsonParseError::NoError)
        return "not JSON: " + error.errorString();
    if (!doc.isObject())
        return "top level is not an object";
    const QJsonObject root = doc.object();
    if (!root.value("traceEvents").isArray())
        return "no traceEvents array";
    if (root.contains("displayTimeUnit") && root.value("displayTimeUnit").toString() != "ms"
        && root.value("displayTimeUnit").toString() != "ns")
        return "displayTimeUnit must be ms or ns";
    const QJsonArray events = root.value("traceEvents").toArray();

    std::set<int> namedProcesses;
    std::set<std::pair<int, int>> namedThreads;
    struct Slice {
        std::int64_t start;
        std::int64_t end;
    };
    std::map<std::pair<int, int>, std::vector<Slice>> slices;
    std::set<int> pidsUsed;
    int complete = 0;
    for (int i = 0; i < events.size(); ++i) {
        const QString at = QStringLiteral("event %1: ").arg(i);
        if (!events[i].isObject())
            return at + "not an object";
        const QJsonObject e = events[i].toObject();
        const QString ph = e.value("ph").toString();
        if (!e.value("name").isString())
            return at + "name must be a string";
        if (!isInteger(e.value("pid")) || !isInteger(e.value("tid")))
            return at + "pid and tid must be integers";
        const int pid = e.value("pid").toInt();
        const int tid = e.value("tid").toInt();
        if (e.contains("cat") && !e.value("cat").isString())
            return at + "cat must be a string";
        if (e.contains("args") && !e.value("args").isObject())
            return at + "args must be an object";
        const QJsonObject args = e.value("args").toObject();
        if (ph == "M") {
            const QString name = e.value("name").toString();
            if (name == "process_name" || name == "thread_name") {
                if (!args.value("name").isString() || args.value("name").toString().isEmpty())
                    return at + name + " needs args.name";
                if (name == "process_name")
                    namedProcesses.insert(pid);
                else
                    namedThreads.insert({pid, tid});
            } else if (name == "process_sort_index" || name == "thread_sort_index") {
                if (!isInteger(args.value("sort_index")))
                    return at + name + " needs an integer args.sort_index";
            } else if (name == "process_labels") {
                if (!args.value("labels").isString())
                    return at + "process_labels needs args.labels";
            } else {
                return at + "unknown metadata " + name;
            }
        } else if (ph == "X") {
            ++complete;
            if (!e.value("ts").isDouble() || !e.value("dur").isDouble())
                return at + "ts and dur must be numbers";
            if (e.value("dur").toDouble() < 0)
                return at + "dur must be >= 0";
            const std::int64_t start = toNs(e.value("ts").toDouble());
            slices[{pid, tid}].push_back({start, start + toNs(e.value("dur").toDouble())});
            pidsUsed.insert(pid);
        } else if (ph == "C") {
            if (!e.value("ts").isDouble())
                return at + "counter ts must be a number";
            if (args.isEmpty())
                return at + "counter needs at least one series";
            for (auto it = args.begin(); it != args.end(); ++it) {
                if (!it.value().isDouble())
                    return at + "counter series " + it.key() + " must be a number";
            }
            pidsUsed.insert(pid);
        } else {
            return at + "unexpected phase '" + ph + "'";
        }
    }
    for (int pid : pidsUsed) {
        if (!namedProcesses.count(pid))
            return QStringLiteral("process %1 has no process_name").arg(pid);
    }
    for (auto& [thread, list] : slices) {
        if (!namedThreads.count(thread))
            return QStringLiteral("thread %1/%2 has no thread_name").arg(thread.first).arg(thread.second);
        // Complete events on one thread must nest or be disjoint.
        std::sort(list.begin(), list.end(),
                  [](const Slice& a, const Slice& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
        std::vector<std::int64_t> open;
        for (const Slice& s : list) {
            while (!open.empty() && open.back() <= s.start)
                open.pop_back();
            if (!open.empty() && s.end > open.back())
                return QStringLiteral("thread %1/%2: a slice [%3, %4] overlaps its parent without nesting")
                    .arg(thread.first)
                    .arg(thread.second)
                    .arg(s.start)
                    .arg(s.end);
            open.push_back(s.end);
        }
    }
    if (completeEvents != nullptr)
        *completeEvents = complete;
    return {};
}

QByteArray bytes(const std::string& s) { return QByteArray::fromStdString(s); }

} // namespace

class TestProfilerChromeTrace : public QObject {
    Q_OBJECT

private slots:
    void exportMatchesTraceEventFormat_data();
    void exportMatchesTraceEventFormat();
    void unitsAndLayout();
    void rankFileRoundTrips();
    void mergedFileAlignsClocks();
    void alignByReferenceEvent();
    void filesOnDisk();
    void badInputIsAnError_data();
    void badInputIsAnError();
    void foreignKinetoLikeTrace();
    void mutationLoop();
};

void TestProfilerChromeTrace::exportMatchesTraceEventFormat_data()
{
    QTest::addColumn<std::vector<RankTrace>>("traces");
    QTest::addColumn<bool>("merged");
    QTest::addColumn<int>("completeEvents");

    QTest::newRow("host and device spans, one rank") << std::vector<RankTrace>{sampleTrace(0)} << false << 12;
    QTest::newRow("empty trace") << std::vector<RankTrace>{RankTrace{}} << false << 0;
    QTest::newRow("merged, four ranks") << std::vector<RankTrace>{sampleTrace(0), sampleTrace(1), sampleTrace(2), sampleTrace(3)}
                                        << true << 48;

    // Many identical overlapping spans (a pathological lane): each needs a thread of its own.
    RankTrace crowded;
    for (int i = 0; i < 20; ++i)
        crowded.spans.push_back(span(Lane::Communication, i * 10, 1000 + i * 10, "c", "all_reduce"));
    QTest::newRow("staircase of overlaps") << std::vector<RankTrace>{crowded} << false << 20;

    std::mt19937 rng(7);
    std::uniform_int_distribution<int> pos(0, 5000);
    std::uniform_int_distribution<int> lane(0, 3);
    RankTrace random;
    for (int i = 0; i < 400; ++i) {
        int a = pos(rng);
        int b = pos(rng);
        random.spans.push_back(span(Lane(lane(rng)), std::min(a, b), std::max(a, b), "r", "k"));
    }
    QTest::newRow("random spans") << std::vector<RankTrace>{random} << false << 400;
}

void TestProfilerChromeTrace::exportMatchesTraceEventFormat()
{
    QFETCH(std::vector<RankTrace>, traces);
    QFETCH(bool, merged);
    QFETCH(int, completeEvents);
    std::string json;
    if (merged) {
        auto text = toMergedChromeTraceJson(traces, ClockAlignment{});
        QVERIFY2(text.ok(), text.ok() ? "" : text.error().message.c_str());
        json = *text;
    } else {
        json = toChromeTraceJson(traces.front());
    }
    int complete = -1;
    const QString problem = validateTraceEvents(bytes(json), &complete);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    QCOMPARE(complete, completeEvents);
}

void TestProfilerChromeTrace::unitsAndLayout()
{
    RankTrace t;
    t.rank = 2;
    t.source = "cupti";
    t.spans.push_back(span(Lane::Compute, 5'000'000'000LL + 1500, 5'000'000'000LL + 4000, "fwd", "forward"));
    t.spans.push_back(span(Lane::Communication, 5'000'000'000LL + 2000, 5'000'000'000LL + 2500, "ar", "all_reduce"));
    t.counters.push_back(CounterSample{"memory", "allocated", 5'000'000'000LL + 1000, 64.0});
    const QJsonObject root = QJsonDocument::fromJson(bytes(toChromeTraceJson(t))).object();
    QCOMPARE(root.value("distributedInfo").toObject().value("rank").toInt(), 2);
    const QJsonObject ours = root.value("otherData").toObject().value("shardscope").toObject();
    QCOMPARE(ours.value("version").toInt(), kTraceFormatVersion);
    QCOMPARE(ours.value("time_origin_ns").toDouble(), 5e9); // the whole second at or before the first event
    QCOMPARE(ours.value("ranks").toArray().at(0).toObject().value("source").toString(), QStringLiteral("cupti"));

    std::map<QString, QJsonObject> byName;
    std::map<int, QString> threadNames;
    QString processName;
    QString labels;
    for (const QJsonValue& v : root.value("traceEvents").toArray()) {
        const QJsonObject e = v.toObject();
        if (e.value("ph").toString() == "M" && e.value("name").toString() == "thread_name")
            threadNames[e.value("tid").toInt()] = e.value("args").toObject().value("name").toString();
        else if (e.value("ph").toString() == "M" && e.value("name").toString() == "process_name")
            processName = e.value("args").toObject().value("name").toString();
        else if (e.value("ph").toString() == "M" && e.value("name").toString() == "process_labels")
            labels = e.value("args").toObject().value("labels").toString();
        else
            byName[e.value("name").toString()] = e;
    }
    QCOMPARE(processName, QStringLiteral("rank 2"));
    QCOMPARE(labels, QStringLiteral("source: cupti"));
    const QJsonObject fwd = byName.at("fwd");
    QCOMPARE(fwd.value("pid").toInt(), 2);
    QCOMPARE(fwd.value("ts").toDouble(), 1.5); // µs since the origin
    QCOMPARE(fwd.value("dur").toDouble(), 2.5); // µs
    QCOMPARE(fwd.value("cat").toString(), QStringLiteral("forward"));
    QCOMPARE(threadNames.at(fwd.value("tid").toInt()), QStringLiteral("compute"));
    QCOMPARE(threadNames.at(byName.at("ar").value("tid").toInt()), QStringLiteral("communication"));
    QCOMPARE(byName.at("ar").value("args").toObject().value("lane").toString(), QStringLiteral("communication"));
    const QJsonObject counter = byName.at("memory");
    QCOMPARE(counter.value("ph").toString(), QStringLiteral("C"));
    QCOMPARE(counter.value("ts").toDouble(), 1.0);
    QCOMPARE(counter.value("args").toObject().value("allocated").toDouble(), 64.0);

    // Overlapping buckets: the second goes to "communication #2".
    RankTrace overlapping;
    overlapping.spans.push_back(span(Lane::Communication, 0, 100, "b0", "all_reduce"));
    overlapping.spans.push_back(span(Lane::Communication, 50, 150, "b1", "all_reduce"));
    QStringList names;
    for (const QJsonValue& v :
         QJsonDocument::fromJson(bytes(toChromeTraceJson(overlapping))).object().value("traceEvents").toArray()) {
        if (v.toObject().value("name").toString() == "thread_name")
            names << v.toObject().value("args").toObject().value("name").toString();
    }
    QCOMPARE(names, (QStringList{"communication", "communication #2"}));
}

void TestProfilerChromeTrace::rankFileRoundTrips()
{
    for (const RankTrace& original : {sampleTrace(0), sampleTrace(3, 12345), RankTrace{}}) {
        const std::string json = toChromeTraceJson(original);
        auto back = parseChromeTrace(json, "rank.json");
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        if (original.spans.empty() && original.counters.empty()) {
            QCOMPARE(back->size(), std::size_t(1)); // the rank is listed in otherData even when empty
            QCOMPARE(back->front().rank, original.rank);
            continue;
        }
        QCOMPARE(back->size(), std::size_t(1));
        RankTrace expected = original;
        canonicalise(expected);
        const RankTrace& got = back->front();
        QCOMPARE(got.rank, expected.rank);
        QCOMPARE(got.source, expected.source);
        QCOMPARE(got.clockOffsetNs, expected.clockOffsetNs);
        QCOMPARE(got.notes, expected.notes);
        QCOMPARE(got.spans.size(), expected.spans.size());
        for (std::size_t i = 0; i < got.spans.size(); ++i)
            QVERIFY2(got.spans[i] == expected.spans[i], expected.spans[i].name.c_str());
        QVERIFY(got.counters == expected.counters);
        QVERIFY(got == expected);
    }
}

void TestProfilerChromeTrace::mergedFileAlignsClocks()
{
    std::vector<RankTrace> traces{sampleTrace(0), sampleTrace(1), sampleTrace(2)};
    auto json = toMergedChromeTraceJson(traces, ClockAlignment{});
    QVERIFY(json.ok());
    auto back = parseChromeTrace(*json, "merged.json");
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
    QCOMPARE(back->size(), std::size_t(3));
    for (std::size_t r = 0; r < 3; ++r) {
        const RankTrace& got = (*back)[r];
        QCOMPARE(got.rank, int(r));
        QCOMPARE(got.clockOffsetNs, 0LL); // already on the run clock
        QCOMPARE(got.spans.size(), traces[r].spans.size());
        for (std::size_t i = 0; i < got.spans.size(); ++i) {
            QCOMPARE(got.spans[i].startNs, traces[r].spans[i].startNs + traces[r].clockOffsetNs);
            QCOMPARE(got.spans[i].durationNs(), traces[r].spans[i].durationNs());
        }
    }
    traces.push_back(sampleTrace(1));
    auto duplicate = toMergedChromeTraceJson(traces, ClockAlignment{});
    QVERIFY(!duplicate.ok());
    QVERIFY(QString::fromStdString(duplicate.error().message).contains("rank 1 appears twice"));
}

void TestProfilerChromeTrace::alignByReferenceEvent()
{
    // The barrier ends together on both ranks; rank 1's clock reads 7000 ns more.
    RankTrace r0;
    r0.rank = 0;
    r0.spans.push_back(span(Lane::Host, 100, 500, "barrier", "barrier"));
    r0.spans.push_back(span(Lane::Compute, 600, 900, "forward", "forward"));
    RankTrace r1;
    r1.rank = 1;
    r1.spans.push_back(span(Lane::Host, 7300, 7500, "barrier", "barrier"));
    r1.spans.push_back(span(Lane::Compute, 7600, 7950, "forward", "forward"));
    ClockAlignment align;
    align.mode = ClockAlignment::Mode::ReferenceEvent;
    align.referenceName = "barrier";
    auto offsets = clockOffsets({r0, r1}, align);
    QVERIFY(offsets.ok());
    QVERIFY((*offsets == std::vector<std::int64_t>{0, -7000}));
    align.alignOnEnd = false;
    QVERIFY((*clockOffsets({r0, r1}, align) == std::vector<std::int64_t>{0, -7200}));

    align.alignOnEnd = true;
    auto merged = toMergedChromeTraceJson({r0, r1}, align);
    QVERIFY(merged.ok());
    auto back = parseChromeTrace(*merged);
    QVERIFY(back.ok());
    QCOMPARE((*back)[1].spans[0].endNs, 500LL);
    QCOMPARE((*back)[1].spans[1].startNs, 600LL);

    RankTrace r2;
    r2.rank = 2;
    r2.spans.push_back(span(Lane::Compute, 0, 1, "forward", "forward"));
    auto missing = clockOffsets({r0, r1, r2}, align);
    QVERIFY(!missing.ok());
    QVERIFY(QString::fromStdString(missing.error().message).contains("cannot align rank 2: it has no span named 'barrier'"));
}

void TestProfilerChromeTrace::filesOnDisk()
{
    QTemporaryDir dir;
    const std::filesystem::path base = dir.path().toStdString();
    const RankTrace t = sampleTrace(1);
    QVERIFY(writeRankTrace(base / "traces" / "rank1.json", t).ok());
    auto back = readChromeTrace(base / "traces" / "rank1.json");
    QVERIFY(back.ok());
    QVERIFY(back->front() == t);
    QVERIFY(writeMergedTrace(base / "traces" / "merged.json", {sampleTrace(0), t}, ClockAlignment{}).ok());
    QCOMPARE(readChromeTrace(base / "traces" / "merged.json")->size(), std::size_t(2));

    auto missing = readChromeTrace(base / "nope.json");
    QVERIFY(!missing.ok());
    QVERIFY(QString::fromStdString(missing.error().message).contains("nope.json"));
    auto unwritable = writeRankTrace(base / "traces" / "rank1.json" / "x.json", t);
    QVERIFY(!unwritable.ok());
    QVERIFY(QString::fromStdString(unwritable.error().message).contains("cannot write trace file"));
}

void TestProfilerChromeTrace::badInputIsAnError_data()
{
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("message");

    const QByteArray x = "{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":2";
    QTest::newRow("not JSON") << QByteArray("hello") << "not valid JSON (at byte";
    QTest::newRow("truncated") << QByteArray("{\"traceEvents\":[{\"name\":\"a\",") << "not valid JSON";
    QTest::newRow("empty") << QByteArray("") << "not valid JSON";
    QTest::newRow("a number") << QByteArray("42") << "got number";
    QTest::newRow("object without traceEvents") << QByteArray("{}") << "expected a 'traceEvents' array";
    QTest::newRow("traceEvents not an array") << QByteArray("{\"traceEvents\":{}}") << "'traceEvents' array";
    QTest::newRow("event not an object") << QByteArray("[1]") << "traceEvents[0] (ph '?'): an event must be an object";
    QTest::newRow("ph missing") << QByteArray("[{\"name\":\"a\"}]") << "'ph' is missing";
    QTest::newRow("ph a number") << QByteArray("[{\"ph\":1}]") << "'ph' must be a string, got number";
    QTest::newRow("ts missing") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"dur\":2}]")
                                << "traceEvents[0] (ph 'X'): 'ts' must be a number of µs, but it is missing";
    QTest::newRow("ts a string") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":\"1\",\"dur\":2}]")
                                 << "'ts' must be a number of µs, got string";
    QTest::newRow("dur negative") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":-2}]")
                                  << "'dur' is out of range (-2 µs), it must be >= 0";
    QTest::newRow("ts huge") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1e300,\"dur\":2}]")
                             << "'ts' is out of range";
    QTest::newRow("pid a string") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":\"p\",\"tid\":1,\"ts\":1,\"dur\":2}]")
                                  << "'pid' must be an integer, got string";
    QTest::newRow("pid too large") << QByteArray(
        "[{\"name\":\"a\",\"ph\":\"X\",\"pid\":99999999999,\"tid\":1,\"ts\":1,\"dur\":2}]")
                                   << "'pid' is out of range";
    QTest::newRow("tid an object") << QByteArray("[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":{},\"ts\":1,\"dur\":2}]")
                                   << "'tid' must be an integer or a string";
    QTest::newRow("name missing") << QByteArray("[{\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":2}]") << "'name' is missing";
    QTest::newRow("args an array") << QByteArray("[" + x + ",\"args\":[]}]") << "'args' must be an object, got array";
    QTest::newRow("unknown lane") << QByteArray("[" + x + ",\"args\":{\"lane\":\"gpu\"}}]")
                                  << "args.lane 'gpu' is not one of compute, communication, memory, host";
    QTest::newRow("bytes a string") << QByteArray("[" + x + ",\"args\":{\"bytes\":\"1MB\"}}]")
                                    << "'bytes' must be an integer, got string";
    QTest::newRow("bytes negative") << QByteArray("[" + x + ",\"args\":{\"bytes\":-1}}]") << "'bytes' is out of range";
    QTest::newRow("step a float") << QByteArray("[" + x + ",\"args\":{\"step\":1.5}}]")
                                  << "'step' must be an integer, got number";
    QTest::newRow("counter not numeric") << QByteArray(
        "[{\"name\":\"memory\",\"ph\":\"C\",\"pid\":0,\"ts\":1,\"args\":{\"allocated\":\"big\"}}]")
                                         << "counter series 'allocated' must be a number, got string";
    QTest::newRow("thread_name without args") << QByteArray("[{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1}]")
                                              << "'thread_name' metadata needs an 'args' object";
    QTest::newRow("deep nesting") << QByteArray(100, '[') + QByteArray(100, ']') << "nested deeper than 64 levels";
    QTest::newRow("newer version") << QByteArray("{\"traceEvents\":[],\"otherData\":{\"shardscope\":{\"version\":99}}}")
                                   << "version 99 is newer than this Shardscope reads";
    QTest::newRow("ranks not an array") << QByteArray(
        "{\"traceEvents\":[],\"otherData\":{\"shardscope\":{\"version\":1,\"ranks\":{}}}}")
                                        << "otherData.shardscope: 'ranks' must be an array";
    QTest::newRow("notes with a number") << QByteArray(
        "{\"traceEvents\":[],\"otherData\":{\"shardscope\":{\"version\":1,\"ranks\":[{\"rank\":0,"
        "\"notes\":[1]}]}}}") << "'notes' must be an array of strings";
    QTest::newRow("invalid UTF-8") << QByteArray("[{\"name\":\"\xff\xfe\",\"ph\":\"X\"}]") << "not valid JSON";
}

void TestProfilerChromeTrace::badInputIsAnError()
{
    QFETCH(QByteArray, json);
    QFETCH(QString, message);
    auto result = parseChromeTrace(json.toStdString(), "bad.json");
    QVERIFY(!result.ok());
    const QString got = QString::fromStdString(result.error().message);
    QVERIFY2(got.startsWith("bad.json: "), qPrintable(got));
    QVERIFY2(got.contains(message), qPrintable(got));
}

void TestProfilerChromeTrace::foreignKinetoLikeTrace()
{
    // What torch.profiler writes (abridged): no Shardscope metadata, the rank in distributedInfo,
    // pids that are OS processes and devices, Kineto's categories, and B/E and flow events.
    const QByteArray json =
        "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":3,\"world_size\":4},"
        "\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\",\"pid\":0,\"tid\":13,"
        "\"ts\":100.5,\"dur\":50,\"args\":{\"device\":0,\"stream\":13,\"correlation\":77}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void gemm<float>()\",\"pid\":0,\"tid\":7,\"ts\":90,\"dur\":40,"
        "\"args\":{\"device\":0}},"
        "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD (Pageable -> Device)\",\"pid\":0,\"tid\":7,"
        "\"ts\":10,\"dur\":5},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":4242,\"tid\":4242,\"ts\":85,\"dur\":3},"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":7,\"args\":{\"name\":\"stream 7\"}},"
        "{\"ph\":\"B\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":1},{\"ph\":\"E\",\"pid\":1,\"tid\":1,\"ts\":2},"
        "{\"ph\":\"s\",\"id\":1,\"name\":\"ac2g\",\"pid\":1,\"tid\":1,\"ts\":1}"
        "]}";
    auto result = parseChromeTrace(json.toStdString(), "kineto.json");
    QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
    QCOMPARE(result->size(), std::size_t(1));
    const RankTrace& t = result->front();
    QCOMPARE(t.rank, 3);
    QCOMPARE(t.spans.size(), std::size_t(4));
    std::map<std::string, Span> byName;
    for (const Span& s : t.spans)
        byName[s.name] = s;
    QCOMPARE(byName["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].lane, Lane::Communication);
    QCOMPARE(byName["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].startNs, 100500LL);
    QCOMPARE(byName["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].correlationId, 77ULL);
    QCOMPARE(byName["void gemm<float>()"].lane, Lane::Compute);
    QCOMPARE(QString::fromStdString(byName["void gemm<float>()"].track), QStringLiteral("stream 7"));
    QCOMPARE(byName["Memcpy HtoD (Pageable -> Device)"].lane, Lane::Memory);
    QCOMPARE(byName["aten::mm"].lane, Lane::Host);
    QCOMPARE(t.notes.size(), std::size_t(1));
    QVERIFY(QString::fromStdString(t.notes[0]).contains("B x1 E x1 s x1"));
}

void TestProfilerChromeTrace::mutationLoop()
{
    // Bounded fuzzing: byte-level mutations of a valid file and type swaps of its fields. Every
    // outcome must be a trace or an error with a message naming the file; never a crash, hang or
    // exception. Accepted traces must export and import again.
    const std::string seed = toChromeTraceJson(sampleTrace(1));
    const std::string mergedSeed = *toMergedChromeTraceJson({sampleTrace(0), sampleTrace(1)}, ClockAlignment{});
    std::mt19937 rng(424242);
    const std::string alphabet = "{}[]\":,-0123456789.eE tfnulXCMB\\\xc3\xa9\xff";
    const QJsonValue replacements[] = {QJsonValue(),    QJsonValue(true), QJsonValue(-1), QJsonValue(1e300),
                                       QJsonValue("x"), QJsonArray{},     QJsonObject{},  QJsonValue(2.5)};
    int accepted = 0;
    int rejected = 0;
    constexpr int kIterations = 4000;
    for (int iteration = 0; iteration < kIterations; ++iteration) {
        std::string text = iteration % 2 ? seed : mergedSeed;
        const int kind = int(rng() % 6);
        std::uniform_int_distribution<std::size_t> at(0, text.size() - 1);
        if (kind == 0) { // flip bytes
            for (int n = 1 + int(rng() % 4); n > 0; --n)
                text[at(rng)] = alphabet[rng() % alphabet.size()];
        } else if (kind == 1) { // delete a range
            const std::size_t from = at(rng);
            text.erase(from, std::min<std::size_t>(rng() % 64, text.size() - from));
        } else if (kind == 2) { // truncate
            text.resize(at(rng));
        } else if (kind == 3) { // duplicate a slice
            const std::size_t from = at(rng);
            const std::string slice = text.substr(from, rng() % 200);
            text.insert(at(rng), slice);
        } else { // replace one field of one event with a value of another type
            QJsonObject root = QJsonDocument::fromJson(bytes(text)).object();
            QJsonArray events = root.value("traceEvents").toArray();
            const int index = int(rng() % std::uint32_t(events.size()));
            QJsonObject event = events[index].toObject();
            const QStringList keys = event.keys();
            const QString key = keys[int(rng() % std::uint32_t(keys.size()))];
            if (kind == 4 || !event.value(key).isObject()) {
                event[key] = replacements[rng() % std::size(replacements)];
            } else {
                QJsonObject args = event.value(key).toObject();
                if (!args.isEmpty())
                    args[args.keys()[int(rng() % std::uint32_t(args.size()))]] = replacements[rng() % std::size(replacements)];
                event[key] = args;
            }
            events[index] = event;
            root["traceEvents"] = events;
            text = QJsonDocument(root).toJson(QJsonDocument::Compact).toStdString();
        }
        auto result = parseChromeTrace(text, "fuzz.json");
        if (result.ok()) {
            ++accepted;
            for (const RankTrace& t : *result) {
                auto again = parseChromeTrace(toChromeTraceJson(t), "again.json");
                QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
            }
        } else {
            ++rejected;
            const std::string& message = result.error().message;
            QVERIFY2(message.rfind("fuzz.json: ", 0) == 0 && message.size() > 20, message.c_str());
        }
    }
    QCOMPARE(accepted + rejected, kIterations);
    QVERIFY(rejected > kIterations / 10); // the mutations do reach the error paths
    QVERIFY(accepted > 0);
    qInfo("mutation loop: %d accepted, %d rejected", accepted, rejected);
}

QTEST_APPLESS_MAIN(TestProfilerChromeTrace)
#include "tst_profiler_chrome_trace.moc"
