#include "ui/diagnostic_model.h"

#include <QApplication>
#include <QBrush>
#include <QColor>
#include <QStyle>

#include <algorithm>

namespace shardscope::ui {

DiagnosticModel::DiagnosticModel(QObject* parent) : QAbstractListModel(parent) { }

void DiagnosticModel::setDiagnostics(std::vector<config::Diagnostic> diagnostics, QStringList texts)
{
    beginResetModel();
    m_diagnostics = std::move(diagnostics);
    m_texts = std::move(texts);
    while (m_texts.size() < static_cast<qsizetype>(m_diagnostics.size()))
        m_texts << QString::fromStdString(m_diagnostics[static_cast<std::size_t>(m_texts.size())].message);
    endResetModel();
}

int DiagnosticModel::errorCount() const
{
    return static_cast<int>(std::count_if(m_diagnostics.begin(), m_diagnostics.end(),
                                          [](const auto& d) { return d.severity == config::Severity::Error; }));
}

int DiagnosticModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_diagnostics.size());
}

QVariant DiagnosticModel::data(const QModelIndex& index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& d = m_diagnostics[static_cast<std::size_t>(index.row())];
    const bool error = d.severity == config::Severity::Error;
    switch (role) {
    case Qt::DisplayRole:
        return m_texts.value(index.row());
    case Qt::ToolTipRole:
        return tr("%1 (click to go to the field)").arg(QString::fromStdString(d.keyPath));
    case Qt::DecorationRole:
        if (qobject_cast<QApplication*>(QCoreApplication::instance()))
            return QApplication::style()->standardIcon(error ? QStyle::SP_MessageBoxCritical : QStyle::SP_MessageBoxWarning);
        return {};
    case Qt::ForegroundRole:
        return QBrush(error ? QColor(0xc6, 0x28, 0x28) : QColor(0xa0, 0x6a, 0x00));
    case KeyPathRole:
        return QString::fromStdString(d.keyPath);
    case IsErrorRole:
        return error;
    default:
        return {};
    }
}

} // namespace shardscope::ui
