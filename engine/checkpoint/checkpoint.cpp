#include "engine/checkpoint/checkpoint.h"

#include "engine/checkpoint/checkpoint_paths.h"
#include "engine/common/peer_failure.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/recipe/recipe.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <stdexcept>

namespace shardscope::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "shardscope-checkpoint";
constexpr int kFormatVersion = 1;

std::string rankFile(const std::string& stem, int rank, const std::string& extension)
{
    return stem + "_rank" + std::to_string(rank) + extension;
}

void writeFileDurably(const fs::path& path, const std::string& text)
{
    {
        errno = 0;
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << text;
        out.close(); // flushes: a full disk often shows only here
        if (!out)
            throw std::runtime_error("cannot write " + path.string() + ": " + (errno ? std::strerror(errno) : "write failed")
                                     + " (disk full or read-only?)");
    }
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

void syncDirectory(const fs::path& dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

std::int64_t fileBytes(const fs::path& path)
{
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    return ec ? 0 : static_cast<std::int64_t>(size);
}

json compatibilityJson(const Compatibility& c)
{
    return {{"world_size", c.worldSize}, {"tensor_parallel", c.tensorParallel},
            {"strategy", c.strategy},    {"state_dict_type", c.stateDictType},
            {"precision", c.precision},  {"model", c.modelFingerprint}};
}

// This rank's files of one checkpoint, into `tmp`; returns the bytes written. Throws on a write error.
std::int64_t writeRankFiles(const SaveRequest& r, const fs::path& tmp, bool sharded)
{
    std::int64_t bytes = 0;
    if (sharded || r.rank == 0) {
        const fs::path model = tmp / (sharded ? rankFile("model", r.rank, ".safetensors") : std::string("model.safetensors"));
        writeSafetensors(model.string(), r.modelTensors, {{"format", "pt"}});
        bytes += fileBytes(model);
    }
    if (r.crashWhileWriting && r.rank == 0)
        ::_exit(9);
    const fs::path optimizer = tmp / rankFile("optimizer", r.rank, ".bin");
    writeFileDurably(optimizer, r.serializeOptimizer());
    bytes += fileBytes(optimizer);
    if (!sharded && r.rank == 0) {
        const fs::path full = tmp / "optimizer.safetensors";
        writeSafetensors(full.string(), r.fullOptimizerTensors, {{"format", "pt"}});
        bytes += fileBytes(full);
    }

    auto generator = at::detail::getDefaultCPUGenerator();
    at::Tensor rngState;
    {
        std::lock_guard<std::mutex> lock(generator.mutex());
        rngState = generator.get_state();
    }
    const fs::path random = tmp / rankFile("random_states", r.rank, ".safetensors");
    writeSafetensors(random.string(), {{"cpu", rngState}});
    bytes += fileBytes(random);
    if (!r.fp8State.empty()) {
        const fs::path fp8 = tmp / rankFile("fp8_state", r.rank, ".safetensors");
        writeSafetensors(fp8.string(), r.fp8State, {{"format", "pt"}});
        bytes += fileBytes(fp8);
    }

    json state = {{"step", r.loop.step},
                  {"data_epoch", r.loop.dataEpoch},
                  {"data_position", r.loop.dataPosition},
                  {"skipped_steps", r.loop.skippedSteps},
                  {"scaler_growth_tracker", r.loop.scalerGrowthTracker}};
    if (r.loop.lossScale)
        state["loss_scale"] = *r.loop.lossScale;
    writeFileDurably(tmp / rankFile("state", r.rank, ".json"), state.dump(2));
    return bytes;
}

} // namespace

std::pair<std::string, std::int64_t> saveCheckpoint(const SaveRequest& r)
{
    const fs::path final = fs::path(r.checkpointsDir) / ("step_" + std::to_string(r.loop.step));
    const fs::path tmp = fs::path(r.checkpointsDir) / ("step_" + std::to_string(r.loop.step) + ".tmp");
    if (r.rank == 0) {
        std::error_code ec;
        fs::remove_all(tmp, ec); // a leftover of a crashed attempt
        fs::create_directories(tmp);
    }
    r.barrier();

    std::int64_t bytes = 0;
    const bool sharded = r.compatibility.stateDictType == "SHARDED_STATE_DICT";
    std::string failure;
    try {
        bytes = writeRankFiles(r, tmp, sharded);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    // Every rank takes part in this agreement whether or not its own writing failed, so no rank is
    // left in a barrier; each then reports the failure.
    if (!r.allRanksOk(failure.empty()) || !failure.empty()) {
        // Nothing under a final name was touched: the newest complete checkpoint is still whole.
        const auto previous = completeCheckpoints(r.checkpointsDir);
        const std::string message = "the checkpoint at step " + std::to_string(r.loop.step) + " was not saved: "
                                    + (failure.empty()
                                           ? std::string("another rank could not write its part (its error names the file)")
                                           : failure)
                                    + ". "
                                    + (previous.empty() ? std::string("No earlier checkpoint exists. ")
                                                        : "The previous checkpoint " + previous.front().string() + " is intact. ")
                                    + "Free space in " + r.checkpointsDir
                                    + " (or keep fewer: training.checkpoint_keep), then "
                                      "resume with --resume_from_checkpoint latest.";
        // Only a rank whose own part failed has the cause; the others' failure follows from it.
        if (failure.empty())
            throw PeerFailure(message);
        throw std::runtime_error(message);
    }

    if (r.rank == 0) {
        json files = json::array();
        for (const auto& entry : fs::directory_iterator(tmp))
            files.push_back(entry.path().filename().string());
        json manifest = {{"format", kFormat},
                         {"version", kFormatVersion},
                         {"step", r.loop.step},
                         {"compatibility", compatibilityJson(r.compatibility)},
                         {"files", files}};
        writeFileDurably(tmp / "manifest.json", manifest.dump(2));
        syncDirectory(tmp);
        std::error_code ec;
        fs::remove_all(final, ec); // an older attempt at the same step
        fs::rename(tmp, final);
        syncDirectory(r.checkpointsDir);
        if (r.keep > 0) {
            const auto all = completeCheckpoints(r.checkpointsDir);
            for (std::size_t i = static_cast<std::size_t>(r.keep); i < all.size(); ++i)
                fs::remove_all(all[i], ec);
        }
    }
    r.barrier();
    return {final.string(), bytes};
}

Result<LoadedCheckpoint> loadCheckpoint(const std::string& path, int rank, const Compatibility& expected)
{
    const fs::path dir(path);
    const fs::path manifestPath = dir / "manifest.json";
    if (!fs::exists(manifestPath))
        return makeError("checkpoint " + path
                         + " is incomplete (no manifest.json: its writing was interrupted); "
                           "resume from an earlier one, or use --resume_from_checkpoint latest");
    std::ifstream in(manifestPath);
    json manifest = json::parse(in, nullptr, false);
    if (manifest.is_discarded() || manifest.value("format", "") != kFormat)
        return makeError(manifestPath.string() + " is not a Shardscope checkpoint manifest");
    if (manifest.value("version", 0) > kFormatVersion)
        return makeError(path + " was written by a newer Shardscope (format version "
                         + std::to_string(manifest.value("version", 0)) + ")");
    const json have = manifest["compatibility"];
    const json want = compatibilityJson(expected);
    const bool sharded = expected.stateDictType == "SHARDED_STATE_DICT";
    const int savedWorld = have.value("world_size", 0);
    const int savedTensorParallel = have.value("tensor_parallel", 1); // absent before 2026-12-07: 1
    const bool reshard = (savedWorld != expected.worldSize || savedTensorParallel != expected.tensorParallel) && !sharded
                         && fs::exists(dir / "optimizer.safetensors");
    for (const auto& [key, value] : want.items()) {
        if ((key == "world_size" || key == "tensor_parallel") && reshard)
            continue; // a full state dict loads at any world size and tp_size
        if (key == "tensor_parallel" && savedTensorParallel != expected.tensorParallel)
            return makeError("checkpoint " + path + " does not fit this run: it was written with tp_size "
                             + std::to_string(savedTensorParallel) + ", this run's is " + std::to_string(expected.tensorParallel)
                             + (sharded ? ". A SHARDED_STATE_DICT checkpoint holds each rank's slices and resumes only with "
                                          "its own tp_size; save with fsdp_state_dict_type FULL_STATE_DICT to resume at another."
                                        : ". It has no full optimizer state (written before it existed); resume it with its "
                                          "own tp_size."));
        if (key == "tensor_parallel")
            continue;
        if (key == "model" && !expected.legacyModelFingerprint.empty()
            && have.value(key, json()) == expected.legacyModelFingerprint)
            continue; // written before the typed fingerprint, for the same model
        if (have.value(key, json()) != value) {
            std::string hint = "Launch with the checkpoint's settings to resume it.";
            if (key == "world_size")
                hint = sharded ? "A SHARDED_STATE_DICT checkpoint resumes only at its own world size; save with "
                                 "fsdp_state_dict_type FULL_STATE_DICT to resume at another."
                               : "This checkpoint has no full optimizer state (written before it existed); resume it at "
                                 "its own world size.";
            return makeError("checkpoint " + path + " does not fit this run: its " + key + " is " + have.value(key, json()).dump()
                             + ", this run's is " + value.dump() + ". " + hint);
        }
    }

    LoadedCheckpoint loaded;
    loaded.path = path;
    // At another world size, the loop state and RNG are rank 0's (the global position is the same).
    const int sourceRank = reshard ? 0 : rank;
    const fs::path model = dir / (sharded ? rankFile("model", rank, ".safetensors") : std::string("model.safetensors"));
    const fs::path state = dir / rankFile("state", sourceRank, ".json");
    const fs::path random = dir / rankFile("random_states", sourceRank, ".safetensors");
    loaded.optimizerFile =
        (dir / (reshard ? std::string("optimizer.safetensors") : rankFile("optimizer", rank, ".bin"))).string();
    for (const auto& p : {model, state, random, fs::path(loaded.optimizerFile)})
        if (!fs::exists(p))
            return makeError("checkpoint " + path + " lacks " + p.filename().string() + " though its manifest is complete");
    // The fp8 state is optional (tensorwise scaling has none), so the manifest says whether it was written.
    loaded.fp8StateFile = rankFile("fp8_state", rank, ".safetensors");
    const json listed = manifest.value("files", json::array());
    const bool hasFp8State = !reshard && std::find(listed.begin(), listed.end(), loaded.fp8StateFile) != listed.end();
    if (hasFp8State && !fs::exists(dir / loaded.fp8StateFile))
        return makeError("checkpoint " + path + " lacks " + loaded.fp8StateFile + " though its manifest lists it");
    try {
        loaded.modelTensors = readSafetensors(model.string());
        if (hasFp8State)
            loaded.fp8State = readSafetensors((dir / loaded.fp8StateFile).string());
        if (reshard) {
            loaded.savedWorldSize = savedWorld;
            loaded.savedTensorParallel = savedTensorParallel;
            loaded.fullOptimizerTensors = readSafetensors(loaded.optimizerFile);
        }
        std::ifstream stateIn(state);
        const json s = json::parse(stateIn);
        loaded.loop.step = s.at("step").get<std::int64_t>();
        loaded.loop.dataEpoch = s.at("data_epoch").get<std::int64_t>();
        loaded.loop.dataPosition = s.at("data_position").get<std::int64_t>();
        if (reshard) {
            // Every rank consumed the same number of samples; the epoch's global position is
            // what carries over.
            const std::int64_t global = loaded.loop.dataPosition * savedWorld;
            if (global % expected.worldSize != 0)
                return makeError("checkpoint " + path + ": its " + std::to_string(global)
                                 + " samples of the epoch do not split "
                                   "evenly over "
                                 + std::to_string(expected.worldSize)
                                 + " ranks; resume at a world size "
                                   "that divides them");
            loaded.loop.dataPosition = global / expected.worldSize;
        }
        loaded.loop.skippedSteps = s.value("skipped_steps", std::int64_t{0});
        loaded.loop.scalerGrowthTracker = s.value("scaler_growth_tracker", std::int64_t{0});
        if (s.contains("loss_scale"))
            loaded.loop.lossScale = s["loss_scale"].get<double>();
        auto rng = readSafetensors(random.string());
        auto generator = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(generator.mutex());
        generator.set_state(rng.at("cpu"));
    } catch (const json::exception& e) {
        // nlohmann's text starts with its own "[json.exception.type_error.302] ": say which file.
        std::string what = e.what();
        if (const auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
            what = what.substr(close + 2);
        return makeError("checkpoint " + path + ": " + state.filename().string() + " is not as Shardscope wrote it (" + what
                         + "); the checkpoint was edited or damaged: resume from another one");
    } catch (const std::exception& e) {
        return makeError("checkpoint " + path + " could not be read: " + e.what());
    }
    return loaded;
}

} // namespace shardscope::checkpoint
