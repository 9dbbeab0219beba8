#include "engine/train/mfu.h"

#include "engine/estimate/device_peaks.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#ifdef SHARDSCOPE_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace shardscope::train {

namespace {

using json = nlohmann::json;

constexpr const char* kCpuDtypes[] = {"float32", "bfloat16", "float16"};

std::string cpuModel()
{
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0)
            if (const auto colon = line.find(':'); colon != std::string::npos)
                return line.substr(line.find_first_not_of(" \t", colon + 1));
    return "unknown CPU";
}

int cpuCores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string utcNow()
{
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

// The file's object, or an empty one where it is missing; an error where it cannot be read as
// JSON (never overwritten then: it may be the user's).
Result<json> readPeaksFile(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        return json::object();
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find_first_not_of(" \t\r\n") == std::string::npos)
        return json::object();
    auto parsed = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object())
        return makeError("the machine peaks file " + path
                         + " is not a JSON object; fix or delete it (Shardscope measures the peaks again)");
    return parsed;
}

std::optional<MachinePeaks> peaksFrom(const json& file, const std::string& machine)
{
    const auto it = file.find(machine);
    if (it == file.end() || !it->is_object())
        return std::nullopt;
    MachinePeaks peaks;
    peaks.machine = machine;
    peaks.cores = it->value("cores", cpuCores());
    peaks.measuredAt = it->value("measured_at", "");
    for (const char* dtype : kCpuDtypes) {
        const auto value = it->find(dtype);
        if (value == it->end() || !value->is_number() || value->get<double>() <= 0)
            return std::nullopt; // incomplete: measured again
        peaks.flops[dtype] = value->get<double>();
    }
    return peaks;
}

// Every core, each dtype: square matmuls of up to 1024 (about 0.1 s each), the best of up to 5.
MachinePeaks measureMachine(const std::string& machine)
{
    MachinePeaks peaks;
    peaks.machine = machine;
    peaks.cores = cpuCores();
    peaks.measuredAt = utcNow();
    peaks.measuredNow = true;
    const int threads = at::get_num_threads();
    at::set_num_threads(peaks.cores);
    for (const char* dtype : kCpuDtypes) {
        // A small probe sizes the matmul to about 0.1 s: an emulated dtype can be 100x slower
        // than float32 (float16 here), where 1024^3 would take seconds a matmul.
        const double probe = measureCpuMatmulFlops(dtype, 256, 2);
        const int n = std::clamp(static_cast<int>(std::cbrt(probe * 0.1 / 2) / 64) * 64, 256, 1024);
        peaks.flops[dtype] = std::max(probe, measureCpuMatmulFlops(dtype, n, 5));
    }
    at::set_num_threads(threads);
    return peaks;
}

Result<void> writePeaksFile(const std::string& path, json file)
{
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << file.dump(2) << "\n";
        if (!out.flush())
            return makeError("cannot write " + tmp);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec)
        return makeError("cannot write " + path + ": " + ec.message());
    return {};
}

} // namespace

const char* matmulDtype(precision::PrecisionMode mode)
{
    using precision::PrecisionMode;
    switch (mode) {
    case PrecisionMode::Fp16:
        return "float16";
    case PrecisionMode::Bf16:
    case PrecisionMode::Bf16Pure:
        return "bfloat16";
    case PrecisionMode::Fp8:
        return "float8";
    case PrecisionMode::No:
        break;
    }
    return "float32";
}

std::string machineKey()
{
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return std::string(host) + " / " + cpuModel() + " / " + std::to_string(cpuCores()) + " cores";
}

double measureCpuMatmulFlops(const char* dtype, int n, int repeats)
{
    const std::string name = dtype;
    // fp8 matmuls run emulated on the CPU; their peak is that of the bf16 they compute in.
    const at::ScalarType type = name == "float16" ? at::kHalf : name == "float32" ? at::kFloat : at::kBFloat16;
    at::NoGradGuard noGrad;
    const auto a = at::randn({n, n}, at::TensorOptions().dtype(type));
    const auto b = at::randn({n, n}, at::TensorOptions().dtype(type));
    auto c = at::mm(a, b); // warm-up: threads started, kernels chosen
    double best = 0, spent = 0;
    for (int i = 0; i < repeats && (i < 2 || spent < 1.0); ++i) {
        const auto start = std::chrono::steady_clock::now();
        at::mm_out(c, a, b);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        spent += seconds;
        if (seconds > 0)
            best = std::max(best, 2.0 * n * n * static_cast<double>(n) / seconds);
    }
    return best;
}

Result<MachinePeaks> cpuMachinePeaks(const std::string& peaksFile)
{
    const std::string machine = machineKey();
    if (peaksFile.empty())
        return measureMachine(machine);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(peaksFile).parent_path(), ec);
    const std::string lockPath = peaksFile + ".lock";
    const int lock = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0)
        return makeError("cannot open " + lockPath + ": " + std::strerror(errno));
    while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) { }
    auto result = [&]() -> Result<MachinePeaks> {
        auto file = readPeaksFile(peaksFile);
        if (!file)
            return file.error();
        if (auto kept = peaksFrom(*file, machine))
            return *kept;
        MachinePeaks measured = measureMachine(machine);
        json entry = {
            {"cores", measured.cores},
            {"measured_at", measured.measuredAt},
            {"how", std::string("best of up to 5 square matmuls (n up to 1024, about 0.1 s each) per dtype on every core (torch ")
                        + TORCH_VERSION + ")"}};
        for (const auto& [dtype, flops] : measured.flops)
            entry[dtype] = flops;
        (*file)[machine] = entry;
        if (auto written = writePeaksFile(peaksFile, std::move(*file)); !written)
            return written.error();
        return measured;
    }();
    ::close(lock); // releases the lock
    return result;
}

DevicePeak cpuRankPeak(const MachinePeaks& machine, const std::string& dtype, int threads)
{
    const double share = static_cast<double>(std::clamp(threads, 1, machine.cores)) / machine.cores;
    const double fp32 = machine.flops.at("float32");
    // float8 runs its matmuls in bfloat16 here; emulated whatever bfloat16 is.
    const std::string computed = dtype == "float8" ? "bfloat16" : dtype;
    const auto own = machine.flops.find(computed);
    DevicePeak peak;
    peak.emulated = dtype == "float8" || (own != machine.flops.end() && own->second < fp32);
    const bool ownUnit = own != machine.flops.end() && own->second >= fp32;
    peak.dtype = ownUnit ? computed : "float32";
    peak.flops = share * (ownUnit ? own->second : fp32);
    const int used = std::clamp(threads, 1, machine.cores);
    char how[256];
    std::snprintf(how, sizeof how, "%s on %d of %d cores: %.4g TFLOP/s on the machine", peak.dtype.c_str(), used, machine.cores,
                  (ownUnit ? own->second : fp32) / 1e12);
    peak.how = std::string(how) + ", measured "
               + (machine.measuredNow ? std::string("now, kept for this machine")
                                      : "once for this machine, " + machine.measuredAt)
               + " (" + machine.machine + ")";
    if (peak.emulated) {
        char note[256];
        std::snprintf(note, sizeof note,
                      "; %s is emulated on this CPU (%s matmuls at %.2g x float32's rate), so MFU is against %s", dtype.c_str(),
                      computed.c_str(), own != machine.flops.end() ? own->second / fp32 : 0.0, peak.dtype.c_str());
        peak.how += note;
    }
    return peak;
}

std::optional<DevicePeak> devicePeak(const c10::Device& device, precision::PrecisionMode mode, const std::string& peaksFile)
{
    const char* dtype = matmulDtype(mode);
    if (device.is_cpu()) {
        auto machine = cpuMachinePeaks(peaksFile);
        if (!machine) {
            // The file is unusable: measure for this run, and say so in the source.
            std::fprintf(stderr, "warning: %s\n", machine.error().message.c_str());
            machine = cpuMachinePeaks("");
        }
        DevicePeak peak = cpuRankPeak(*machine, dtype, at::get_num_threads());
        if (peaksFile.empty())
            peak.how += " [measured for this run only: no machine peaks file]";
        return peak;
    }
#ifdef SHARDSCOPE_HAVE_CUDA
    if (device.is_cuda()) {
        const std::string name = at::cuda::getDeviceProperties(device.index())->name;
        if (auto flops = config::gpuPeakFlops(name, dtype))
            return DevicePeak{*flops, dtype, name + ", " + dtype + " (datasheet, dense)", false};
    }
#endif
    return std::nullopt;
}

void addUtilisation(protocol::StepEvent& e, const config::FlopsPerToken& perToken, const std::optional<DevicePeak>& peak)
{
    if (e.stepTime <= 0 || e.tokens <= 0 || perToken.model <= 0)
        return;
    e.flops = perToken.model * static_cast<double>(e.tokens) / e.stepTime;
    if (peak && peak->flops > 0)
        e.mfu = e.flops / peak->flops;
}

} // namespace shardscope::train
