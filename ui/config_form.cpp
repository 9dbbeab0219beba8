#include "ui/config_form.h"

#include "engine/accelerate/questionnaire.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QVBoxLayout>

#include <algorithm>
#include <map>

namespace shardscope::ui {

namespace {

using config::Value;
using Kind = config::Value::Kind;

QString qs(const std::string& s) { return QString::fromStdString(s); }

bool hasKind(const config::KeySpec& s, Kind k) { return std::find(s.types.begin(), s.types.end(), k) != s.types.end(); }

// The question `accelerate config` asks for a key, by config key: Accelerate's own help text.
const std::map<std::string, std::string>& questionPrompts()
{
    static const std::map<std::string, std::string> prompts = [] {
        std::map<std::string, std::string> m;
        for (const auto& q : config::questionTree())
            if (!q.configKey.empty())
                m.emplace(q.configKey, q.prompt);
        m.emplace("distributed_type", config::findQuestion("distributed_type")->prompt);
        return m;
    }();
    return prompts;
}

QString displayText(const Value& v)
{
    if (v.isNull())
        return {};
    if (v.isString())
        return qs(v.asString());
    return qs(v.pyStr());
}

// The first top-level key of a section's group (nested keys show inside their section's group).
const std::vector<const char*> kMachineKeys = {"num_processes",       "gpu_ids", "use_cpu", "num_machines",
                                               "enable_cpu_affinity", "debug"};
const std::vector<const char*> kMultiNodeKeys = {"machine_rank", "main_process_ip", "main_process_port", "same_network",
                                                 "rdzv_backend"};
// FSDP1-only keys: FSDP2 ignores them, so they show only under fsdp_version 1.
const std::vector<std::string> kFsdp1Keys = {"fsdp_sharding_strategy", "fsdp_backward_prefetch", "fsdp_forward_prefetch",
                                             "fsdp_use_orig_params", "fsdp_sync_module_states"};
const std::vector<std::string> kDeepSpeedMultiNodeKeys = {"deepspeed_multinode_launcher", "deepspeed_hostfile",
                                                          "deepspeed_exclusion_filter", "deepspeed_inclusion_filter"};

} // namespace

ConfigForm::ConfigForm(QWidget* parent) : QScrollArea(parent)
{
    setWidgetResizable(true);
    setFrameShape(QFrame::NoFrame);
    auto* body = new QWidget(this);
    m_layout = new QVBoxLayout(body);

    QGroupBox* machine = addGroup(tr("Machine"), QStringLiteral("groupMachine"));
    for (const char* k : kMachineKeys)
        addField(machine, {}, k);
    QGroupBox* distribution = addGroup(tr("Distribution"), QStringLiteral("groupDistribution"));
    addField(distribution, {}, "distributed_type");
    m_fsdp = addGroup(tr("FSDP"), QStringLiteral("groupFsdp"));
    addSection(m_fsdp, "fsdp_config");
    m_deepspeed = addGroup(tr("DeepSpeed"), QStringLiteral("groupDeepSpeed"));
    addSection(m_deepspeed, "deepspeed_config");
    QGroupBox* precision = addGroup(tr("Precision"), QStringLiteral("groupPrecision"));
    addField(precision, {}, "mixed_precision");
    addField(precision, {}, "downcast_bf16");
    addSection(precision, "fp8_config");
    QGroupBox* dynamo = addGroup(tr("Dynamo"), QStringLiteral("groupDynamo"));
    addSection(dynamo, "dynamo_config");
    m_multiNode = addGroup(tr("Multi-node"), QStringLiteral("groupMultiNode"));
    for (const char* k : kMultiNodeKeys)
        addField(m_multiNode, {}, k);
    m_layout->addStretch(1);
    setWidget(body);

    // A new config: what `shardscope config default` writes for no distribution.
    config::AccelerateConfig fresh;
    fresh.setField("compute_environment", Value("LOCAL_MACHINE"));
    fresh.setField("distributed_type", Value("NO"));
    fresh.setField("mixed_precision", Value("no"));
    fresh.setField("use_cpu", Value(false));
    fresh.setField("debug", Value(false));
    fresh.setField("num_processes", Value(1));
    setConfig(fresh);
}

QGroupBox* ConfigForm::addGroup(const QString& title, const QString& name)
{
    auto* group = new QGroupBox(title);
    group->setObjectName(name);
    auto* form = new QFormLayout(group);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    m_layout->addWidget(group);
    return group;
}

void ConfigForm::addSection(QGroupBox* group, const std::string& section)
{
    for (const auto* spec : config::currentKeys(section))
        if (!hasKind(*spec, Kind::List) && !hasKind(*spec, Kind::Map))
            addField(group, section, spec->key);
}

void ConfigForm::addField(QGroupBox* group, const std::string& section, const std::string& key)
{
    const config::KeySpec* spec = config::findKeySpec(section.empty() ? config::kClusterSection : section, key);
    if (!spec)
        return;
    Field f;
    f.section = section;
    f.spec = spec;
    f.group = group;
    f.form = static_cast<QFormLayout*>(group->layout());
    const QString keyPath = qs(f.keyPath());
    const std::size_t index = m_fields.size();

    QString tip = QStringLiteral("<b>%1</b><p>%2</p>").arg(keyPath, qs(spec->doc).toHtmlEscaped());
    if (auto it = questionPrompts().find(f.keyPath()); it != questionPrompts().end())
        tip += tr("<p><i>accelerate config asks:</i> %1</p>").arg(qs(it->second).trimmed().toHtmlEscaped());
    if (!spec->defaultValue.isNull())
        tip += tr("<p>Default: %1</p>").arg(displayText(spec->defaultValue).toHtmlEscaped());
    if (!spec->allowed.empty()) {
        QStringList allowed;
        for (const auto& a : spec->allowed)
            allowed << qs(a);
        tip += tr("<p>One of: %1</p>").arg(allowed.join(QStringLiteral(", ")));
    }

    if (!spec->allowed.empty()) {
        auto* combo = new QComboBox(group);
        if (!spec->required)
            combo->addItem(spec->defaultValue.isNull() ? tr("(not set)")
                                                       : tr("(default: %1)").arg(displayText(spec->defaultValue)));
        for (const auto& a : spec->allowed)
            combo->addItem(qs(a), qs(a));
        connect(combo, &QComboBox::currentIndexChanged, this, [this, index, combo] {
            const QVariant data = combo->currentData();
            const Value v = data.isValid() ? Value(data.toString().toStdString()) : Value();
            writeValue(m_fields[index], data.isValid() ? &v : nullptr);
            edited(m_fields[index]);
        });
        f.editor = combo;
    } else if (spec->types.front() == Kind::Bool) {
        auto* check = new QCheckBox(group);
        connect(check, &QCheckBox::toggled, this, [this, index](bool on) {
            const Value v(on);
            writeValue(m_fields[index], &v);
            edited(m_fields[index]);
        });
        f.editor = check;
    } else {
        auto* line = new QLineEdit(group);
        line->setPlaceholderText(spec->defaultValue.isNull() ? QString() : displayText(spec->defaultValue));
        connect(line, &QLineEdit::textEdited, this, [this, index](const QString& text) {
            const Field& field = m_fields[index];
            const std::string t = text.toStdString();
            Value v(t);
            if (hasKind(*field.spec, Kind::Int)) {
                if (auto i = config::pythonInt(t))
                    v = Value(*i);
            } else if (hasKind(*field.spec, Kind::Float)) {
                if (auto d = config::pythonFloat(t))
                    v = Value(*d);
            }
            writeValue(field, text.isEmpty() ? nullptr : &v);
            edited(field);
        });
        f.editor = line;
    }
    f.editor->setObjectName(QStringLiteral("field_") + keyPath);
    f.toolTip = tip;
    f.label = new QLabel(qs(spec->key), group);
    f.editor->setToolTip(tip);
    f.label->setToolTip(tip);
    f.form->addRow(f.label, f.editor);
    m_fields.push_back(f);
}

Value ConfigForm::currentValue(const Field& f) const
{
    if (f.section.empty()) {
        const Value* v = m_config.given().find(f.spec->key);
        return v ? *v : Value();
    }
    const Value* v = m_config.nested(f.section, f.spec->key);
    return v ? *v : Value();
}

void ConfigForm::writeValue(const Field& f, const Value* value)
{
    Value& given = m_config.given();
    if (f.section.empty()) {
        if (value)
            given.set(f.spec->key, *value);
        else
            given.erase(f.spec->key);
        return;
    }
    Value* section = given.find(f.section);
    if (!section || !section->isMap()) {
        if (!value)
            return;
        given.set(f.section, Value::emptyMap());
        section = given.find(f.section);
    }
    if (value)
        section->set(f.spec->key, *value);
    else
        section->erase(f.spec->key);
}

void ConfigForm::edited(const Field& f)
{
    if (f.section.empty() && f.spec->key == "distributed_type") {
        const std::string type = m_config.distributedType();
        keepSectionFor("fsdp_config", type == "FSDP");
        keepSectionFor("deepspeed_config", type == "DEEPSPEED");
    }
    if (f.section.empty() && f.spec->key == "mixed_precision")
        keepSectionFor("fp8_config", m_config.mixedPrecision() == "fp8");
    fillEditors(f.editor);
    updateVisibility();
    emit configEdited();
}

void ConfigForm::keepSectionFor(const std::string& section, bool applies)
{
    // Accelerate writes a section only for its own choice, and one left from an earlier choice
    // would be saved and silently ignored by the launcher: it leaves the config. The form keeps
    // it aside while editing, so FSDP -> DEEPSPEED -> FSDP gets every FSDP answer back.
    const Value* current = m_config.given().find(section);
    const bool empty = !current || !current->isMap() || current->asMap().empty();
    if (applies) {
        if (auto it = m_setAside.find(section); empty && it != m_setAside.end()) {
            m_config.setField(section, it->second);
            m_setAside.erase(it);
        }
        return;
    }
    if (!empty)
        m_setAside[section] = *current;
    m_config.setField(section, Value::emptyMap());
}

void ConfigForm::setConfig(const config::AccelerateConfig& config)
{
    m_setAside.clear(); // another file's answers
    m_config = config;
    fillEditors(nullptr);
    updateVisibility();
}

void ConfigForm::fillEditors(const QWidget* except)
{
    for (const Field& f : m_fields) {
        if (f.editor == except)
            continue;
        const QSignalBlocker block(f.editor);
        const Value v = currentValue(f);
        if (auto* combo = qobject_cast<QComboBox*>(f.editor)) {
            int i = v.isString() ? combo->findData(qs(v.asString())) : -1;
            if (i < 0 && !f.spec->required && v.isNull())
                i = 0;
            if (i < 0 && v.isString()) {
                // A value outside the allowed list stays visible (and validation flags it).
                combo->addItem(qs(v.asString()), qs(v.asString()));
                i = combo->count() - 1;
            }
            combo->setCurrentIndex(std::max(i, 0));
        } else if (auto* check = qobject_cast<QCheckBox*>(f.editor)) {
            const Value shown = v.isNull() ? f.spec->defaultValue : v;
            // 'no' / 'false' strings (downcast_bf16 as the questionnaire writes it) read as off.
            check->setChecked(shown.isString() ? (shown.asString() != "no" && shown.asString() != "false") : shown.truthy());
        } else if (auto* line = qobject_cast<QLineEdit*>(f.editor)) {
            if (line->text() != displayText(v))
                line->setText(displayText(v));
        }
    }
}

void ConfigForm::updateVisibility()
{
    const std::string type = m_config.distributedType();
    const std::int64_t machines = m_config.intField("num_machines").value_or(1);
    m_fsdp->setVisible(type == "FSDP");
    m_deepspeed->setVisible(type == "DEEPSPEED");
    m_multiNode->setVisible(machines > 1);
    const Value* fsdpVersion = m_config.nested("fsdp_config", "fsdp_version");
    const bool fsdp1 = !fsdpVersion || !fsdpVersion->isInt() || fsdpVersion->asInt() == 1;
    auto nestedString = [this](const char* section, const char* key) {
        const Value* v = m_config.nested(section, key);
        return v && v->isString() ? v->asString() : std::string();
    };
    const std::string fp8Backend = nestedString("fp8_config", "backend");
    const std::string dynamoBackend = nestedString("dynamo_config", "dynamo_backend");
    const std::string dsFile = nestedString("deepspeed_config", "deepspeed_config_file");
    const bool dsBuilt = dsFile.empty() || dsFile == "none";
    // The question's "{W}" as Accelerate fills it for the distributed type chosen now.
    const QString word = qs(config::processWord(type));
    for (const Field& f : m_fields) {
        if (f.toolTip.contains(QStringLiteral("{W}"))) {
            const QString tip = QString(f.toolTip).replace(QStringLiteral("{W}"), word);
            f.editor->setToolTip(tip);
            f.label->setToolTip(tip);
        }
        const std::string& key = f.spec->key;
        bool shown = true;
        if (f.section == "fsdp_config")
            shown = fsdp1 || std::find(kFsdp1Keys.begin(), kFsdp1Keys.end(), key) == kFsdp1Keys.end();
        else if (f.section == "deepspeed_config") {
            if (std::find(kDeepSpeedMultiNodeKeys.begin(), kDeepSpeedMultiNodeKeys.end(), key) != kDeepSpeedMultiNodeKeys.end())
                shown = machines > 1;
            else if (key == "offload_param_nvme_path")
                shown = dsBuilt && nestedString("deepspeed_config", "offload_param_device") == "nvme";
            else if (key == "offload_optimizer_nvme_path")
                shown = dsBuilt && nestedString("deepspeed_config", "offload_optimizer_device") == "nvme";
            else if (key != "deepspeed_config_file" && key != "deepspeed_moe_layer_cls_names")
                shown = dsBuilt; // a JSON file holds these itself
        } else if (f.section == "fp8_config") {
            shown = m_config.mixedPrecision() == "fp8";
            if (shown && key != "backend") {
                if (key == "optimization_level")
                    shown = fp8Backend == "MSAMP";
                else if (key == "enable_fsdp_float8_all_gather" || key == "pad_inner_dim")
                    shown = fp8Backend == "AO";
                else
                    shown = fp8Backend == "TE";
            }
        } else if (f.section == "dynamo_config") {
            shown = key == "dynamo_backend" || (!dynamoBackend.empty() && dynamoBackend != "NO");
        } else if (key == "downcast_bf16") {
            shown = type == "XLA"; // only TPUs read it
        } else if (key == "gpu_ids") {
            shown = !m_config.boolField("use_cpu");
        }
        f.form->setRowVisible(f.editor, shown);
    }
}

QWidget* ConfigForm::fieldEditor(const QString& keyPath) const
{
    const std::string path = keyPath.toStdString();
    for (const Field& f : m_fields)
        if (f.keyPath() == path)
            return f.editor;
    return nullptr;
}

bool ConfigForm::isFieldShown(const QString& keyPath) const
{
    const std::string path = keyPath.toStdString();
    for (const Field& f : m_fields)
        if (f.keyPath() == path)
            return !f.group->isHidden() && f.form->isRowVisible(f.editor);
    return false;
}

bool ConfigForm::focusField(const QString& keyPath)
{
    QWidget* editor = fieldEditor(keyPath);
    if (!editor || !isFieldShown(keyPath))
        return false;
    ensureWidgetVisible(editor);
    editor->setFocus(Qt::OtherFocusReason);
    return true;
}

void ConfigForm::focusDiagnostic(const QString& keyPath)
{
    if (focusField(keyPath))
        return;
    const QString top = keyPath.section(QLatin1Char('.'), 0, 0);
    if (focusField(top))
        return;
    if (top == QLatin1String("fsdp_config") || top == QLatin1String("deepspeed_config"))
        focusField(QStringLiteral("distributed_type"));
    else if (top == QLatin1String("fp8_config"))
        focusField(QStringLiteral("mixed_precision"));
}

} // namespace shardscope::ui
