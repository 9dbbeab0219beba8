#include "ui/format.h"

#include "engine/common/byte_format.h"

#include <QDateTime>
#include <QHash>

#include <algorithm>
#include <cmath>

namespace shardscope::ui {

QString formatBytes(double bytes) { return QString::fromStdString(shardscope::formatBytes(bytes)); }

QString formatDuration(double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return QStringLiteral("–");
    const auto total = static_cast<long long>(std::llround(seconds));
    const long long h = total / 3600, m = (total / 60) % 60, s = total % 60;
    if (h > 0)
        return QStringLiteral("%1h %2m").arg(h).arg(m, 2, 10, QLatin1Char('0'));
    if (m > 0)
        return QStringLiteral("%1m %2s").arg(m).arg(s, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1s").arg(s);
}

QColor paletteColor(int index)
{
    static const QColor colors[] = {{0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c}, {0xd6, 0x27, 0x28},
                                    {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b}, {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f},
                                    {0xbc, 0xbd, 0x22}, {0x17, 0xbe, 0xcf}};
    index = std::max(index, 0);
    const QColor base = colors[index % 10];
    const int cycle = index / 10;
    if (cycle == 0)
        return base;
    // Four shades (the base, darker, lighter, darker still), never near black or white on a white
    // chart; each round of four turns the hue a little and darkens a little (grey has no hue).
    static const double kShade[] = {1.0, 0.72, -0.35, 0.55}; // < 0: that much of the way to white
    const double lightness = static_cast<double>(base.lightnessF()) * (1.0 - 0.05 * std::min(cycle / 4, 4));
    const double shade = kShade[cycle % 4];
    const double shaded = shade < 0 ? lightness + (1 - lightness) * -shade : lightness * shade;
    const double hue = std::fmod(std::max(static_cast<double>(base.hslHueF()), 0.0) + 0.04 * (cycle / 4) + 1.0, 1.0);
    return QColor::fromHslF(static_cast<float>(hue), base.hslSaturationF(), static_cast<float>(shaded));
}

QColor workColor(WorkKind kind)
{
    // At least 75 apart in RGB from each of the ten base colours (tst_trace_page).
    switch (kind) {
    case WorkKind::Compute:
        return {0x1b, 0x2f, 0x5e}; // navy
    case WorkKind::Communication:
        return {0xf5, 0xd5, 0x5b}; // gold
    case WorkKind::Memory:
        return {0x9f, 0xe2, 0xbf}; // mint
    case WorkKind::Idle:
        return {0xdc, 0xdc, 0xe4}; // pale grey
    case WorkKind::Host:
        return {0xc4, 0xb0, 0x96}; // sand
    }
    return Qt::gray;
}

namespace {

QHash<std::int64_t, QColor>& chosenRunColors()
{
    static QHash<std::int64_t, QColor> colors;
    return colors;
}

} // namespace

QColor defaultRunColor(std::int64_t runId) { return paletteColor(static_cast<int>((runId - 1) % 10)); }

QColor runColor(std::int64_t runId) { return chosenRunColors().value(runId, defaultRunColor(runId)); }

void rememberRunColors(const std::vector<storage::RunSummary>& runs)
{
    auto& chosen = chosenRunColors();
    for (const auto& run : runs) {
        const QColor color(QString::fromStdString(run.color));
        if (!run.color.empty() && color.isValid())
            chosen.insert(run.id, color);
        else
            chosen.remove(run.id);
    }
}

QColor rankColor(int rank) { return paletteColor(rank); }

QString elidedName(const QString& name, int maxChars)
{
    if (name.size() <= maxChars)
        return name;
    const int tail = (maxChars - 1) / 3;
    return name.left(maxChars - 1 - tail) + QChar(0x2026) + name.right(tail);
}

QString formatNumber(double value)
{
    if (std::isnan(value))
        return QStringLiteral("nan");
    return QString::number(value, 'g', 4);
}

QString formatTime(double unixSeconds)
{
    return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(unixSeconds * 1000.0)).toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

QString statusText(storage::RunStatus status)
{
    return QString::fromLatin1(storage::statusName(status).data(), static_cast<qsizetype>(storage::statusName(status).size()));
}

QColor statusColor(storage::RunStatus status)
{
    using storage::RunStatus;
    switch (status) {
    case RunStatus::Pending:
        return QColor(0x80, 0x80, 0x80);
    case RunStatus::Running:
        return QColor(0x1f, 0x77, 0xb4);
    case RunStatus::Completed:
        return QColor(0x2c, 0xa0, 0x2c);
    case RunStatus::Failed:
        return QColor(0xd6, 0x27, 0x28);
    case RunStatus::Cancelled:
        return QColor(0xff, 0x7f, 0x0e);
    case RunStatus::Interrupted:
        return QColor(0x94, 0x67, 0xbd);
    }
    return {};
}

} // namespace shardscope::ui
