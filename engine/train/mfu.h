#pragma once

// Model FLOPs utilisation per step: the model's FLOPs per token (config::flopsPerToken) times the
// tokens a rank trained, over its step time, against the peak of the device the rank computes on.
// One peak per machine and precision, never one per run:
// - a GPU: the datasheet's dense figure for the dtype its matmuls run in (config::gpuPeakFlops);
// - a CPU: matmuls measured once for the machine (every core, float32, bfloat16 and float16) and
//   kept in the machine peaks file beside the history; a rank's share is its threads over the
//   cores. A dtype slower than float32 here has no unit of its own (it is emulated): its runs are
//   measured against float32's peak, the rate the hardware does that work at, and say so.
// Without a peaks file (a rank started by hand) the CPU is measured for the run and that is said.

#include "engine/common/result.h"
#include "engine/estimate/model_flops.h"
#include "engine/plan/precision_mode.h"
#include "engine/protocol/events.h"

#include <c10/core/Device.h>

#include <map>
#include <optional>
#include <string>

namespace shardscope::train {

struct DevicePeak {
    double flops = 0; // FLOP/s this rank can reach
    std::string dtype; // the dtype of that peak: the run's, or float32 where the run's is emulated
    std::string how; // for the log and the Run page: "NVIDIA H100 80GB HBM3, bfloat16 (datasheet, dense)", ...
    bool emulated = false; // the run's matmul dtype has no unit of its own on this device
};

// The dtype the run's matmuls use: float32 ("no"; TF32 is off, torch's default), float16,
// bfloat16 (bf16 and bf16-pure), float8.
const char* matmulDtype(precision::PrecisionMode mode);

// The CPU peaks of this machine, all cores, FLOP/s by dtype ("float32", "bfloat16", "float16").
struct MachinePeaks {
    std::string machine; // "host / CPU model / N cores": the key in the peaks file
    int cores = 1;
    std::map<std::string, double> flops;
    std::string measuredAt; // ISO 8601, UTC
    bool measuredNow = false; // this call measured them (the file had none for this machine)
};

// "host / CPU model / N cores", from gethostname and /proc/cpuinfo.
std::string machineKey();

// This machine's peaks from `peaksFile`, measured and added to it first when it has none for this
// machine (under an exclusive lock of `peaksFile`.lock: the ranks starting together measure once,
// on an otherwise idle machine). An empty path measures without keeping.
Result<MachinePeaks> cpuMachinePeaks(const std::string& peaksFile);

// None: a GPU the table does not know. `peaksFile`: see cpuMachinePeaks.
std::optional<DevicePeak> devicePeak(const c10::Device& device, precision::PrecisionMode mode, const std::string& peaksFile);

// A CPU rank's peak for `dtype` from the machine's: its share (threads over cores) of the dtype's
// peak, or of float32's where the dtype is emulated (slower than float32; float8 always is here).
DevicePeak cpuRankPeak(const MachinePeaks& machine, const std::string& dtype, int threads);

// The best rate of `repeats` n x n x n matmuls in `dtype` on the CPU with the threads torch has, FLOP/s.
double measureCpuMatmulFlops(const char* dtype, int n = 512, int repeats = 8);

// Fills e.flops (and e.mfu when the peak is known) from the tokens and time the event holds.
void addUtilisation(protocol::StepEvent& e, const config::FlopsPerToken& perToken, const std::optional<DevicePeak>& peak);

} // namespace shardscope::train
