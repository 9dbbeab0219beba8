#include "ui/rank_log_view.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace shardscope::ui {

RankLogView::RankLogView(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    m_rankBox = new QComboBox(this);
    m_rankBox->setObjectName(QStringLiteral("logRank"));
    m_filter = new QLineEdit(this);
    m_filter->setObjectName(QStringLiteral("logFilter"));
    m_filter->setPlaceholderText(tr("Filter log lines…"));
    m_filter->setClearButtonEnabled(true);
    bar->addWidget(new QLabel(tr("Log of"), this));
    bar->addWidget(m_rankBox);
    bar->addWidget(m_filter, 1);
    layout->addLayout(bar);
    m_view = new QPlainTextEdit(this);
    m_view->setObjectName(QStringLiteral("logView"));
    m_view->setReadOnly(true);
    m_view->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_view->setMaximumBlockCount(20000);
    m_view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    layout->addWidget(m_view);
    connect(m_rankBox, &QComboBox::currentIndexChanged, this, &RankLogView::restart);
    connect(m_filter, &QLineEdit::textChanged, this, &RankLogView::applyFilter);
}

void RankLogView::setRanks(int ranks, std::optional<int> failingRank)
{
    ranks = std::max(ranks, 1);
    if (ranks != m_rankCount) {
        const QSignalBlocker blocker(m_rankBox);
        const int keep = m_rankBox->currentIndex();
        m_rankBox->clear();
        for (int r = 0; r < ranks; ++r)
            m_rankBox->addItem(tr("rank %1").arg(r), r);
        m_rankBox->setCurrentIndex(keep >= 0 && keep < ranks ? keep : 0);
        m_rankCount = ranks;
        restart();
    }
    // The failing rank: red in the list, and its log shown once when the failure is first seen.
    if (failingRank && *failingRank < m_rankBox->count()) {
        const int failing = *failingRank;
        const QString label = tr("rank %1 — failed").arg(failing);
        if (m_rankBox->itemText(failing) != label) {
            m_rankBox->setItemText(failing, label);
            m_rankBox->setItemData(failing, QColor(0xd6, 0x27, 0x28), Qt::ForegroundRole);
            m_rankBox->setCurrentIndex(failing);
        }
    }
}

int RankLogView::rank() const { return m_rankBox->currentData().isValid() ? m_rankBox->currentData().toInt() : 0; }

void RankLogView::setRank(int rank) { m_rankBox->setCurrentIndex(rank); }

void RankLogView::setFilter(const QString& text) { m_filter->setText(text); }

QString RankLogView::text() const { return m_view->toPlainText(); }

void RankLogView::clear()
{
    m_rankCount = 0;
    m_rankBox->clear();
    m_lines.clear();
    m_view->clear();
    m_offset = 0;
    m_partial.clear();
}

void RankLogView::restart()
{
    ++m_generation; // bytes already on their way belong to the log shown before
    m_lines.clear();
    m_offset = 0;
    m_partial.clear();
    m_view->clear();
    emit reloadRequested();
}

void RankLogView::append(const QByteArray& bytes)
{
    if (bytes.isEmpty())
        return;
    m_offset += static_cast<std::uint64_t>(bytes.size());
    QString text = m_partial + QString::fromUtf8(bytes);
    const auto lastNewline = text.lastIndexOf(QLatin1Char('\n'));
    m_partial = text.mid(lastNewline + 1);
    if (lastNewline < 0)
        return;
    const QStringList lines = text.left(lastNewline).split(QLatin1Char('\n'));
    m_lines += lines;
    const QString filter = m_filter->text();
    for (const auto& line : lines)
        if (filter.isEmpty() || line.contains(filter, Qt::CaseInsensitive))
            m_view->appendPlainText(line);
}

void RankLogView::applyFilter()
{
    const QString filter = m_filter->text();
    QStringList shown;
    for (const auto& line : std::as_const(m_lines))
        if (filter.isEmpty() || line.contains(filter, Qt::CaseInsensitive))
            shown << line;
    m_view->setPlainText(shown.join(QLatin1Char('\n')));
}

} // namespace shardscope::ui
