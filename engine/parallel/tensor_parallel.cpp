#include "engine/parallel/tensor_parallel.h"

#include "engine/dist/wait_clock.h"
#include "engine/models/decoder.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>

namespace shardscope::parallel {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The tensor group and its traffic, as the autograd nodes carry them (saved_data holds no pointers).
struct Link {
    dist::Communicator* group;
    std::shared_ptr<TensorParallelTraffic> traffic;
};

// The sum of `x` over the group, as a new tensor. Gloo sums only fp32 well on the CPU: a 16-bit
// activation is summed in fp32 and cast back (as the data-parallel reductions do).
at::Tensor allReduced(const at::Tensor& x, const Link& link)
{
    dist::Communicator& group = *link.group;
    const bool widen = group.backendKind() == dist::BackendKind::Gloo && x.scalar_type() != at::kFloat
                       && x.scalar_type() != at::kDouble;
    at::Tensor sum = widen ? x.to(at::kFloat).contiguous() : x.contiguous().clone();
    const std::int64_t bytes = sum.numel() * static_cast<std::int64_t>(sum.element_size());
    link.traffic->allReduced += bytes;
    profiler::SpanRecorder* recorder = link.traffic->recorder;
    auto span = recorder ? recorder->begin(profiler::Lane::Communication, "all_reduce tp", "all_reduce tp", bytes)
                         : profiler::SpanRecorder::kNoSpan;
    dist::waitFor(group.allreduce(sum));
    if (recorder)
        recorder->end(span);
    return widen ? sum.to(x.scalar_type()) : sum;
}

Link linkOf(torch::autograd::AutogradContext* ctx) { return *reinterpret_cast<const Link*>(ctx->saved_data["link"].toInt()); }

// Megatron's f: the input of a column-parallel projection, whole on every rank; each rank's
// gradient of it covers only its output slice, so backward sums them.
struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, std::int64_t link)
    {
        ctx->saved_data["link"] = link;
        return x;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   const torch::autograd::variable_list& grads)
    {
        return {allReduced(grads[0], linkOf(ctx)), at::Tensor()};
    }
};

// Megatron's g: a row-parallel projection's partial outputs summed forward; the whole output's
// gradient is each rank's backward.
struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
    static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, std::int64_t link)
    {
        return allReduced(x, *reinterpret_cast<const Link*>(link));
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, const torch::autograd::variable_list& grads)
    {
        return {grads[0], at::Tensor()};
    }
};

} // namespace

int tensorParallelDim(const std::string& name)
{
    for (const char* column :
         {".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj.", ".mlp.gate_proj.", ".mlp.up_proj."})
        if (contains(name, column))
            return 0;
    for (const char* row : {".self_attn.o_proj.weight", ".mlp.down_proj.weight"})
        if (contains(name, row))
            return 1;
    return -1;
}

void applyTensorParallel(models::CausalDecoderImpl& model, dist::Communicator& tensorGroup,
                         std::shared_ptr<TensorParallelTraffic> traffic)
{
    const int n = tensorGroup.size(), rank = tensorGroup.rank();
    const auto& c = model.config;
    for (auto [what, size] : {std::pair{"num_attention_heads", c.numAttentionHeads},
                              {"num_key_value_heads", c.numKeyValueHeads},
                              {"intermediate_size", c.intermediateSize}})
        if (size % n != 0)
            throw std::runtime_error(std::string("tensor parallelism splits the model's ") + what + " (" + std::to_string(size)
                                     + ") over tp_size " + std::to_string(n)
                                     + " ranks, and it does not divide; choose a tp_size that divides it");
    {
        torch::NoGradGuard noGrad;
        for (auto& item : model.named_parameters()) {
            const int dim = tensorParallelDim(item.key());
            if (dim >= 0)
                item.value().set_data(item.value().detach().chunk(n, dim)[rank].contiguous().clone());
        }
    }
    // One link for every projection, owned by the functions that pass it (the model owns those).
    auto link = std::make_shared<Link>(Link{&tensorGroup, std::move(traffic)});
    const auto address = reinterpret_cast<std::int64_t>(link.get());
    const auto input = [link, address](const torch::Tensor& x) { return CopyToTensorParallel::apply(x, address); };
    const auto output = [link, address](const torch::Tensor& x) { return ReduceFromTensorParallel::apply(x, address); };
    for (auto& module : *model.model->layers) {
        auto* layer = module->as<models::DecoderLayer>();
        auto& attention = layer->self_attn;
        attention->heads /= n;
        attention->kvHeads /= n;
        for (auto* column :
             {&attention->q_proj, &attention->k_proj, &attention->v_proj, &layer->mlp->gate_proj, &layer->mlp->up_proj})
            (*column)->tensorParallelInput = input;
        attention->o_proj->tensorParallelOutput = output;
        layer->mlp->down_proj->tensorParallelOutput = output;
    }
}

TensorParallelDataParallel::TensorParallelDataParallel(std::unique_ptr<DataParallel> inner, dist::Communicator& tensorGroup,
                                                       bool dataParallelLeader, std::shared_ptr<TensorParallelTraffic> traffic)
    : m_inner(std::move(inner)), m_group(tensorGroup), m_leader(dataParallelLeader), m_traffic(std::move(traffic))
{
}

void TensorParallelDataParallel::beginStep()
{
    m_traffic->allReduced = 0;
    m_inner->beginStep();
}

StepFootprint TensorParallelDataParallel::stepFootprint() const
{
    StepFootprint footprint = m_inner->stepFootprint();
    footprint.tensorAllReduced = m_traffic->allReduced;
    return footprint;
}

void TensorParallelDataParallel::setRecorder(profiler::SpanRecorder* recorder)
{
    m_traffic->recorder = recorder;
    m_inner->setRecorder(recorder);
}

double TensorParallelDataParallel::globalGradSquaredNorm(double local)
{
    auto sum = at::full({1}, m_inner->globalGradSquaredNorm(local),
                        at::TensorOptions().dtype(at::kDouble).device(m_group.device()));
    dist::waitFor(m_group.allreduce(sum));
    return sum.item<double>();
}

NamedTensors TensorParallelDataParallel::joined(NamedTensors local)
{
    at::NoGradGuard noGrad;
    const int n = m_group.size();
    for (auto& [name, tensor] : local) {
        const int dim = tensorParallelDim(name);
        if (dim < 0 || !tensor.defined())
            continue;
        at::Tensor part = tensor.detach().to(m_group.device()).contiguous();
        at::Tensor flat = part.view({-1});
        at::Tensor gathered = at::empty({flat.numel() * n}, part.options());
        dist::waitFor(m_group.allGatherSingle(gathered, flat));
        std::vector<std::int64_t> sizes = part.sizes().vec();
        sizes.insert(sizes.begin(), n);
        tensor = at::cat(gathered.view(sizes).unbind(0), dim).to(tensor.device());
    }
    return local;
}

std::map<std::string, at::Tensor> TensorParallelDataParallel::sliced(const std::map<std::string, at::Tensor>& full,
                                                                     const std::string& source) const
{
    const int n = m_group.size();
    std::map<std::string, at::Tensor> mine;
    for (const auto& [name, tensor] : full) {
        const int dim = tensorParallelDim(name);
        if (dim < 0 || tensor.dim() <= dim) {
            mine.emplace(name, tensor);
            continue;
        }
        if (tensor.size(dim) % n != 0)
            throw std::runtime_error(source + ": '" + name + "' has " + std::to_string(tensor.size(dim))
                                     + (dim == 0 ? " rows" : " columns") + ", which tp_size " + std::to_string(n)
                                     + " does not divide: it is not this model's");
        mine.emplace(name, tensor.chunk(n, dim)[m_group.rank()].contiguous());
    }
    return mine;
}

NamedTensors TensorParallelDataParallel::gatheredNamedParameters(bool keep)
{
    // Only the first data-parallel position's tensor group gathers: rank 0 is in it.
    NamedTensors local = m_inner->gatheredNamedParameters(m_leader);
    if (!m_leader)
        return {};
    NamedTensors whole = joined(std::move(local));
    return keep ? whole : NamedTensors{};
}

void TensorParallelDataParallel::loadFullParameters(const std::map<std::string, at::Tensor>& parameters,
                                                    const std::string& source)
{
    m_inner->loadFullParameters(sliced(parameters, source), source);
}

NamedTensors TensorParallelDataParallel::gatherByParameter(const PartOf& part, bool keep)
{
    NamedTensors local = m_inner->gatherByParameter(part, m_leader);
    if (!m_leader)
        return {};
    NamedTensors whole = joined(std::move(local));
    return keep ? whole : NamedTensors{};
}

void TensorParallelDataParallel::scatterByParameter(const std::map<std::string, at::Tensor>& full, const SetPart& set,
                                                    const std::string& source)
{
    m_inner->scatterByParameter(sliced(full, source), set, source);
}

std::string TensorParallelDataParallel::firstStepReport() const
{
    const std::string inner = m_inner->firstStepReport();
    return "tensor parallelism: projections split over " + std::to_string(m_group.size()) + " ranks"
           + (inner.empty() ? "" : "; " + inner);
}

} // namespace shardscope::parallel
