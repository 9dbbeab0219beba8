#pragma once

// A collective's profiler span ends when the collective completes, on the thread that completes
// it (Gloo's worker, or NCCL's completion of its CUDA work), not when the training loop gets to
// wait for it: a bucket or a prefetched all-gather that finished early must not look as long as
// the time until its wait, or the trace would overstate how much communication overlaps compute.

#include "profiler/span_recorder.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace shardscope::parallel {

// Returns kNoSpan when the span will end at completion, else `span` itself: the work has no
// future (some of Gloo's collectives, e.g. its all-gather and reduce-scatter into one tensor,
// implement none), and the caller ends the span when it has waited for the work.
[[nodiscard]] inline profiler::SpanRecorder::SpanId endSpanAtCompletion(const c10::intrusive_ptr<c10d::Work>& work,
                                                                        profiler::SpanRecorder* recorder,
                                                                        profiler::SpanRecorder::SpanId span)
{
    if (!recorder || span == profiler::SpanRecorder::kNoSpan)
        return profiler::SpanRecorder::kNoSpan;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    try {
        future = work->getFuture();
    } catch (const c10::Error&) {
        return span; // "Work::getFuture not implemented"
    }
    if (!future)
        return span;
    future->addCallback([recorder, span](c10::ivalue::Future&) { recorder->end(span); });
    return profiler::SpanRecorder::kNoSpan;
}

// The other half: after waiting for the work, ends a span that could not end at completion.
inline void endSpanAfterWait(profiler::SpanRecorder* recorder, profiler::SpanRecorder::SpanId& span)
{
    if (recorder && span != profiler::SpanRecorder::kNoSpan)
        recorder->end(span);
    span = profiler::SpanRecorder::kNoSpan;
}

} // namespace shardscope::parallel
