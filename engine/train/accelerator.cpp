#include "engine/train/accelerator.h"
#include "engine/dist/wait_clock.h"
#include "engine/models/decoder.h"
#include "engine/parallel/tensor_parallel.h"

#include <ATen/ATen.h>
#ifdef SHARDSCOPE_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <cmath>
#include <limits>
#include <stdexcept>

namespace shardscope::train {

Accelerator::Accelerator(const DistEnv& env, AcceleratorOptions options) : m_options(options)
{
    dist::CommunicatorOptions commOptions;
    commOptions.backend = options.backend;
    m_comm = dist::Communicator::connect(env, commOptions);
    if (options.tensorParallelSize > 1) {
        const int tp = options.tensorParallelSize;
        if (m_comm->size() % tp != 0)
            throw std::runtime_error("tp_size " + std::to_string(tp) + " does not divide the " + std::to_string(m_comm->size())
                                     + " ranks");
        // Every rank makes its tensor group first, then its data group: no member waits on one
        // that is making another group.
        const auto groups = parallel::tensorParallelGroupsOf(m_comm->rank(), m_comm->size(), tp);
        m_tensorGroup = m_comm->subgroup("tp" + std::to_string(groups.tensor.front() / tp), groups.tensor);
        if (groups.data.size() > 1)
            m_dataGroup = m_comm->subgroup("dp" + std::to_string(groups.data.front()), groups.data);
    }
    m_options.ddp.reduceLowPrecisionInFloat32 = options.backend == dist::BackendKind::Gloo;
#ifdef SHARDSCOPE_HAVE_CUDA
    // Validation refuses fp8 before launch on a GPU it knows too old; this is the rank's own check
    // of the device it was given (the fp8 _scaled_mm kernels begin at compute capability 8.9).
    if (options.precision == precision::PrecisionMode::Fp8 && device().is_cuda()) {
        const auto* properties = at::cuda::getDeviceProperties(device().index());
        if (properties->major * 10 + properties->minor < 89)
            throw std::runtime_error("mixed_precision fp8 needs compute capability 8.9 or newer (Ada, Hopper); " + device().str()
                                     + " is " + properties->name + ", compute capability " + std::to_string(properties->major)
                                     + "." + std::to_string(properties->minor) + ". Use bf16 on this GPU");
    }
#endif
    if (options.precision == precision::PrecisionMode::Fp16) {
        std::function<void(at::Tensor&)> agree;
        if (numProcesses() > 1)
            agree = [this](at::Tensor& foundInf) { dist::waitFor(m_comm->allreduce(foundInf, c10d::ReduceOp::MAX)); };
        m_scaler = std::make_unique<precision::GradScaler>(options.scaler, std::move(agree));
    }
}

Accelerator::~Accelerator() = default;

void Accelerator::prepareModel(models::TrainableModel& model)
{
    model.to(device());
    // The parameters' dtype. Mixed precision (fp16, bf16) trains fp32 parameters whatever dtype
    // they were loaded in: a model loaded in bf16 is upcast (fp32 master weights, as Accelerate
    // does since 0.30 and DeepSpeed always); bf16-pure makes them bf16; without mixed precision
    // ("no") they stay as loaded, so a bf16-loaded model trains purely in bf16, as in Accelerate.
    using precision::PrecisionMode;
    const c10::ScalarType loaded = model.parameters().empty() ? at::kFloat : model.parameters().front().scalar_type();
    m_parameterDtype = m_options.precision == PrecisionMode::Bf16Pure ? at::kBFloat16
                       : m_options.precision == PrecisionMode::No     ? loaded
                                                                      : at::kFloat;
    m_upcastParameters = loaded != at::kFloat && m_parameterDtype == at::kFloat;
    model.to(m_parameterDtype);
    if (m_tensorGroup)
        prepareTensorParallel(model);
    else
        m_dataParallel = makeDataParallel(model, m_comm.get());
    setOptimizerParameters(m_dataParallel->namedOptimizerParameters());
}

int Accelerator::dataParallelRank() const
{
    if (!m_tensorGroup)
        return processIndex();
    return m_dataGroup ? m_dataGroup->rank() : 0;
}

int Accelerator::dataParallelSize() const
{
    if (!m_tensorGroup)
        return numProcesses();
    return m_dataGroup ? m_dataGroup->size() : 1;
}

std::unique_ptr<parallel::DataParallel> Accelerator::makeDataParallel(models::TrainableModel& model, dist::Communicator* group)
{
    if (m_options.sharding) {
        parallel::ShardingOptions sharding = *m_options.sharding;
        sharding.reduceInFloat32 = m_options.backend == dist::BackendKind::Gloo;
        auto sharded = std::make_unique<parallel::ShardedDataParallel>(model, group ? *group : *m_comm, sharding);
        if (sharding.float8AllGather)
            sharded->gatherInFloat8(models::float8LinearWeights(model));
        m_sharded = sharded.get();
        return sharded;
    }
    parallel::NamedTensors named;
    for (const auto& item : model.named_parameters())
        named.emplace_back(item.key(), item.value());
    if (group && group->size() > 1) {
        auto ddp = std::make_unique<parallel::DistributedDataParallel>(std::move(named), *group, m_options.ddp);
        ddp->broadcastParameters();
        return ddp;
    }
    return std::make_unique<parallel::LocalDataParallel>(std::move(named));
}

void Accelerator::prepareTensorParallel(models::TrainableModel& model)
{
    auto* decoder = dynamic_cast<models::CausalDecoderImpl*>(&model);
    if (!decoder)
        throw std::runtime_error("tensor parallelism (tp_size " + std::to_string(m_tensorGroup->size())
                                 + ") splits the Llama, Mistral and Qwen2 decoders only; set tp_size: 1 for this model");
    {
        // Rank 0's weights everywhere before each rank keeps its slice (with
        // cpu_ram_efficient_loading the other ranks never read them).
        at::NoGradGuard noGrad;
        for (auto& p : model.parameters())
            dist::waitFor(m_comm->broadcast(p, 0));
    }
    auto traffic = std::make_shared<parallel::TensorParallelTraffic>();
    parallel::applyTensorParallel(*decoder, *m_tensorGroup, traffic);
    if (!m_dataGroup)
        m_options.sharding.reset(); // one data-parallel position: nothing to shard over (planning refuses FSDP so)
    auto inner = makeDataParallel(model, m_dataGroup.get());
    m_dataParallel = std::make_unique<parallel::TensorParallelDataParallel>(std::move(inner), *m_tensorGroup,
                                                                            dataParallelRank() == 0, std::move(traffic));
}

void Accelerator::setRecorder(profiler::SpanRecorder* recorder) { m_dataParallel->setRecorder(recorder); }

void Accelerator::setOptimizerParameters(std::vector<std::pair<std::string, torch::Tensor>> named)
{
    m_optimizerParameters.clear();
    for (const auto& [name, p] : named)
        m_optimizerParameters.push_back(p);
    m_namedOptimizerParameters = std::move(named);
}

std::vector<std::pair<std::string, torch::Tensor>> Accelerator::fullNamedParameters()
{
    return m_dataParallel->gatheredNamedParameters(/*keep=*/isMainProcess());
}

Accelerator::AccumulateGuard::AccumulateGuard(Accelerator& a)
{
    // GradientState: sync on every k-th micro-step.
    ++a.m_microStep;
    a.m_syncGradients = a.m_microStep % a.m_options.gradientAccumulationSteps == 0;
    if (a.m_syncGradients)
        a.m_gradientsSynced = false;
}

std::unique_ptr<precision::AutocastGuard> Accelerator::autocast()
{
    using precision::PrecisionMode;
    if (m_options.precision == PrecisionMode::Fp16)
        return std::make_unique<precision::AutocastGuard>(device().type(), at::kHalf);
    // fp8 as Accelerate runs it: bf16 autocast, the fp8 layers' matmuls in fp8 inside it.
    if (m_options.precision == PrecisionMode::Bf16 || m_options.precision == PrecisionMode::Fp8)
        return std::make_unique<precision::AutocastGuard>(device().type(), at::kBFloat16);
    return nullptr;
}

c10::ScalarType Accelerator::inputDtype() const { return m_parameterDtype; }

void Accelerator::backward(const torch::Tensor& loss)
{
    m_dataParallel->prepareForBackward(m_syncGradients);
    const auto k = m_options.gradientAccumulationSteps;
    torch::Tensor scaled = k > 1 ? loss / static_cast<double>(k) : loss;
    if (m_scaler)
        scaled = m_scaler->scale(scaled);
    scaled.backward();
}

std::optional<double> Accelerator::lossScale() const
{
    if (!m_scaler)
        return std::nullopt;
    return m_lastLossScale;
}

void Accelerator::finishGradientSync()
{
    if (!m_gradientsSynced)
        m_dataParallel->finishGradientSync();
    m_gradientsSynced = true;
}

double Accelerator::localGradSquaredNorm()
{
    // One fused norm kernel over all gradients and a single host sync (an .item() per parameter
    // costs more than the arithmetic for small models).
    auto squares = [](const std::vector<at::Tensor>& grads) {
        return grads.empty() ? 0.0 : at::stack(at::_foreach_norm(grads, 2)).to(at::kDouble).pow(2).sum().item<double>();
    };
    std::vector<at::Tensor> split, whole;
    for (const auto& [name, p] : m_namedOptimizerParameters)
        if (p.grad().defined())
            (m_tensorGroup && parallel::tensorParallelDim(name) >= 0 ? split : whole).push_back(p.grad().detach());
    // Each rank of a tensor group holds the same whole gradients: the group's sum counts them once.
    return squares(split) + squares(whole) / tensorParallelSize();
}

double Accelerator::clipGradNorm(double maxNorm)
{
    finishGradientSync();
    torch::NoGradGuard noGrad;
    if (m_scaler) {
        // Clipping must see true gradients: unscale first (GradScaler.unscale_), and leave a
        // step that will be skipped alone.
        m_scaler->unscale(m_optimizerParameters);
        if (m_scaler->foundInf())
            return std::numeric_limits<double>::infinity();
    }
    const double sumOfSquares = m_dataParallel->globalGradSquaredNorm(localGradSquaredNorm());
    const double total = std::sqrt(sumOfSquares);
    if (maxNorm > 0) {
        // torch.nn.utils.clip_grad_norm_: scale by max_norm / (total + 1e-6), clamped at 1.
        const double coefficient = std::min(1.0, maxNorm / (total + 1e-6));
        if (coefficient < 1.0)
            for (auto& p : m_optimizerParameters)
                if (p.grad().defined())
                    p.mutable_grad().mul_(coefficient);
    }
    return total;
}

void Accelerator::step(torch::optim::Optimizer& optimizer)
{
    if (!m_syncGradients)
        return;
    finishGradientSync();
    m_lastStepSkipped = false;
    if (m_scaler) {
        m_scaler->unscale(m_optimizerParameters);
        m_lastStepSkipped = m_scaler->foundInf();
        m_lastLossScale = m_scaler->currentScale();
        m_scaler->update();
    }
    if (m_lastStepSkipped) {
        ++m_skippedSteps;
    } else {
        optimizer.step();
        m_dataParallel->afterOptimizerStep();
    }
    m_dataParallel->releaseGradients(); // views of the reduced shard, which zero_grad cannot detach
    optimizer.zero_grad(/*set_to_none=*/true);
}

void Accelerator::restoreStepCounters(std::int64_t skippedSteps, std::optional<double> lossScale, std::int64_t growthTracker)
{
    m_skippedSteps = skippedSteps;
    if (m_scaler && lossScale)
        m_scaler->setState(*lossScale, growthTracker);
}

double Accelerator::meanOverRanks(double value)
{
    if (numProcesses() == 1)
        return value;
    auto t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(device()));
    dist::waitFor(m_comm->allreduce(t));
    return t.item<double>() / numProcesses();
}

void Accelerator::startStepAgreement(const torch::Tensor& localLoss, bool stopRequested, bool checkpointRequested)
{
    at::NoGradGuard noGrad;
    m_agreementLocalLoss = localLoss.detach().to(at::kDouble).reshape({});
    const auto flag = [&](bool set) { return at::full({}, set ? 1.0 : 0.0, m_agreementLocalLoss.options()); };
    // One all-reduce (a sum) carries the loss and the flags: a flag any rank raised is every rank's,
    // so the signal that reached the ranks at different moments stops them all after the same step.
    m_agreementValues =
        at::stack({m_agreementLocalLoss, flag(stopRequested || checkpointRequested), flag(checkpointRequested)}).to(device());
    if (numProcesses() > 1)
        m_agreementWork = m_comm->allreduce(m_agreementValues);
}

Accelerator::StepAgreement Accelerator::finishStepAgreement()
{
    if (!m_agreementValues.defined())
        throw std::logic_error("finishStepAgreement without startStepAgreement");
    if (m_agreementWork)
        dist::waitFor(m_agreementWork);
    m_agreementWork.reset();
    const auto values = m_agreementValues.to(at::kCPU);
    StepAgreement agreement;
    agreement.localLoss = m_agreementLocalLoss.item<double>();
    agreement.meanLoss = values[0].item<double>() / numProcesses();
    agreement.stop = values[1].item<double>() > 0;
    agreement.checkpointFirst = values[2].item<double>() > 0;
    m_agreementValues = at::Tensor();
    return agreement;
}

torch::Tensor Accelerator::gatherForMetrics(const torch::Tensor& tensor)
{
    if (numProcesses() == 1)
        return tensor;
    auto input = tensor.contiguous().view({-1});
    auto output = at::empty({input.numel() * numProcesses()}, input.options());
    dist::waitFor(m_comm->allGatherSingle(output, input));
    auto sizes = tensor.sizes().vec();
    if (sizes.empty())
        return output;
    sizes[0] *= numProcesses();
    return output.view(sizes);
}

void Accelerator::waitForEveryone() { m_comm->barrier(); }

} // namespace shardscope::train
