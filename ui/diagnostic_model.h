#pragma once

// The errors and warnings of the config being edited (engine/accelerate/validation.h) plus the
// recipe's parse error, as a list a view shows and a click maps back to a field (KeyPathRole).

#include "engine/accelerate/validation.h"

#include <QAbstractListModel>

#include <vector>

namespace shardscope::ui {

class DiagnosticModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { KeyPathRole = Qt::UserRole + 1, IsErrorRole };
    // Diagnostics about the recipe carry this key path (the config's keys never start with it).
    static constexpr const char* kRecipeKeyPath = "recipe";

    explicit DiagnosticModel(QObject* parent = nullptr);

    // texts: one line per diagnostic (formatDiagnostic's), same order as diagnostics.
    void setDiagnostics(std::vector<config::Diagnostic> diagnostics, QStringList texts);
    const std::vector<config::Diagnostic>& diagnostics() const { return m_diagnostics; }
    int errorCount() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

private:
    std::vector<config::Diagnostic> m_diagnostics;
    QStringList m_texts;
};

} // namespace shardscope::ui
