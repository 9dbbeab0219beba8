#pragma once

// Small text helpers shared by the pages: the same byte, duration and number spellings everywhere
// (and the same as `shardscope runs list`).

#include "storage/run_types.h"

#include <QColor>
#include <QString>

#include <string>

namespace shardscope::ui {

inline QString qs(const std::string& text) { return QString::fromStdString(text); }
QString formatBytes(double bytes);
QString formatDuration(double seconds); // 1s, 2m 05s, 3h 04m
QString formatNumber(double value); // 4 significant digits, NaN as "nan"
QString formatTime(double unixSeconds); // local yyyy-MM-dd HH:mm
QString statusText(storage::RunStatus status);
// A run name shortened for a title, a legend or a header (names can be hundreds of characters):
// its start and its end (where a timestamp or a sweep's mode is) kept, the middle elided. Where
// it is shown elided, the full name goes in a tooltip.
QString elidedName(const QString& name, int maxChars = 60);
QColor statusColor(storage::RunStatus status);

} // namespace shardscope::ui
