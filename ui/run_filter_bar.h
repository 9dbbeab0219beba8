#pragma once

// The Runs page's filters above its table: the search box (Ctrl+F), the status, type, precision
// and tag choices, and the count of runs shown. Each choice sets its filter of the proxy; the
// type, precision and tag choices offer what the listed runs have (a choice made stays while the
// list changes).

#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;

namespace shardscope::ui {

class RunFilterProxyModel;
class RunListModel;

class RunFilterBar : public QWidget {
    Q_OBJECT
public:
    RunFilterBar(RunListModel* model, RunFilterProxyModel* proxy, QWidget* parent = nullptr);

    // The type, precision and tag choices from the model's runs; then the count.
    void updateChoices();
    void updateCount(); // "N of M runs"

private:
    RunListModel* m_model = nullptr;
    RunFilterProxyModel* m_proxy = nullptr;
    QLineEdit* m_search = nullptr;
    QComboBox* m_statusBox = nullptr;
    QComboBox* m_typeBox = nullptr;
    QComboBox* m_precisionBox = nullptr;
    QComboBox* m_tagBox = nullptr;
    QLabel* m_count = nullptr;
};

} // namespace shardscope::ui
