#include "engine/parallel/sharded.h"
#include "engine/dist/wait_clock.h"

#include "engine/parallel/activation_checkpoint.h"
#include "engine/parallel/collective_spans.h"
#include "engine/precision/float8_linear.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace shardscope::parallel {

namespace {

// Note [Freeing a unit's parameters]: the parameters stay views of `full` for the whole run (so
// autograd's saved references to them stay valid); resharding releases the memory behind
// `full` and gathering gives it new memory, as FSDP's _free_storage / _alloc_storage do.
void freeStorage(const at::Tensor& t)
{
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
    storage->set_nbytes(0);
}

void allocateStorage(const at::Tensor& t, std::size_t bytes)
{
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
    storage->set_nbytes(bytes);
}

bool matchesPolicy(const models::WrappableModule& m, const ShardingOptions& options)
{
    switch (options.wrapPolicy) {
    case WrapPolicy::TransformerBased:
        return std::find(options.transformerLayerClasses.begin(), options.transformerLayerClasses.end(), m.className)
               != options.transformerLayerClasses.end();
    case WrapPolicy::SizeBased: {
        std::int64_t n = 0;
        for (const auto& p : m.module->parameters())
            n += p.numel();
        return n >= options.minNumParams;
    }
    case WrapPolicy::NoWrap:
        return false;
    }
    return false;
}

} // namespace

ShardedDataParallel::ShardedDataParallel(models::TrainableModel& model, dist::Communicator& comm, ShardingOptions options)
    : m_comm(comm), m_model(&model), m_options(std::move(options))
{
    if (m_options.zeroStage < 1 || m_options.zeroStage > 3)
        throw std::invalid_argument("ZeRO stage must be 1, 2 or 3");
    makeHybridGroups();
    checkLayerClasses(model);
    const std::vector<models::WrappableModule> wrapped = collectUnits(model);
    at::NoGradGuard noGrad;
    const c10::ScalarType dtype = m_units.empty() ? at::kFloat : m_units.front().params.front().scalar_type();
    for (auto& unit : m_units)
        shardUnit(unit, dtype);
    if (m_options.activationCheckpointing)
        checkpointActivations(wrapped);
    installHooks(model, wrapped);
    updatePeaks();
}

void ShardedDataParallel::makeHybridGroups()
{
    const int world = m_comm.size();
    if (m_options.hybridGroupSize <= 0 || m_options.hybridGroupSize >= world)
        return;
    const int group = m_options.hybridGroupSize;
    if (world % group != 0)
        throw std::invalid_argument("HYBRID sharding needs the same number of ranks on every machine: " + std::to_string(world)
                                    + " ranks do not split into groups of " + std::to_string(group));
    const int rank = m_comm.rank();
    const HybridGroups groups = hybridGroupsOf(rank, world, group);
    m_shardGroup = m_comm.subgroup("hybrid_shard_" + std::to_string(rank / group), groups.shard);
    m_replicateGroup = m_comm.subgroup("hybrid_replicate_" + std::to_string(rank % group), groups.replicate);
}

std::string ShardedDataParallel::firstStepReport() const
{
    std::string names;
    for (const auto& unit : m_units)
        names += (names.empty() ? "" : ", ") + unit.name;
    std::size_t float8 = 0;
    for (const auto& unit : m_units)
        float8 += unit.float8.size();
    return "sharding: " + std::to_string(m_units.size()) + " units (" + names + "), ZeRO stage "
           + std::to_string(m_options.zeroStage)
           + (float8 > 0 ? "; " + std::to_string(float8) + " fp8 weights all-gathered in fp8" : "");
}

void ShardedDataParallel::checkLayerClasses(models::TrainableModel& model)
{
    if (m_options.wrapPolicy != WrapPolicy::TransformerBased)
        return;
    if (m_options.transformerLayerClasses.empty())
        m_options.transformerLayerClasses = model.noSplitModules();
    std::set<std::string> present;
    for (const auto& m : model.wrappableModules())
        present.insert(m.className);
    for (const auto& name : m_options.transformerLayerClasses) {
        if (present.count(name))
            continue;
        std::string classes;
        for (const auto& c : present)
            classes += (classes.empty() ? "" : ", ") + c;
        // Accelerate refuses the same: "Could not find the transformer layer class ... in the model."
        throw std::invalid_argument("fsdp_transformer_layer_cls_to_wrap names " + name
                                    + ", which the model does not have; its layer classes are " + classes
                                    + " (leave the key out to wrap them)");
    }
}

std::vector<models::WrappableModule> ShardedDataParallel::collectUnits(models::TrainableModel& model)
{
    // Units: the wrappable submodules the policy names, then the root for everything else.
    std::set<const c10::TensorImpl*> claimed;
    std::vector<models::WrappableModule> wrapped;
    for (auto& m : model.wrappableModules()) {
        if (!matchesPolicy(m, m_options))
            continue;
        Unit unit;
        unit.name = m.name;
        for (const auto& item : m.module->named_parameters(/*recurse=*/true)) {
            if (claimed.insert(item.value().unsafeGetTensorImpl()).second) {
                unit.params.push_back(item.value());
                unit.paramNames.push_back(m.name + "." + item.key());
            }
        }
        if (!unit.params.empty()) {
            m_units.push_back(std::move(unit));
            wrapped.push_back(m);
        }
    }
    Unit root;
    root.name = "(root)";
    root.isRoot = true;
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
        if (claimed.insert(item.value().unsafeGetTensorImpl()).second) {
            root.params.push_back(item.value());
            root.paramNames.push_back(item.key());
        }
    }
    if (!root.params.empty())
        m_units.push_back(std::move(root));
    return wrapped;
}

void ShardedDataParallel::shardUnit(Unit& unit, c10::ScalarType dtype)
{
    // One padded buffer, rank 0's values broadcast (sync_module_states), the parameters turned
    // into views of it, this rank's shard copied out.
    const int shardCount = shardGroup().size();
    const int shardIndex = shardGroup().rank();
    // Scattering from rank 0 needs one shard per rank of the world.
    const bool scatterFromRankZero = m_options.rankZeroLoadsWeights && !m_shardGroup;
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
        const auto& p = unit.params[i];
        if (p.scalar_type() != dtype)
            throw std::invalid_argument("sharded training needs one parameter dtype: '" + unit.paramNames[i] + "' is "
                                        + c10::toString(p.scalar_type()) + ", others " + c10::toString(dtype));
        unit.offsets.push_back(unit.numel);
        unit.numel += p.numel();
    }
    unit.padded = (unit.numel + shardCount - 1) / shardCount * shardCount;
    const std::int64_t shardNumel = unit.padded / shardCount;
    const auto flatOptions = unit.params.front().options().requires_grad(false);
    at::Tensor receivedShard;
    if (scatterFromRankZero && m_comm.rank() != 0) {
        // Only the shard arrives; the full buffer stays unwritten (stage 3 frees it below).
        unit.full = at::empty({unit.padded}, flatOptions);
        receivedShard = at::empty({shardNumel}, flatOptions);
        dist::waitFor(m_comm.scatter(receivedShard, {}, 0));
    } else {
        unit.full = at::zeros({unit.padded}, flatOptions);
        for (std::size_t i = 0; i < unit.params.size(); ++i)
            unit.full.narrow(0, unit.offsets[i], unit.params[i].numel()).copy_(unit.params[i].reshape({-1}));
        if (scatterFromRankZero) {
            receivedShard = at::empty({shardNumel}, flatOptions);
            dist::waitFor(m_comm.scatter(receivedShard, unit.full.chunk(shardCount), 0));
        } else {
            dist::waitFor(m_comm.broadcast(unit.full, 0)); // sync_module_states
        }
    }
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
        auto& p = unit.params[i];
        p.set_data(unit.full.narrow(0, unit.offsets[i], p.numel()).view(p.sizes()));
    }
    if (receivedShard.defined()) {
        unit.full.narrow(0, shardIndex * shardNumel, shardNumel).copy_(receivedShard);
        if (m_options.zeroStage < 3) // the full parameters are needed now: assemble them
            dist::waitFor(shardGroup().allGatherSingle(unit.full, receivedShard));
    }
    for (const auto& p : unit.params)
        unit.trainable += p.requires_grad() ? 1 : 0;
    if (!m_options.useOrigParams && unit.trainable != 0 && unit.trainable != static_cast<int>(unit.params.size()))
        throw std::invalid_argument("unit '" + unit.name
                                    + "' mixes frozen and trainable parameters; a flat shard "
                                      "trains all or nothing. Set fsdp_use_orig_params: true, or freeze whole units");
    auto mine = unit.full.narrow(0, shardIndex * shardNumel, shardNumel);
    if (m_options.offloadToHost && !mine.device().is_cpu()) // pinned, so host<->device copies can be asynchronous
        unit.shard = at::empty({shardNumel}, mine.options().device(at::kCPU).pinned_memory(true)).copy_(mine);
    else
        unit.shard = mine.clone();
    unit.shard.requires_grad_(unit.trainable > 0);
    if (m_options.useOrigParams) {
        const std::int64_t begin = shardIndex * shardNumel, end = begin + shardNumel;
        for (std::size_t i = 0; i < unit.params.size(); ++i) {
            const std::int64_t lo = std::max(begin, unit.offsets[i]);
            const std::int64_t hi = std::min(end, unit.offsets[i] + unit.params[i].numel());
            if (!unit.params[i].requires_grad())
                continue;
            // A parameter outside this rank's shard gets an empty view: every rank's optimizer
            // then has every trainable parameter (FSDP and DeepSpeed accept empty partitions).
            const std::int64_t offset = lo < hi ? lo - begin : 0;
            auto view = unit.shard.detach().narrow(0, offset, std::max<std::int64_t>(0, hi - lo)).requires_grad_(true);
            unit.segments.push_back({unit.paramNames[i], view, offset});
        }
    }
    unit.gathered = true;
    if (m_options.zeroStage == 3)
        reshard(unit);
}

void ShardedDataParallel::checkpointActivations(const std::vector<models::WrappableModule>& wrapped)
{
    for (std::size_t u = 0; u < m_units.size(); ++u) {
        if (m_units[u].isRoot)
            continue;
        wrapped[u].hooks->setAround([this, u](const at::Tensor& input, const models::ForwardHooks::Body& body) {
            // The first run is without grad; the one with grad is the recomputation in backward,
            // which the trace shows as its own span.
            return checkpointed(input, [this, u, body](const at::Tensor& x) {
                if (!m_recorder || !at::GradMode::is_enabled())
                    return body(x);
                auto span = m_recorder->scope(profiler::Lane::Compute, "recompute " + m_units[u].name, "recompute");
                return body(x);
            });
        });
    }
}

void ShardedDataParallel::installHooks(models::TrainableModel& model, const std::vector<models::WrappableModule>& wrapped)
{
    // Stage 3: gather before a unit's forward; with FULL_SHARD free after it and gather again
    // before its backward (a hook on its output's gradient).
    for (std::size_t u = 0; u < m_units.size() && m_options.zeroStage == 3; ++u) {
        models::ForwardHooks* hooks = m_units[u].isRoot ? &model.forwardHooks : wrapped[u].hooks;
        hooks->addPreHook([this, u] {
            if (m_units[u].isRoot) {
                m_lastForwardOrder = std::move(m_forwardOrder);
                m_forwardOrder.clear();
            }
            m_forwardOrder.push_back(u);
            gather(m_units[u], wantsFloat8(m_units[u]));
            if (m_options.forwardPrefetch)
                prefetchAfter(u, /*backward=*/false);
        });
        if (!m_options.reshardAfterForward || (m_units[u].isRoot && !m_options.reshardRootAfterForward))
            continue;
        hooks->addPostHook([this, u](const at::Tensor& output) {
            reshard(m_units[u]);
            if (!output.requires_grad())
                return output;
            auto alias = output.view_as(output);
            alias.register_hook([this, u](const at::Tensor& grad) {
                gather(m_units[u], wantsFloat8(m_units[u]));
                if (m_options.backwardPrefetch)
                    prefetchAfter(u, /*backward=*/true);
                return grad;
            });
            return alias;
        });
    }
    // Every stage: count each unit's gradients as backward produces them.
    for (std::size_t u = 0; u < m_units.size(); ++u) {
        for (const auto& p : m_units[u].params) {
            if (!p.requires_grad())
                continue; // frozen: no gradient will arrive
            auto accumulator = torch::autograd::impl::grad_accumulator(p);
            accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
                [this, u](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                    onGradientReady(u);
                    return outputs;
                }));
            m_accumulators.push_back(std::move(accumulator));
        }
    }
}

ShardedDataParallel::~ShardedDataParallel()
{
    for (auto& unit : m_units) {
        if (unit.gradWork)
            dist::waitFor(unit.gradWork);
        if (unit.gatherWork)
            dist::waitFor(unit.gatherWork);
    }
}

NamedTensors ShardedDataParallel::namedOptimizerParameters() const
{
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& unit : m_units) {
        if (m_options.useOrigParams) {
            for (const auto& segment : unit.segments)
                out.emplace_back(segment.name, segment.view);
        } else if (unit.trainable > 0) {
            out.emplace_back(unit.name, unit.shard);
        }
    }
    return out;
}

void ShardedDataParallel::startGather(Unit& unit, bool float8)
{
    if (unit.gathered || unit.gatherWork)
        return;
    float8 = float8 && !unit.float8.empty();
    allocateStorage(unit.full, static_cast<std::size_t>(unit.padded) * unit.full.element_size());
    auto input = shardForCollective(unit);
    const std::int64_t bytes = float8 ? unit.wireBytes * shardGroup().size()
                                      : unit.padded * static_cast<std::int64_t>(unit.full.element_size());
    if (float8) {
        input = packFloat8(unit, input);
        unit.wireGathered = at::empty({bytes}, input.options());
    }
    const auto span = m_recorder ? m_recorder->begin(profiler::Lane::Communication,
                                                     "all_gather " + unit.name + (float8 ? " (fp8)" : ""), "all_gather", bytes)
                                 : profiler::SpanRecorder::kNoSpan;
    unit.gatherWork = shardGroup().allGatherSingle(float8 ? unit.wireGathered : unit.full, input);
    unit.gatherSpan = endSpanAtCompletion(unit.gatherWork, m_recorder, span);
    unit.gatheredInFloat8 = float8;
    m_stats.allGathered += bytes;
}

bool ShardedDataParallel::wantsFloat8(const Unit& unit) const
{
    return !unit.float8.empty() && unit.float8.front().layer->active(m_model->is_training());
}

void ShardedDataParallel::gatherInFloat8(const std::vector<models::Float8LinearWeight>& layers)
{
    if (m_options.zeroStage != 3)
        return; // stages 1-2 keep the full parameters: nothing is gathered per forward
    std::map<const c10::TensorImpl*, std::shared_ptr<precision::Float8Layer>> byWeight;
    for (const auto& layer : layers)
        if (layer.layer->tensorwise()) // delayed scaling quantizes with its own history's scale
            byWeight[layer.weight.unsafeGetTensorImpl()] = layer.layer;
    const int shards = shardGroup().size();
    for (auto& unit : m_units) {
        for (std::size_t i = 0; i < unit.params.size(); ++i)
            if (auto it = byWeight.find(unit.params[i].unsafeGetTensorImpl()); it != byWeight.end())
                unit.float8.push_back({i, it->second});
        if (unit.float8.empty())
            continue;
        // Each shard's elements in runs: e4m3 inside an fp8 weight (1 byte), else the shard's dtype.
        const std::int64_t shardNumel = unit.padded / shards;
        const auto elementBytes = static_cast<std::int64_t>(unit.full.element_size());
        unit.wire.assign(static_cast<std::size_t>(shards), {});
        for (int r = 0; r < shards; ++r) {
            auto& runs = unit.wire[static_cast<std::size_t>(r)];
            const std::int64_t end = (r + 1) * shardNumel;
            std::int64_t cursor = r * shardNumel, bytes = 0;
            auto add = [&](std::int64_t until, int part) {
                if (until <= cursor)
                    return;
                runs.push_back({cursor, until, part, bytes});
                bytes += (until - cursor) * (part < 0 ? elementBytes : 1);
                cursor = until;
            };
            for (std::size_t k = 0; k < unit.float8.size(); ++k) {
                const std::size_t param = unit.float8[k].param;
                const std::int64_t lo = unit.offsets[param], hi = lo + unit.params[param].numel();
                add(std::min(lo, end), -1);
                add(std::min(hi, end), static_cast<int>(k));
            }
            add(end, -1);
            unit.wireBytes = std::max(unit.wireBytes, bytes);
        }
    }
}

at::Tensor ShardedDataParallel::packFloat8(Unit& unit, const at::Tensor& shard)
{
    at::NoGradGuard noGrad;
    const int me = shardGroup().rank();
    const std::int64_t first = me * (unit.padded / shardGroup().size());
    const auto& runs = unit.wire[static_cast<std::size_t>(me)];
    // The whole weight's amax is the max of every rank's part's: one all-reduce for the unit.
    auto amax = at::zeros({static_cast<std::int64_t>(unit.float8.size())}, shard.options().dtype(at::kFloat));
    for (const auto& run : runs)
        if (run.part >= 0)
            amax.select(0, run.part).copy_(shard.narrow(0, run.begin - first, run.end - run.begin).abs().max());
    dist::waitFor(shardGroup().allreduce(amax, c10d::ReduceOp::MAX));
    unit.float8Scales = precision::scaleFromAmax(amax, precision::e4m3Max());
    auto bytes = at::zeros({unit.wireBytes}, shard.options().dtype(at::kByte));
    for (const auto& run : runs) {
        const at::Tensor values = shard.narrow(0, run.begin - first, run.end - run.begin);
        const at::Tensor packed = run.part < 0 ? values.view(at::kByte)
                                               : precision::quantizeE4m3(values, unit.float8Scales[run.part]).view(at::kByte);
        bytes.narrow(0, run.byteOffset, packed.numel()).copy_(packed);
    }
    return bytes;
}

void ShardedDataParallel::unpackFloat8(Unit& unit)
{
    at::NoGradGuard noGrad;
    std::vector<at::Tensor> weights;
    for (const auto& part : unit.float8)
        weights.push_back(at::empty({unit.params[part.param].numel()}, unit.full.options().dtype(at::kFloat8_e4m3fn)));
    for (std::size_t r = 0; r < unit.wire.size(); ++r) {
        const at::Tensor received = unit.wireGathered.narrow(0, static_cast<std::int64_t>(r) * unit.wireBytes, unit.wireBytes);
        for (const auto& run : unit.wire[r]) {
            const std::int64_t n = run.end - run.begin;
            at::Tensor into = run.part < 0
                                  ? unit.full.narrow(0, run.begin, n).view(at::kByte)
                                  : weights[static_cast<std::size_t>(run.part)]
                                        .narrow(
                                            0, run.begin - unit.offsets[unit.float8[static_cast<std::size_t>(run.part)].param], n)
                                        .view(at::kByte);
            into.copy_(received.narrow(0, run.byteOffset, into.numel()));
        }
    }
    for (std::size_t k = 0; k < unit.float8.size(); ++k) {
        const at::Tensor& param = unit.params[unit.float8[k].param];
        unit.float8[k].layer->setGatheredWeight(
            {weights[k].view(param.sizes()), unit.float8Scales[static_cast<std::int64_t>(k)]});
    }
    unit.wireGathered = at::Tensor();
}

at::Tensor ShardedDataParallel::shardForCollective(Unit& unit)
{
    const c10::Device device = unit.full.device();
    if (unit.shard.device() == device)
        return unit.shard.detach();
    auto copy = m_recorder ? m_recorder->scope(profiler::Lane::Memory, "h2d " + unit.name, "offload", tensorBytes(unit.shard))
                           : profiler::SpanRecorder::Scope{};
    unit.shardOnDevice = unit.shard.detach().to(device, /*non_blocking=*/true);
    return unit.shardOnDevice;
}

void ShardedDataParallel::gather(Unit& unit, bool float8)
{
    if (unit.gathered && unit.gatheredInFloat8 && !float8)
        reshard(unit); // its fp8 weights' full values are wanted: gather it again in full
    if (unit.gathered)
        return;
    {
        // The time this unit's compute is blocked on its parameters: not compute (category::kWait).
        // Without a prefetch that is the whole gather, issue included.
        auto wait = m_recorder ? m_recorder->scope(profiler::Lane::Host, "wait all_gather " + unit.name, "wait")
                               : profiler::SpanRecorder::Scope{};
        startGather(unit, float8); // no-op when a prefetch already started it
        dist::waitFor(unit.gatherWork);
    }
    unit.gatherWork.reset();
    endSpanAfterWait(m_recorder, unit.gatherSpan);
    unit.shardOnDevice = at::Tensor();
    unit.gathered = true;
    if (unit.gatheredInFloat8)
        unpackFloat8(unit);
    updatePeaks();
    if (unit.gatheredInFloat8 && !float8)
        gather(unit, false); // a prefetch gathered it in fp8: again, in full
}

void ShardedDataParallel::prefetchAfter(std::size_t unit, bool backward)
{
    // The unit that runs next: in forward, the one after `unit` in the last forward's order; in
    // backward, the one before it (backward visits units in reverse).
    const auto& order = backward ? m_forwardOrder : m_lastForwardOrder;
    const auto it = std::find(order.begin(), order.end(), unit);
    if (it == order.end())
        return;
    if (backward && it != order.begin())
        startGather(m_units[*(it - 1)], wantsFloat8(m_units[*(it - 1)]));
    else if (!backward && it + 1 != order.end())
        startGather(m_units[*(it + 1)], wantsFloat8(m_units[*(it + 1)]));
}

void ShardedDataParallel::reshard(Unit& unit)
{
    if (!unit.gathered || m_options.zeroStage < 3)
        return;
    freeStorage(unit.full);
    unit.gathered = false;
    for (auto& part : unit.float8)
        part.layer->clearGatheredWeight(); // the autograd graph keeps what its backward needs
    unit.gatheredInFloat8 = false;
}

void ShardedDataParallel::prepareForBackward(bool synchronize)
{
    m_synchronize = synchronize;
    for (auto& unit : m_units) {
        unit.pending = unit.trainable;
        if (synchronize)
            unit.reduced = false;
    }
}

void ShardedDataParallel::onGradientReady(std::size_t index)
{
    Unit& unit = m_units[index];
    if (--unit.pending != 0)
        return;
    updatePeaks();
    // This unit's backward is done: its gradients can go (stages 2, 3, as soon as they exist),
    // and its parameters are no longer needed until the next forward (stage 3).
    if (m_synchronize && m_options.zeroStage >= 2)
        launchReduceScatter(unit);
    // A frozen parameter's users may still run after the last trainable gradient arrives (they
    // have no gradient accumulator to wait for): such units stay gathered until the step ends.
    if (!unit.isRoot && unit.trainable == static_cast<int>(unit.params.size()))
        reshard(unit);
}

void ShardedDataParallel::launchReduceScatter(Unit& unit)
{
    at::NoGradGuard noGrad;
    // The previous unit's reduce-scatter first, and its input freed, before this one's is made.
    if (m_reduceScatterInFlight)
        completeReduceScatter(*m_reduceScatterInFlight);
    const bool upcast = m_options.reduceInFloat32 && unit.shard.scalar_type() != at::kFloat;
    // On the device where the collectives run (the shard may be on the host: offload).
    unit.fullGrad = at::zeros({unit.padded},
                              unit.full.options().requires_grad(false).dtype(upcast ? at::kFloat : unit.shard.scalar_type()));
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
        auto& p = unit.params[i];
        if (p.grad().defined())
            unit.fullGrad.narrow(0, unit.offsets[i], p.numel()).copy_(p.grad().reshape({-1}));
        p.mutable_grad() = at::Tensor(); // the reduce-scatter's input holds it now
    }
    m_reduceScatterInFlight = &unit;
    unit.shardGrad = at::empty({unit.padded / shardGroup().size()}, unit.fullGrad.options());
    const auto span = m_recorder ? m_recorder->begin(profiler::Lane::Communication, "reduce_scatter " + unit.name,
                                                     "reduce_scatter", tensorBytes(unit.fullGrad))
                                 : profiler::SpanRecorder::kNoSpan;
    unit.gradWork = shardGroup().reduceScatterSingle(unit.shardGrad, unit.fullGrad);
    unit.gradSpan = endSpanAtCompletion(unit.gradWork, m_recorder, span);
    m_stats.reduceScattered += tensorBytes(unit.fullGrad);
    unit.reduced = true;
    updatePeaks();
}

void ShardedDataParallel::completeReduceScatter(Unit& unit)
{
    if (unit.gradWork) {
        dist::waitFor(unit.gradWork);
        unit.gradWork.reset();
        endSpanAfterWait(m_recorder, unit.gradSpan);
    }
    unit.fullGrad = at::Tensor();
    if (m_reduceScatterInFlight == &unit)
        m_reduceScatterInFlight = nullptr;
}

void ShardedDataParallel::finishGradientSync()
{
    at::NoGradGuard noGrad;
    for (auto& unit : m_units)
        if (!unit.reduced && unit.trainable > 0)
            launchReduceScatter(unit); // stage 1, and units with unused parameters
    updatePeaks();
    const double scale = 1.0 / static_cast<double>(m_comm.size());
    for (auto& unit : m_units) {
        if (unit.trainable == 0) { // frozen: nothing to reduce or step
            for (auto& p : unit.params)
                p.mutable_grad() = at::Tensor();
            reshard(unit);
            continue;
        }
        completeReduceScatter(unit);
        if (m_replicateGroup) { // HYBRID: sum the shard over the machines holding it
            auto span = m_recorder ? m_recorder->scope(profiler::Lane::Communication, "all_reduce replicas " + unit.name,
                                                       "all_reduce", tensorBytes(unit.shardGrad))
                                   : profiler::SpanRecorder::Scope{};
            dist::waitFor(m_replicateGroup->allreduce(unit.shardGrad));
            m_stats.allReduced += tensorBytes(unit.shardGrad);
        }
        unit.shardGrad.mul_(scale);
        if (unit.shardGrad.scalar_type() != unit.shard.scalar_type())
            unit.shardGrad = unit.shardGrad.to(unit.shard.scalar_type()); // reduced in fp32 (bf16-pure)
        if (unit.shardGrad.device() != unit.shard.device()) { // offloaded: the optimizer steps on the host
            auto copy = m_recorder ? m_recorder->scope(profiler::Lane::Memory, "d2h " + unit.name, "offload",
                                                       tensorBytes(unit.shardGrad))
                                   : profiler::SpanRecorder::Scope{};
            unit.shardGrad = unit.shardGrad.to(unit.shard.device());
        }
        if (!m_options.useOrigParams)
            unit.shard.mutable_grad() = unit.shardGrad;
        for (auto& segment : unit.segments)
            segment.view.mutable_grad() = unit.shardGrad.narrow(0, segment.offset, segment.view.numel());
        unit.shardGrad = at::Tensor();
        if (unit.isRoot || unit.trainable != static_cast<int>(unit.params.size()))
            reshard(unit);
    }
}

void ShardedDataParallel::afterOptimizerStep()
{
    if (m_options.zeroStage >= 3)
        return; // gathered again by the next forward
    for (auto& unit : m_units) {
        auto input = shardForCollective(unit);
        dist::waitFor(shardGroup().allGatherSingle(unit.full, input));
        unit.shardOnDevice = at::Tensor();
        m_stats.allGathered += tensorBytes(unit.full);
    }
}

void ShardedDataParallel::releaseGradients()
{
    for (auto& unit : m_units) {
        unit.shard.mutable_grad() = at::Tensor();
        for (auto& segment : unit.segments)
            segment.view.mutable_grad() = at::Tensor();
    }
}

NamedTensors ShardedDataParallel::gatheredNamedParameters(bool keep)
{
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (auto& unit : m_units) {
        const bool wasGathered = unit.gathered && !unit.gatheredInFloat8;
        gather(unit, /*float8=*/false);
        for (std::size_t i = 0; keep && i < unit.params.size(); ++i)
            out.emplace_back(unit.paramNames[i], unit.params[i].detach().clone());
        if (!wasGathered)
            reshard(unit);
    }
    return out;
}

NamedTensors ShardedDataParallel::namedShards() const
{
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& unit : m_units)
        out.emplace_back(unit.name, unit.shard.detach());
    return out;
}

void ShardedDataParallel::loadShards(const std::map<std::string, at::Tensor>& shards)
{
    at::NoGradGuard noGrad;
    for (auto& unit : m_units) {
        auto it = shards.find(unit.name);
        if (it == shards.end() || it->second.numel() != unit.shard.numel())
            throw std::runtime_error("the sharded checkpoint has no shard of " + std::to_string(unit.shard.numel())
                                     + " elements for unit '" + unit.name + "'");
        unit.shard.detach().copy_(it->second);
        if (unit.gatheredInFloat8)
            reshard(unit); // its e4m3 weights are the old values: the next forward gathers the new
        if (unit.gathered) {
            auto input = shardForCollective(unit);
            dist::waitFor(shardGroup().allGatherSingle(unit.full, input));
            unit.shardOnDevice = at::Tensor();
        }
    }
}

at::Tensor ShardedDataParallel::flatten(const Unit& unit, const std::map<std::string, at::Tensor>& byName, bool trainableOnly,
                                        const std::string& source) const
{
    auto flat = at::zeros({unit.padded}, unit.shard.options().requires_grad(false).device(at::kCPU));
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
        if (trainableOnly && !unit.params[i].requires_grad())
            continue;
        auto it = byName.find(unit.paramNames[i]);
        if (it == byName.end() || it->second.numel() != unit.params[i].numel())
            throw std::runtime_error(source + " has no tensor of " + std::to_string(unit.params[i].numel())
                                     + " elements for parameter '" + unit.paramNames[i] + "'");
        flat.narrow(0, unit.offsets[i], unit.params[i].numel()).copy_(it->second.reshape({-1}));
    }
    return flat;
}

void ShardedDataParallel::loadFullParameters(const std::map<std::string, at::Tensor>& parameters, const std::string& source)
{
    at::NoGradGuard noGrad;
    for (auto& unit : m_units) {
        const auto flat = flatten(unit, parameters, /*trainableOnly=*/false, source);
        const std::int64_t n = unit.shard.numel();
        unit.shard.detach().copy_(flat.narrow(0, shardGroup().rank() * n, n));
        if (unit.gatheredInFloat8)
            reshard(unit); // as in loadShards
        if (unit.gathered)
            unit.full.copy_(flat);
    }
}

NamedTensors ShardedDataParallel::gatherByParameter(const PartOf& part, bool keep)
{
    at::NoGradGuard noGrad;
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (auto& unit : m_units) {
        if (unit.trainable == 0)
            continue;
        at::Tensor mine = at::zeros_like(unit.shard, unit.shard.options().requires_grad(false));
        if (!m_options.useOrigParams) {
            if (at::Tensor t = part(unit.shard); t.defined())
                mine.copy_(t.reshape({-1}));
        } else {
            for (const auto& segment : unit.segments)
                if (at::Tensor t = part(segment.view); t.defined())
                    mine.narrow(0, segment.offset, segment.view.numel()).copy_(t.reshape({-1}));
        }
        mine = mine.to(unit.full.device());
        auto full = at::empty({unit.padded}, mine.options());
        dist::waitFor(shardGroup().allGatherSingle(full, mine));
        if (!keep)
            continue;
        for (std::size_t i = 0; i < unit.params.size(); ++i)
            if (unit.params[i].requires_grad())
                out.emplace_back(
                    unit.paramNames[i],
                    full.narrow(0, unit.offsets[i], unit.params[i].numel()).view(unit.params[i].sizes()).cpu().clone());
    }
    return out;
}

void ShardedDataParallel::scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                                             const std::string& source)
{
    at::NoGradGuard noGrad;
    for (auto& unit : m_units) {
        if (unit.trainable == 0)
            continue;
        const auto flat = flatten(unit, full, /*trainableOnly=*/true, source);
        const std::int64_t n = unit.shard.numel();
        auto mine = flat.narrow(0, shardGroup().rank() * n, n).to(unit.shard.device());
        if (!m_options.useOrigParams)
            set(unit.shard, mine.clone());
        else
            for (const auto& segment : unit.segments)
                set(segment.view, mine.narrow(0, segment.offset, segment.view.numel()).clone());
    }
}

void ShardedDataParallel::updatePeaks()
{
    // Kept: what the layout holds from step to step (see StepFootprint). Passing: units gathered
    // for their compute (ZeRO-3) and unsharded gradients on their way to a reduce-scatter.
    std::int64_t keptParams = 0, keptGrads = 0, passingParams = 0, passingGrads = 0, masters = 0;
    for (const auto& unit : m_units) {
        const std::int64_t full = unit.gathered ? unit.padded * static_cast<std::int64_t>(unit.full.element_size()) : 0;
        if (m_options.zeroStage < 3) {
            masters += tensorBytes(unit.shard);
            keptParams += full;
        } else {
            keptParams += tensorBytes(unit.shard);
            passingParams += full;
        }
        keptGrads += tensorBytes(unit.shard.grad()) + tensorBytes(unit.shardGrad);
        for (const auto& segment : unit.segments)
            keptGrads += tensorBytes(segment.view.grad());
        std::int64_t unsharded = 0;
        for (const auto& p : unit.params)
            unsharded += tensorBytes(p.grad());
        // Below stage 2 every full gradient stays until the step's reduction; from stage 2 on
        // each unit's goes to its reduce-scatter as soon as its backward is done.
        (m_options.zeroStage < 2 ? keptGrads : passingGrads) += unsharded;
        passingGrads += tensorBytes(unit.fullGrad);
    }
    m_stats.masterShards = masters;
    m_stats.keptParams = std::max(m_stats.keptParams, keptParams);
    m_stats.keptGrads = std::max(m_stats.keptGrads, keptGrads);
    m_stats.peakParams = std::max(m_stats.peakParams, keptParams + passingParams);
    m_stats.peakGrads = std::max(m_stats.peakGrads, keptGrads + passingGrads);
}

void ShardedDataParallel::beginStep()
{
    resetPeaks();
    resetCommunication();
}

double ShardedDataParallel::globalGradSquaredNorm(double local)
{
    if (m_comm.size() == 1)
        return local;
    auto t = at::full({1}, local, at::TensorOptions().dtype(at::kDouble).device(m_comm.device()));
    dist::waitFor(m_comm.allreduce(t));
    return t.item<double>() / static_cast<double>(replicas());
}

StepFootprint ShardedDataParallel::stepFootprint() const
{
    // Peaks over the step, sampled at each gather, each unit's last gradient, each reduce-scatter's
    // launch and the end of the gradients' reduction (updatePeaks).
    StepFootprint footprint;
    footprint.params = m_stats.keptParams;
    footprint.grads = m_stats.keptGrads;
    footprint.peakParams = m_stats.peakParams;
    footprint.peakGrads = m_stats.peakGrads;
    footprint.masterShards = m_stats.masterShards;
    footprint.allReduced = m_stats.allReduced;
    footprint.allGathered = m_stats.allGathered;
    footprint.reduceScattered = m_stats.reduceScattered;
    return footprint;
}

void ShardedDataParallel::resetPeaks()
{
    m_stats.keptParams = m_stats.keptGrads = m_stats.peakParams = m_stats.peakGrads = 0;
    updatePeaks();
}

void ShardedDataParallel::resetCommunication()
{
    m_stats.allGathered = 0;
    m_stats.reduceScattered = 0;
    m_stats.allReduced = 0;
}

} // namespace shardscope::parallel
