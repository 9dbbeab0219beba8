#pragma once

// Helpers of the profiler tests: intervals and spans written as short strings in _data() tables.

#include "profiler/analysis.h"
#include "profiler/trace_model.h"

#include <QString>
#include <QStringList>

#include <string>
#include <vector>

namespace profiler_test {

using namespace shardscope::profiler;

// "0-100 150-200" -> {{0,100},{150,200}} (ns).
inline std::vector<Interval> intervals(const QString& text)
{
    std::vector<Interval> out;
    const QStringList parts = text.split(QLatin1Char(' '), Qt::SkipEmptyParts);
    for (const QString& part : parts) {
        const QStringList ends = part.split(QLatin1Char('-'));
        out.push_back(Interval{ends.at(0).toLongLong(), ends.at(1).toLongLong()});
    }
    return out;
}

inline Span span(Lane lane, std::int64_t start, std::int64_t end, std::string name = "s", std::string category = "k",
                 std::int64_t step = -1)
{
    Span s;
    s.name = std::move(name);
    s.category = std::move(category);
    s.lane = lane;
    s.startNs = start;
    s.endNs = end;
    s.step = step;
    return s;
}

inline void addSpans(std::vector<Span>& spans, Lane lane, const QString& text, const std::string& category = "k")
{
    for (const Interval& i : intervals(text))
        spans.push_back(span(lane, i.startNs, i.endNs, category, category));
}

} // namespace profiler_test
