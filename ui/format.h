#pragma once

// Small text helpers shared by the pages: the same byte, duration and number spellings everywhere
// (and the same as `shardscope runs list`).

#include "storage/run_types.h"

#include <QColor>
#include <QString>

#include <string>
#include <vector>

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
// A tooltip that shows `text` as it is: Qt reads a tooltip that looks like markup as rich text, so
// recorded text (a run's name, an imported error) goes in escaped, inside a paragraph.
inline QString plainToolTip(const QString& text) { return QStringLiteral("<p>") + text.toHtmlEscaped() + QStringLiteral("</p>"); }
QColor statusColor(storage::RunStatus status);
// The workbench's colours, the same on every page. Tableau 10: distinguishable, and the order
// W&B and TensorBoard users know; from index 10 on the ten again, darker, then lighter, ... (run
// 11 and rank 10 were run 1's and rank 0's colour).
QColor paletteColor(int index);
// The colours of the kinds of work in traces (the Trace page's lanes and breakdowns): none near a
// rank's colour, which stands beside them there (communication was rank 1's orange).
enum class WorkKind { Compute, Communication, Memory, Idle, Host };
QColor workColor(WorkKind kind);
// A run's colour is the one its user chose (RunSummary::color), else follows from its history id
// (Runs, Run, Compare); a rank's from its number (the Run page's per-rank series, the Trace page's
// per-rank bars). The chosen colours are learnt from every run list the pages load
// (rememberRunColors), so that a page that knows only an id draws the run as Runs does. GUI thread.
QColor runColor(std::int64_t runId);
QColor defaultRunColor(std::int64_t runId);
void rememberRunColors(const std::vector<storage::RunSummary>& runs);
QColor rankColor(int rank);

} // namespace shardscope::ui
