#include "ui/format.h"

#include "engine/common/byte_format.h"

#include <QDateTime>
#include <QHash>

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
    return colors[((index % 10) + 10) % 10];
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
