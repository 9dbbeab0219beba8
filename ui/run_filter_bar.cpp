#include "ui/run_filter_bar.h"

#include "ui/format.h"
#include "ui/run_list_model.h"

#include <QAction>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>

#include <set>

namespace shardscope::ui {

namespace {

constexpr storage::RunStatus kStatuses[] = {storage::RunStatus::Pending,   storage::RunStatus::Running,
                                            storage::RunStatus::Completed, storage::RunStatus::Failed,
                                            storage::RunStatus::Cancelled, storage::RunStatus::Interrupted};

// Keeps the current choice of a filter combo box while its items change.
void setChoices(QComboBox* box, const QStringList& values)
{
    const QString current = box->currentData().toString();
    const QSignalBlocker blocker(box);
    while (box->count() > 1)
        box->removeItem(1);
    for (const auto& value : values)
        box->addItem(value, value);
    const int index = box->findData(current);
    box->setCurrentIndex(index < 0 ? 0 : index);
}

QComboBox* choice(QWidget* parent, const char* name, const QString& any, const QVariant& anyData)
{
    auto* box = new QComboBox(parent);
    box->setObjectName(QLatin1String(name));
    box->addItem(any, anyData);
    return box;
}

} // namespace

RunFilterBar::RunFilterBar(RunListModel* model, RunFilterProxyModel* proxy, QWidget* parent)
    : QWidget(parent), m_model(model), m_proxy(proxy)
{
    m_search = new QLineEdit(this);
    m_search->setObjectName(QStringLiteral("runSearch"));
    m_search->setPlaceholderText(tr("Search name, tags, directory…  (Ctrl+F)"));
    m_search->setClearButtonEnabled(true);
    auto* focusSearch = new QAction(this);
    focusSearch->setShortcut(QKeySequence::Find);
    connect(focusSearch, &QAction::triggered, m_search, [this] {
        m_search->setFocus();
        m_search->selectAll();
    });
    addAction(focusSearch);
    m_statusBox = choice(this, "statusFilter", tr("Any status"), -1);
    for (auto status : kStatuses)
        m_statusBox->addItem(statusText(status), static_cast<int>(status));
    m_typeBox = choice(this, "typeFilter", tr("Any type"), QString());
    m_precisionBox = choice(this, "precisionFilter", tr("Any precision"), QString());
    m_tagBox = choice(this, "tagFilter", tr("Any tag"), QString());
    m_count = new QLabel(this);
    m_count->setObjectName(QStringLiteral("runCount"));
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_search, 2);
    for (QWidget* w : std::initializer_list<QWidget*>{m_statusBox, m_typeBox, m_precisionBox, m_tagBox, m_count})
        layout->addWidget(w);

    connect(m_search, &QLineEdit::textChanged, this, [this](const QString& text) {
        m_proxy->setTextFilter(text);
        updateCount();
    });
    connect(m_statusBox, &QComboBox::currentIndexChanged, this, [this] {
        const int status = m_statusBox->currentData().toInt();
        m_proxy->setStatusFilter(status < 0 ? std::nullopt : std::optional(static_cast<storage::RunStatus>(status)));
        updateCount();
    });
    connect(m_typeBox, &QComboBox::currentIndexChanged, this, [this] {
        m_proxy->setTypeFilter(m_typeBox->currentData().toString());
        updateCount();
    });
    connect(m_precisionBox, &QComboBox::currentIndexChanged, this, [this] {
        m_proxy->setPrecisionFilter(m_precisionBox->currentData().toString());
        updateCount();
    });
    connect(m_tagBox, &QComboBox::currentIndexChanged, this, [this] {
        m_proxy->setTagFilter(m_tagBox->currentData().toString());
        updateCount();
    });
}

void RunFilterBar::updateChoices()
{
    std::set<QString> types, precisions, tags;
    for (const auto& run : m_model->runs()) {
        if (!run.distributedType.empty())
            types.insert(qs(run.distributedType));
        if (!run.mixedPrecision.empty())
            precisions.insert(qs(run.mixedPrecision));
        for (const auto& tag : run.tags)
            tags.insert(qs(tag));
    }
    setChoices(m_typeBox, QStringList(types.begin(), types.end()));
    setChoices(m_precisionBox, QStringList(precisions.begin(), precisions.end()));
    setChoices(m_tagBox, QStringList(tags.begin(), tags.end()));
    updateCount();
}

void RunFilterBar::updateCount() { m_count->setText(tr("%1 of %2 runs").arg(m_proxy->rowCount()).arg(m_model->rowCount())); }

} // namespace shardscope::ui
