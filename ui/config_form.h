#pragma once

// The whole config as a form, grouped as Accelerate groups it (machine, distribution, FSDP,
// DeepSpeed, precision, dynamo, multi-node), built from the schema (engine/accelerate/schema.h). A
// field shows only when it applies to the config as it stands: FSDP keys under FSDP, DeepSpeed
// keys under DEEPSPEED, FP8 keys under fp8, multi-node keys when num_machines > 1. Every field
// carries the schema's help and the question `accelerate config` asks for it as its tooltip.
// Edits go straight into the config's value tree; a value that does not parse as its type is
// kept as typed (a string) so that validation, not the form, says what is wrong.

#include "engine/accelerate/accelerate_config.h"
#include "engine/accelerate/schema.h"

#include <QScrollArea>

#include <map>
#include <string>
#include <vector>

class QFormLayout;
class QGroupBox;
class QLabel;
class QVBoxLayout;

namespace shardscope::ui {

class ConfigForm : public QScrollArea {
    Q_OBJECT
public:
    explicit ConfigForm(QWidget* parent = nullptr);

    void setConfig(const config::AccelerateConfig& config);
    const config::AccelerateConfig& config() const { return m_config; }

    // "num_processes", "fsdp_config.fsdp_version": the editor of that key, or nullptr.
    QWidget* fieldEditor(const QString& keyPath) const;
    // Whether the key's field applies to the config now (its section and its row are shown).
    bool isFieldShown(const QString& keyPath) const;
    // Scrolls to the field and focuses it; false when it has none or it does not apply now.
    bool focusField(const QString& keyPath);
    // The field a diagnostic's key names, or the next best: a nested key without a field of its
    // own (or one that does not apply) goes to its section, then to the switch that shows it.
    void focusDiagnostic(const QString& keyPath);

signals:
    void configEdited();

private:
    struct Field {
        std::string section; // empty: top level
        const config::KeySpec* spec = nullptr;
        QWidget* editor = nullptr;
        QFormLayout* form = nullptr;
        QGroupBox* group = nullptr;
        QLabel* label = nullptr;
        QString toolTip; // "{W}" as in Accelerate's question, filled for the distributed type
        std::string keyPath() const { return section.empty() ? spec->key : section + "." + spec->key; }
    };

    QGroupBox* addGroup(const QString& title, const QString& name);
    void addField(QGroupBox* group, const std::string& section, const std::string& key);
    void addSection(QGroupBox* group, const std::string& section);
    config::Value currentValue(const Field& f) const; // null: absent
    void writeValue(const Field& f, const config::Value* value);
    void edited(const Field& f);
    void fillEditors(const QWidget* except);
    void updateVisibility();
    // The section's answers leave the config when it stops applying and come back when it applies again.
    void keepSectionFor(const std::string& section, bool applies);

    config::AccelerateConfig m_config;
    std::map<std::string, config::Value> m_setAside; // sections that do not apply now, by name
    std::vector<Field> m_fields;
    QVBoxLayout* m_layout = nullptr;
    QGroupBox* m_fsdp = nullptr;
    QGroupBox* m_deepspeed = nullptr;
    QGroupBox* m_multiNode = nullptr;
};

} // namespace shardscope::ui
