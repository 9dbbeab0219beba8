#include "engine/accelerate/questionnaire.h"

#include "engine/accelerate/questionnaire_answers.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace shardscope::config {

// ---- Answers ---------------------------------------------------------------------------------

Value Answers::get(const std::string& id) const
{
    auto it = m_values.find(id);
    return it == m_values.end() || it->second.empty() ? Value() : it->second.back();
}

std::string Answers::str(const std::string& id) const
{
    const Value v = get(id);
    return v.isString() ? v.asString() : std::string();
}

std::int64_t Answers::integer(const std::string& id, std::int64_t fallback) const
{
    const Value v = get(id);
    return v.isInt() ? v.asInt() : fallback;
}

const std::vector<Value>& Answers::all(const std::string& id) const
{
    static const std::vector<Value> none;
    auto it = m_values.find(id);
    return it == m_values.end() ? none : it->second;
}

void Answers::record(const std::string& id, Value v)
{
    m_values[id].push_back(std::move(v));
    m_order.push_back(id);
}

// ---- Python converters -----------------------------------------------------------------------

std::string pythonStrip(const std::string& s)
{
    const auto b = s.find_first_not_of(" \t\r\n\v\f");
    if (b == std::string::npos)
        return {};
    const auto e = s.find_last_not_of(" \t\r\n\v\f");
    return s.substr(b, e - b + 1);
}

namespace {

// The first code point of each run of ten Unicode decimal digits (category Nd) past ASCII, as
// Python 3.11's unicodedata lists them: int() and float() read them all as 0-9 (int('２') is 2).
constexpr char32_t kUnicodeZeros[] = {
    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,   0xC66,   0xCE6,   0xD66,   0xDE6,
    0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,  0x1810,  0x1946,  0x19D0,  0x1A80,  0x1A90,  0x1B50,  0x1BB0,
    0x1C40,  0x1C50,  0xA620,  0xA8D0,  0xA900,  0xA9D0,  0xA9F0,  0xAA50,  0xABF0,  0xFF10,  0x104A0, 0x10D30, 0x11066,
    0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50,
    0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0};

// The text with every Unicode decimal digit written as its ASCII digit; other bytes as they are.
std::string asciiDigits(const std::string& text)
{
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        char32_t code = length == 1 ? lead : lead & (0x3F >> (length - 1));
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0;
            if ((next & 0xC0) != 0x80) { // not UTF-8: the byte stays as it is (and is no digit)
                length = 1;
                break;
            }
            code = (code << 6) | (next & 0x3F);
        }
        constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000}; // an overlong form is no character
        char digit = 0;
        if (length > 1 && code >= kSmallest[length])
            for (char32_t zero : kUnicodeZeros)
                if (code >= zero && code < zero + 10)
                    digit = static_cast<char>('0' + (code - zero));
        out += digit ? std::string(1, digit) : text.substr(i, length);
        i += length;
    }
    return out;
}

// Python literal rules for underscores: only single ones, between digits.
bool underscoresOk(const std::string& digits)
{
    if (digits.empty() || digits.front() == '_' || digits.back() == '_')
        return false;
    return digits.find("__") == std::string::npos;
}

} // namespace

std::optional<std::int64_t> pythonInt(const std::string& text)
{
    std::string s = pythonStrip(asciiDigits(text));
    if (s.empty())
        return std::nullopt;
    std::string sign;
    if (s[0] == '+' || s[0] == '-') {
        sign = s.substr(0, 1);
        s.erase(0, 1);
    }
    if (!underscoresOk(s)
        || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '_'; }))
        return std::nullopt;
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    errno = 0;
    char* end = nullptr;
    const std::string full = sign + s;
    const long long v = std::strtoll(full.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0')
        return std::nullopt;
    return v;
}

std::optional<double> pythonFloat(const std::string& text)
{
    std::string s = pythonStrip(asciiDigits(text));
    if (s.empty())
        return std::nullopt;
    std::string lower = s;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string body = lower;
    double sign = 1;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
        sign = body[0] == '-' ? -1 : 1;
        body.erase(0, 1);
    }
    if (body == "inf" || body == "infinity")
        return sign * INFINITY;
    if (body == "nan")
        return NAN;
    for (std::size_t i = 0; i < body.size(); ++i) {
        const char c = body[i];
        if (c == '_') {
            if (i == 0 || i + 1 == body.size() || !std::isdigit(static_cast<unsigned char>(body[i - 1]))
                || !std::isdigit(static_cast<unsigned char>(body[i + 1])))
                return std::nullopt;
        } else if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) {
            return std::nullopt;
        }
    }
    body.erase(std::remove(body.begin(), body.end(), '_'), body.end());
    char* end = nullptr;
    const double v = std::strtod(body.c_str(), &end);
    if (body.empty() || *end != '\0')
        return std::nullopt;
    return sign * v;
}

// ---- session ---------------------------------------------------------------------------------

using namespace answers;

QuestionnaireSession::QuestionnaireSession(Hardware hardware) : m_hardware(std::move(hardware)) { advanceFrom(0); }

void QuestionnaireSession::advanceFrom(std::size_t index)
{
    const auto& tree = questionTree();
    m_position = index;
    while (m_position < tree.size()) {
        const Question& q = tree[m_position];
        if (!q.when || q.when(m_answers, m_hardware))
            return;
        ++m_position;
    }
}

const Question* QuestionnaireSession::current() const
{
    if (m_abort)
        return nullptr;
    const auto& tree = questionTree();
    return m_position < tree.size() ? &tree[m_position] : nullptr;
}

std::string QuestionnaireSession::promptFor(const Question& q) const
{
    std::string p = q.prompt;
    if (auto pos = p.find("{W}"); pos != std::string::npos)
        p.replace(pos, 3, processWord(effectiveType(m_answers)));
    if (auto pos = p.find("{D}"); pos != std::string::npos)
        p.replace(pos, 3, m_hardware.acceleratorLabel);
    return p;
}

std::string processWord(const std::string& distributedType)
{
    const std::string& t = distributedType;
    if (in(t, {"FSDP", "DEEPSPEED", "MEGATRON_LM"}))
        return "GPU(s)";
    if (t == "MULTI_CPU")
        return "processes";
    if (t == "MULTI_NEURON")
        return "NEURON cores";
    return (t.rfind("MULTI_", 0) == 0 ? t.substr(6) : t) + "(s)";
}

std::vector<Choice> QuestionnaireSession::choicesFor(const Question& q) const
{
    return q.dynamicChoices ? q.dynamicChoices(m_answers) : q.choices;
}

std::string QuestionnaireSession::currentPrompt() const
{
    const Question* q = current();
    return q ? promptFor(*q) : std::string();
}

std::vector<Choice> QuestionnaireSession::currentChoices() const
{
    const Question* q = current();
    return q ? choicesFor(*q) : std::vector<Choice>{};
}

void QuestionnaireSession::accept(const Question& q, Value value)
{
    if (q.transform)
        value = q.transform(value);
    m_answers.record(q.id, std::move(value));
    if (q.abortIf) {
        if (std::string e = q.abortIf(m_answers); !e.empty()) {
            m_abort = e;
            return;
        }
    }
    const auto& tree = questionTree();
    if (!q.loopBackTo.empty() && m_answers.yes(q.id)) {
        for (std::size_t i = 0; i < tree.size(); ++i)
            if (tree[i].id == q.loopBackTo) {
                advanceFrom(i);
                return;
            }
    }
    advanceFrom(m_position + 1);
}

std::optional<std::size_t> matchChoice(const std::vector<Choice>& choices, const std::string& text)
{
    auto fold = [](std::string t) {
        t.erase(0, t.find_first_not_of(" \t"));
        t.erase(t.find_last_not_of(" \t") + 1);
        std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
        return t;
    };
    const std::string wanted = fold(text);
    if (wanted.empty())
        return std::nullopt;
    for (std::size_t i = 0; i < choices.size(); ++i)
        if (fold(choices[i].label) == wanted || fold(choices[i].value.pyStr()) == wanted)
            return i;
    return std::nullopt;
}

QuestionnaireSession::LineOutcome QuestionnaireSession::answerLine(const std::string& rawLine)
{
    const Question* q = current();
    if (!q)
        return {false, "the questionnaire is finished"};
    std::string line = rawLine;
    if (!line.empty() && line.back() == '\r')
        line.pop_back();
    const bool useDefault = line.empty() && !q->defaultValue.isNull();
    switch (q->kind) {
    case QuestionKind::Choice: {
        // Accelerate's line-mode menu: an integer picks that index, an empty line the default.
        // Accelerate also takes any other text as the default; we take a choice's label or value
        // (a user who typed `cpu` meant cpu, not the default) and ask again for anything else.
        const auto choices = choicesFor(*q);
        if (auto index = pythonInt(line)) {
            if (*index < 0 || *index >= static_cast<std::int64_t>(choices.size()))
                return {false, "Please input a choice index (starting from 0), and press enter"};
            accept(*q, choices[static_cast<std::size_t>(*index)].value);
            return {true, {}};
        }
        if (line.find_first_not_of(" \t") == std::string::npos) {
            accept(*q, choices.at(static_cast<std::size_t>(q->defaultChoice)).value);
            return {true, {}};
        }
        if (auto index = matchChoice(choices, line)) {
            accept(*q, choices[*index].value);
            return {true, {}};
        }
        std::string accepted;
        for (std::size_t i = 0; i < choices.size(); ++i)
            accepted += (i ? ", " : "") + choices[i].label;
        return {false, "'" + line + "' is not one of the choices. Type its index (0 to " + std::to_string(choices.size() - 1)
                           + ") or its name: " + accepted};
    }
    case QuestionKind::YesNo: {
        if (useDefault) {
            accept(*q, q->defaultValue);
            return {true, {}};
        }
        std::string lower = line;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        if (lower == "yes" || lower == "no") {
            accept(*q, Value(lower == "yes"));
            return {true, {}};
        }
        return {false, q->errorMessage};
    }
    case QuestionKind::Int: {
        if (useDefault) {
            accept(*q, q->defaultValue);
            return {true, {}};
        }
        if (auto v = pythonInt(line)) {
            accept(*q, Value(*v));
            return {true, {}};
        }
        return {false, q->errorMessage};
    }
    case QuestionKind::Float: {
        if (useDefault) {
            accept(*q, q->defaultValue);
            return {true, {}};
        }
        if (auto v = pythonFloat(line)) {
            accept(*q, Value(*v));
            return {true, {}};
        }
        return {false, q->errorMessage};
    }
    case QuestionKind::Text:
        accept(*q, useDefault ? q->defaultValue : Value(line));
        return {true, {}};
    }
    return {false, {}};
}

Result<void> QuestionnaireSession::answer(const Value& value)
{
    const Question* q = current();
    if (!q)
        return makeError("the questionnaire is finished");
    switch (q->kind) {
    case QuestionKind::Choice: {
        const auto choices = choicesFor(*q);
        if (std::none_of(choices.begin(), choices.end(), [&](const Choice& c) { return c.value == value; }))
            return makeError(q->id + ": " + value.pyRepr() + " is not one of the choices");
        break;
    }
    case QuestionKind::YesNo:
        if (!value.isBool())
            return makeError(q->id + ": expected yes or no");
        break;
    case QuestionKind::Int:
        if (!value.isInt())
            return makeError(q->id + ": expected an integer");
        break;
    case QuestionKind::Float:
        if (!value.isNumber())
            return makeError(q->id + ": expected a number");
        break;
    case QuestionKind::Text:
        break;
    }
    accept(*q, q->kind == QuestionKind::Float && value.isInt() ? Value(static_cast<double>(value.asInt())) : value);
    if (m_abort)
        return makeError(*m_abort);
    return {};
}

std::vector<std::string> QuestionnaireSession::closingNotes() const
{
    std::vector<std::string> notes;
    const std::string mp = tpu(m_answers) ? "no" : m_answers.str("mixed_precision");
    if (m_answers.yes("use_dynamo") && mp == "no" && !useCpu(m_answers))
        notes.emplace_back("Torch dynamo used without mixed precision requires TF32 to be efficient. Accelerate will "
                           "enable it by default when launching your scripts.");
    return notes;
}

Result<AccelerateConfig> QuestionnaireSession::result() const
{
    if (m_abort)
        return makeError(*m_abort);
    if (!finished())
        return makeError("the questionnaire is not finished (next: " + current()->id + ")");
    const Answers& a = m_answers;
    // ClusterConfig(...) as get_cluster_input builds it.
    Value f = Value::emptyMap();
    f.set("compute_environment", Value("LOCAL_MACHINE"));
    f.set("distributed_type", Value(effectiveType(a)));
    f.set("num_processes", Value(a.integer("num_processes", 1)));
    f.set("gpu_ids", a.get("gpu_ids"));
    if (tpu(a))
        f.set("mixed_precision", Value("no"));
    else if (ds(a) && a.yes("use_deepspeed_config_file"))
        f.set("mixed_precision", Value());
    else
        f.set("mixed_precision", a.get("mixed_precision"));
    f.set("downcast_bf16", Value("no"));
    f.set("machine_rank", Value(a.integer("machine_rank", 0)));
    f.set("num_machines", Value(a.integer("num_machines", 1)));
    f.set("main_process_ip", a.get("main_process_ip"));
    f.set("main_process_port", a.get("main_process_port"));
    f.set("main_training_function", a.has("main_training_function") ? a.get("main_training_function") : Value("main"));
    for (const char* section : {"fp8_config", "deepspeed_config", "fsdp_config", "parallelism_config", "megatron_lm_config",
                                "mpirun_config", "dynamo_config"})
        f.set(section, Value::emptyMap());
    f.set("use_cpu", Value(useCpu(a)));
    f.set("rdzv_backend", a.has("rdzv_backend") ? a.get("rdzv_backend") : Value("static"));
    f.set("same_network", a.has("same_network") ? a.get("same_network") : Value(true));
    f.set("commands", Value());
    f.set("command_file", Value());
    f.set("tpu_env", Value(Value::List{}));
    f.set("tpu_name", Value());
    f.set("tpu_vm", Value());
    f.set("tpu_zone", Value());
    f.set("tpu_use_sudo", Value(false));
    f.set("tpu_use_cluster", Value(false));
    f.set("debug", a.has("debug") ? a.get("debug") : Value(false));
    f.set("enable_cpu_affinity", a.has("enable_cpu_affinity") ? a.get("enable_cpu_affinity") : Value(false));

    // Every answered question with a config key writes its value there.
    for (const auto& q : questionTree()) {
        if (q.configKey.empty() || !a.has(q.id))
            continue;
        const auto dot = q.configKey.find('.');
        if (dot == std::string::npos) {
            if (q.configKey != "compute_environment")
                f.set(q.configKey, a.get(q.id));
        } else {
            Value* section = f.find(q.configKey.substr(0, dot));
            section->set(q.configKey.substr(dot + 1), a.get(q.id));
        }
    }
    // Derived values.
    if (fsdp1(a) && a.yes("fsdp_cpu_ram_efficient_loading"))
        f.find("fsdp_config")->set("fsdp_sync_module_states", Value(true));
    if (a.has("fp8_override_linear_precision"))
        f.find("fp8_config")
            ->set("override_linear_precision", a.yes("fp8_override_linear_precision") ? Value(
                                                   Value::List{a.get("fp8_fprop"), a.get("fp8_dgrad"), a.get("fp8_wgrad")})
                                                                                      : Value(Value::List{false, false, false}));
    if (!a.all("tpu_command").empty())
        f.set("commands", Value(a.all("tpu_command")));
    if (!fp8(a))
        f.set("fp8_config", Value()); // fp8_config stays None unless fp8 was chosen
    return AccelerateConfig(ConfigKind::Cluster, std::move(f));
}

} // namespace shardscope::config
