// Scaler parity: our GradScaler (ATen's AMP kernels behind Accelerate-style calls) and
// torch.amp.GradScaler (tests/tools/grad_scaler_reference.py, same torch wheel) fed the same
// gradient sequence, with inf, NaN and scale-induced overflow injected at chosen steps, give the
// same scale trajectory, the same skipped steps and the same parameter values. Also: the
// autocast guard nests and restores.

#include "engine/precision/autocast.h"
#include "engine/precision/grad_scaler.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

using namespace shardscope::precision;

namespace {

const QString kPython = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/.venv/bin/python");
const QString kReference = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/tests/tools/grad_scaler_reference.py");

struct StepRecord {
    double scale = 0;
    bool skipped = false;
    double scaleAfter = 0;
    double w = 0;
};

// The same loop as the reference script, on our GradScaler.
QVector<StepRecord> runOurs(double initScale, std::int64_t growthInterval, const QJsonArray& coefficients)
{
    GradScalerOptions options;
    options.initScale = initScale;
    options.growthInterval = growthInterval;
    GradScaler scaler(options);
    auto w = torch::ones({4}, torch::requires_grad());
    torch::optim::SGD optimizer({w}, torch::optim::SGDOptions(0.1));
    QVector<StepRecord> out;
    for (const auto& c : coefficients) {
        const double coefficient = c.isString() ? c.toString().toDouble() : c.toDouble();
        optimizer.zero_grad(true);
        auto loss = (w * torch::full({4}, coefficient)).sum();
        StepRecord r;
        r.scale = scaler.currentScale();
        scaler.scale(loss).backward();
        scaler.unscale({w});
        r.skipped = scaler.foundInf();
        if (!r.skipped)
            optimizer.step();
        scaler.update();
        r.scaleAfter = scaler.currentScale();
        r.w = w[0].item<double>();
        out.push_back(r);
    }
    return out;
}

} // namespace

class TestGradScaler : public QObject {
    Q_OBJECT
private slots:
    void matchesTorchGradScaler_data()
    {
        QTest::addColumn<double>("initScale");
        QTest::addColumn<int>("growthInterval");
        QTest::addColumn<QString>("coefficients");
        QTest::newRow("inf and nan, growth every 3") << 1024.0 << 3 << "[1, 2, 3, 4, \"inf\", 1, \"nan\", 1, 1, 1, 1, 1, 1]";
        QTest::newRow("overflow by scaling") << 65536.0 << 2 << "[1, 1e34, 1e34, 1e34, 1, 1, 1, 1, \"-inf\", 1]";
        QTest::newRow("default interval, no growth") << 65536.0 << 2000 << "[0.5, -0.25, \"nan\", 0.125, 3]";
    }
    void matchesTorchGradScaler()
    {
        QFETCH(double, initScale);
        QFETCH(int, growthInterval);
        QFETCH(QString, coefficients);
        if (!QFile::exists(kPython))
            QSKIP("no project Python environment (.venv); run ./scripts/setup.sh");
        const auto array = QJsonDocument::fromJson(coefficients.toUtf8()).array();
        QJsonObject spec{{"init_scale", initScale}, {"growth_interval", growthInterval}, {"coefficients", array}};
        QProcess python;
        python.start(kPython, {kReference, QString::fromUtf8(QJsonDocument(spec).toJson(QJsonDocument::Compact))});
        QVERIFY(python.waitForFinished(120000));
        QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
        const auto reference = QJsonDocument::fromJson(python.readAllStandardOutput()).array();
        const auto ours = runOurs(initScale, growthInterval, array);
        QCOMPARE(ours.size(), reference.size());
        int skipped = 0;
        for (int i = 0; i < ours.size(); ++i) {
            const auto ref = reference[i].toObject();
            QCOMPARE(ours[i].scale, ref["scale"].toDouble());
            QCOMPARE(ours[i].skipped, ref["skipped"].toBool());
            QCOMPARE(ours[i].scaleAfter, ref["scale_after"].toDouble());
            QCOMPARE(ours[i].w, ref["w"].toDouble());
            skipped += ours[i].skipped;
        }
        QVERIFY(skipped >= 1); // every row injects at least one non-finite step
    }

    void stateRoundTrips()
    {
        GradScaler scaler(GradScalerOptions{});
        scaler.setState(512.0, 17);
        QCOMPARE(scaler.currentScale(), 512.0);
        QCOMPARE(scaler.growthTracker(), std::int64_t(17));
    }

    void autocastGuardNestsAndRestores()
    {
        QVERIFY(!at::autocast::is_autocast_enabled(at::kCPU));
        {
            AutocastGuard outer(at::kCPU, at::kBFloat16);
            auto a = torch::ones({2, 2});
            QCOMPARE(torch::mm(a, a).scalar_type(), at::kBFloat16);
            {
                AutocastGuard inner(at::kCPU, at::kFloat, /*enabled=*/false);
                QCOMPARE(torch::mm(a, a).scalar_type(), at::kFloat);
            }
            QVERIFY(at::autocast::is_autocast_enabled(at::kCPU));
            QCOMPARE(at::autocast::get_autocast_dtype(at::kCPU), at::kBFloat16);
        }
        QVERIFY(!at::autocast::is_autocast_enabled(at::kCPU));
    }
};

QTEST_APPLESS_MAIN(TestGradScaler)
#include "tst_grad_scaler.moc"
