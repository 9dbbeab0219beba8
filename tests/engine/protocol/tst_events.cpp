// The event protocol: every event type survives encode → decode with every field, and every bad
// line (garbled, truncated, wrong types, unknown type, future version) is an error that says why.

#include "engine/protocol/events.h"

#include <QtTest>

#include <cmath>
#include <limits>
#include <random>

using namespace shardscope::protocol;

namespace {

Event roundTrip(const Event& event)
{
    const std::string line = encodeEvent(event);
    if (line.find('\n') != std::string::npos)
        qFatal("encoded event spans lines");
    auto decoded = decodeEvent(line);
    if (!decoded)
        qFatal("decode failed: %s", decoded.error().message.c_str());
    return *decoded;
}

} // namespace

class TestEvents : public QObject {
    Q_OBJECT
private slots:
    void stepRoundTrip()
    {
        StepEvent step;
        step.step = 12;
        step.epoch = 1;
        step.loss = 2.5;
        step.localLoss = 2.25;
        step.lr = 3e-4;
        step.gradNorm = 0.75;
        step.lossScale = 32768.0;
        step.skipped = true;
        step.tokens = 4096;
        step.samples = 16;
        step.stepTime = 0.125;
        step.tokensPerS = 65536;
        step.mem.params = 1000;
        step.mem.grads = 2000;
        step.mem.optimizer = 8000;
        step.mem.rss = 1 << 30;
        step.comm.allReduce = 4000;
        Event event{kProtocolVersion, 3, 1700000000.5, step};
        const Event back = roundTrip(event);
        QCOMPARE(back.rank, 3);
        QCOMPARE(back.time, 1700000000.5);
        QCOMPARE(back.typeName(), std::string_view("step"));
        const auto& s = std::get<StepEvent>(back.body);
        QCOMPARE(s.step, 12);
        QCOMPARE(s.loss, 2.5);
        QCOMPARE(s.localLoss, 2.25);
        QCOMPARE(s.lr, 3e-4);
        QCOMPARE(s.gradNorm, 0.75);
        QVERIFY(s.lossScale);
        QCOMPARE(*s.lossScale, 32768.0);
        QVERIFY(s.skipped);
        QCOMPARE(s.tokens, 4096);
        QCOMPARE(s.samples, 16);
        QCOMPARE(s.stepTime, 0.125);
        QCOMPARE(s.tokensPerS, 65536.0);
        QCOMPARE(s.mem.params, 1000);
        QCOMPARE(s.mem.optimizer, 8000);
        QCOMPARE(s.mem.rss, std::int64_t(1) << 30);
        QCOMPARE(s.comm.allReduce, 4000);
    }

    void lossScaleIsOptional()
    {
        Event event{kProtocolVersion, 0, 1.0, StepEvent{}};
        const std::string line = encodeEvent(event);
        QVERIFY(line.find("loss_scale") == std::string::npos);
        QVERIFY(!std::get<StepEvent>(roundTrip(event).body).lossScale);
    }

    // #45 point 10: a script's reporter leaves out what it cannot know; that stays absent (not 0).
    void unreportedStepFieldsStayAbsent()
    {
        StepEvent step;
        step.step = 2;
        step.loss = 1.25;
        step.hasLr = step.hasGradNorm = step.hasTokens = false;
        const std::string line = encodeEvent({1, 0, 1.0, step});
        for (const char* key : {"\"lr\"", "\"grad_norm\"", "\"tokens\"", "\"tokens_per_s\""})
            QVERIFY2(line.find(key) == std::string::npos, line.c_str());
        const StepEvent back = std::get<StepEvent>(roundTrip({1, 0, 1.0, step}).body);
        QVERIFY(!back.hasLr && !back.hasGradNorm && !back.hasTokens);
        QCOMPARE(back.loss, 1.25);
        const StepEvent engine = std::get<StepEvent>(roundTrip({1, 0, 1.0, StepEvent{}}).body);
        QVERIFY(engine.hasLr && engine.hasGradNorm && engine.hasTokens); // an engine rank's: all of them
    }

    void otherTypesRoundTrip()
    {
        QCOMPARE(std::get<HelloEvent>(roundTrip({1, 0, 1.0, HelloEvent{42, "host", "cuda:1", "2.14.1", 4, 1, 0}}).body).device,
                 std::string("cuda:1"));
        EvalEvent eval{7, 1.5, {{"accuracy", 0.5}}, {{"Once upon", " a time\n\"quoted\""}}};
        const EvalEvent evalBack = std::get<EvalEvent>(roundTrip({1, 0, 1.0, eval}).body);
        QCOMPARE(evalBack.metrics.at("accuracy"), 0.5);
        QCOMPARE(evalBack.metrics.size(), std::size_t(1)); // the samples are not a metric
        QCOMPARE(evalBack.samples.size(), std::size_t(1));
        QCOMPARE(evalBack.samples[0].prompt, std::string("Once upon"));
        QCOMPARE(evalBack.samples[0].text, std::string(" a time\n\"quoted\""));
        // A number named samples (reporter.eval(loss, samples=N)) stays a metric, as before.
        const auto numeric = decodeEvent(R"({"v":1,"type":"eval","rank":0,"time":1,"step":1,"loss":1,"samples":64})");
        QVERIFY(numeric);
        QCOMPARE(std::get<EvalEvent>(numeric->body).metrics.at("samples"), 64.0);
        QVERIFY(std::get<EvalEvent>(numeric->body).samples.empty());
        // Samples of another shape are an error, not dropped.
        QVERIFY(!decodeEvent(R"({"v":1,"type":"eval","rank":0,"time":1,"step":1,"loss":1,"samples":[{"prompt":1}]})"));
        QCOMPARE(
            std::get<TraceEvent>(roundTrip({1, 0, 1.0, TraceEvent{"t.json", "host", {1, 2, 0, 0.5, 0.25}}}).body).summary.overlap,
            0.25);
        QCOMPARE(std::get<CheckpointEvent>(roundTrip({1, 0, 1.0, CheckpointEvent{5, "c", "state", 99}}).body).bytes, 99);
        QCOMPARE(std::get<LogEvent>(roundTrip({1, 0, 1.0, LogEvent{"info", "a \"quoted\"\nline"}}).body).message,
                 std::string("a \"quoted\"\nline"));
        QCOMPARE(std::get<ErrorEvent>(roundTrip({1, 0, 1.0, ErrorEvent{"nonfinite", "loss is nan"}}).body).kind,
                 std::string("nonfinite"));
        QCOMPARE(std::get<DoneEvent>(roundTrip({1, 0, 1.0, DoneEvent{"completed", 100, 61.5}}).body).steps, 100);
        const MemoryStats mem{.params = 1, .grads = 2, .peakParams = 3, .peakGrads = 4, .optimizer = 5, .rss = 8};
        const MemoryStats read = std::get<MemoryEvent>(roundTrip({1, 0, 1.0, MemoryEvent{mem}}).body).mem;
        QCOMPARE(read.rss, 8);
        QCOMPARE(read.peakParams, 3);
        QCOMPARE(read.peakGrads, 4);
        QCOMPARE(read.optimizer, 5);
    }

    // #43 point 4: a non-finite value is kept as what it is (NaN, +-infinity), never dropped: the
    // engine writes it as a string, earlier writers wrote NaN as null, Python's json.dumps writes
    // bare NaN / Infinity (not JSON); a string that merely contains those words is left alone.
    void nonFiniteValuesSurvive()
    {
        StepEvent step;
        step.step = 6;
        step.loss = std::numeric_limits<double>::quiet_NaN();
        step.gradNorm = std::numeric_limits<double>::infinity();
        step.lr = -std::numeric_limits<double>::infinity();
        const std::string line = encodeEvent({kProtocolVersion, 0, 1.0, step});
        QVERIFY2(line.find("\"loss\":\"NaN\"") != std::string::npos, line.c_str());
        const auto back = std::get<StepEvent>(roundTrip({kProtocolVersion, 0, 1.0, step}).body);
        QCOMPARE(back.step, 6);
        QVERIFY(std::isnan(back.loss));
        QCOMPARE(back.gradNorm, std::numeric_limits<double>::infinity());
        QCOMPARE(back.lr, -std::numeric_limits<double>::infinity());
        EvalEvent eval{7, std::numeric_limits<double>::quiet_NaN(), {{"accuracy", std::numeric_limits<double>::quiet_NaN()}}, {}};
        const auto evalBack = std::get<EvalEvent>(roundTrip({1, 0, 1.0, eval}).body);
        QVERIFY(std::isnan(evalBack.loss) && std::isnan(evalBack.metrics.at("accuracy")));

        auto fromNull = decodeEvent(R"({"v":1,"type":"step","rank":1,"time":1,"step":3,"loss":null})");
        QVERIFY2(fromNull.ok(), fromNull.ok() ? "" : fromNull.error().message.c_str());
        QVERIFY(std::isnan(std::get<StepEvent>(fromNull->body).loss));
        auto fromPython = decodeEvent(R"({"v":1,"type":"step","rank":1,"time":1,"step":3,"loss":NaN,"grad_norm":-Infinity})");
        QVERIFY2(fromPython.ok(), fromPython.ok() ? "" : fromPython.error().message.c_str());
        QVERIFY(std::isnan(std::get<StepEvent>(fromPython->body).loss));
        QCOMPARE(std::get<StepEvent>(fromPython->body).gradNorm, -std::numeric_limits<double>::infinity());
        // A bare NaN beside the words in a string: only the bare one is read as a number. (Not a raw
        // string: moc misreads an escaped quote inside one.)
        auto words = decodeEvent("{\"v\":1,\"type\":\"hello\",\"rank\":0,\"time\":1,\"pid\":1,\"device\":\"cpu\","
                                 "\"world_size\":1,\"peak_flops\":NaN,\"host\":\"loss is NaN, \\\"Infinity\\\"\"}");
        QVERIFY2(words.ok(), words.ok() ? "" : words.error().message.c_str());
        QCOMPARE(std::get<HelloEvent>(words->body).host, std::string("loss is NaN, \"Infinity\""));
        QVERIFY(std::isnan(std::get<HelloEvent>(words->body).peakFlops));
    }

    void badLines_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("expected");
        QTest::newRow("truncated") << "{\"v\":1,\"type\":\"step\",\"rank\":0,\"ti"
                                   << "not valid JSON";
        QTest::newRow("empty") << ""
                               << "not valid JSON";
        QTest::newRow("array") << "[1,2]"
                               << "must be a JSON object";
        QTest::newRow("no type") << "{\"v\":1,\"rank\":0,\"time\":1}"
                                 << "missing field 'type'";
        QTest::newRow("unknown type") << "{\"v\":1,\"type\":\"bogus\",\"rank\":0,\"time\":1}"
                                      << "unknown event type 'bogus'";
        QTest::newRow("future version")
            << "{\"v\":99,\"type\":\"log\",\"rank\":0,\"time\":1,\"level\":\"info\",\"message\":\"x\"}"
            << "newer than this build";
        QTest::newRow("loss is a string") << "{\"v\":1,\"type\":\"step\",\"rank\":0,\"time\":1,\"step\":1,\"loss\":\"high\"}"
                                          << "field 'loss' should be a number, not the string 'high'";
        QTest::newRow("nested wrong type")
            << "{\"v\":1,\"type\":\"step\",\"rank\":0,\"time\":1,\"step\":1,\"loss\":1,\"mem\":{\"rss\":\"x\"}}"
            << "field 'mem.rss' should be an integer";
        QTest::newRow("step without loss") << "{\"v\":1,\"type\":\"step\",\"rank\":0,\"time\":1,\"step\":1}"
                                           << "step event: missing field 'loss'";
        // #43: bounds whoever reads a file can trust (an imported world_size of 2e9 sized a table).
        QTest::newRow("negative rank") << "{\"v\":1,\"type\":\"log\",\"rank\":-1,\"time\":1,\"level\":\"info\",\"message\":\"x\"}"
                                       << "rank -1 is not a rank (0 to 1048575)";
        QTest::newRow("huge rank")
            << "{\"v\":1,\"type\":\"log\",\"rank\":2147483647,\"time\":1,\"level\":\"info\",\"message\":\"x\"}"
            << "rank 2147483647 is not a rank";
        QTest::newRow("time NaN") << "{\"v\":1,\"type\":\"log\",\"rank\":0,\"time\":NaN,\"level\":\"info\",\"message\":\"x\"}"
                                  << "time is not a finite number";
        QTest::newRow("world of 2e9")
            << "{\"v\":1,\"type\":\"hello\",\"rank\":0,\"time\":1,\"pid\":1,\"device\":\"cpu\",\"world_size\":2000000000}"
            << "world_size 2000000000 is not a number of ranks";
    }
    void badLines()
    {
        QFETCH(QString, line);
        QFETCH(QString, expected);
        auto decoded = decodeEvent(line.toStdString());
        QVERIFY(!decoded.ok());
        QVERIFY2(decoded.error().message.find(expected.toStdString()) != std::string::npos, decoded.error().message.c_str());
    }

    // Seeded mutations of valid lines (truncation, byte flips, insertions): the decoder never
    // crashes, and every rejection carries a message.
    void mutatedLinesNeverCrash()
    {
        StepEvent step;
        step.lossScale = 2.0;
        const std::vector<std::string> seeds = {
            encodeEvent({1, 1, 2.0, step}), encodeEvent({1, 0, 1.0, HelloEvent{1, "h", "cpu", "2", 2, 0, 0}}),
            encodeEvent({1, 0, 1.0, EvalEvent{1, 2, {{"acc", 1}}, {}}}), encodeEvent({1, 0, 1.0, DoneEvent{"failed", 1, 2}})};
        std::mt19937 rng(1234);
        int rejected = 0;
        for (int i = 0; i < 20000; ++i) {
            std::string line = seeds[rng() % seeds.size()];
            const int edits = 1 + int(rng() % 4);
            for (int e = 0; e < edits && !line.empty(); ++e) {
                const size_t pos = rng() % line.size();
                switch (rng() % 3) {
                case 0:
                    line.resize(pos);
                    break;
                case 1:
                    line[pos] = char(rng() % 256);
                    break;
                default:
                    line.insert(pos, 1, "{}[]\",:0e-"[rng() % 10]);
                    break;
                }
            }
            auto decoded = decodeEvent(line);
            if (!decoded) {
                ++rejected;
                QVERIFY(!decoded.error().message.empty());
            }
        }
        QVERIFY(rejected > 10000);
    }
};

QTEST_APPLESS_MAIN(TestEvents)
#include "tst_events.moc"
