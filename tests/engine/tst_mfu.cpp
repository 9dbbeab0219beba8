// MFU's peak (engine/train/mfu.h, #45 point 5): a CPU rank's share of the machine's peak, the
// dtype emulated where it is slower than float32, and the peaks kept once per machine in a file:
// measured when missing, read after, a file that is not JSON never overwritten.

#include "engine/train/mfu.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <sstream>

class TestMfu : public QObject {
    Q_OBJECT
private slots:
    // The CPU rank's peak: its share of the machine's (threads over cores); a dtype slower than
    // float32 here is emulated and judged against float32's peak; float8 always is on a CPU.
    void cpuRankPeakIsTheMachinesShare()
    {
        shardscope::train::MachinePeaks machine;
        machine.machine = "host / cpu / 4 cores";
        machine.cores = 4;
        machine.flops = {{"float32", 100e9}, {"bfloat16", 300e9}, {"float16", 10e9}};
        machine.measuredAt = "2026-12-06T00:00:00Z";
        const auto fp32 = shardscope::train::cpuRankPeak(machine, "float32", 2);
        QCOMPARE(fp32.flops, 50e9);
        QVERIFY(!fp32.emulated && fp32.dtype == "float32");
        QVERIFY2(fp32.how.find("once for this machine, 2026-12-06") != std::string::npos, fp32.how.c_str());
        const auto bf16 = shardscope::train::cpuRankPeak(machine, "bfloat16", 1);
        QCOMPARE(bf16.flops, 75e9);
        QVERIFY(!bf16.emulated && bf16.dtype == "bfloat16");
        const auto fp16 = shardscope::train::cpuRankPeak(machine, "float16", 4);
        QCOMPARE(fp16.flops, 100e9); // float32's: fp16 runs 10x slower here
        QVERIFY(fp16.emulated && fp16.dtype == "float32");
        QVERIFY2(fp16.how.find("float16 is emulated on this CPU (float16 matmuls at 0.1 x float32's rate)") != std::string::npos,
                 fp16.how.c_str());
        const auto fp8 = shardscope::train::cpuRankPeak(machine, "float8", 8); // more threads than cores: the whole machine
        QCOMPARE(fp8.flops, 300e9);
        QVERIFY(fp8.emulated && fp8.dtype == "bfloat16");
    }

    void machinePeaksAreMeasuredOnceAndKept()
    {
        QTemporaryDir dir;
        const std::string file = dir.filePath("machine-peaks.json").toStdString();
        auto first = shardscope::train::cpuMachinePeaks(file);
        QVERIFY2(first.ok(), first.ok() ? "" : first.error().message.c_str());
        QVERIFY(first->measuredNow);
        for (const char* dtype : {"float32", "bfloat16", "float16"})
            QVERIFY2(first->flops.at(dtype) > 0, dtype);
        QCOMPARE(first->machine, shardscope::train::machineKey());
        auto second = shardscope::train::cpuMachinePeaks(file);
        QVERIFY(second.ok());
        QVERIFY(!second->measuredNow); // read, not measured again
        QCOMPARE(second->flops, first->flops);
        QCOMPARE(second->measuredAt, first->measuredAt);

        // Not JSON (the user's, or broken): an error that says what to do, the file left as it was.
        std::ofstream(file) << "my notes";
        auto broken = shardscope::train::cpuMachinePeaks(file);
        QVERIFY(!broken.ok());
        QVERIFY2(broken.error().message.find("fix or delete it") != std::string::npos, broken.error().message.c_str());
        std::ifstream in(file);
        std::stringstream kept;
        kept << in.rdbuf();
        QCOMPARE(kept.str(), std::string("my notes"));
    }
};

QTEST_GUILESS_MAIN(TestMfu)
#include "tst_mfu.moc"
