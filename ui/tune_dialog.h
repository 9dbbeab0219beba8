#pragma once

// Configure → Tune…: `shardscope tune` of the recipe with the config's process count, run in the
// background (the GUI waits for nothing), its trials shown as a table and as a chart of
// throughput against measured memory per rank (the winner marked). "Use this" opens the config
// and recipe the tuner wrote (new files; the user's stay as they are) in the Configure page.

#include <QDialog>
#include <QJsonObject>

class QCustomPlot;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace shardscope::ui {

struct CommandAnswer;
class ShardscopeCommand;

class TuneDialog : public QDialog {
    Q_OBJECT

public:
    // `outDir`: where the chosen files go (the recipe's folder, or the workbench's for a bundled one).
    // `mixedPrecision`: the config's, which every trial keeps (the tuner never changes the numbers).
    TuneDialog(const QString& recipePath, int numProcesses, const QString& mixedPrecision, const QString& outDir,
               QWidget* parent = nullptr);

    // Starts the tuner with these budgets (the Start button's); empty, or why it cannot.
    QString start(const QString& memoryBudget, int timeBudgetSeconds);
    bool running() const;
    int trialRows() const;
    QString best() const { return m_report.value("best").toString(); }
    QString chosenConfig() const { return m_report.value("config").toString(); }
    QString chosenRecipe() const { return m_report.value("recipe").toString(); }
    QString statusText() const;

signals:
    void finished(bool ok);
    void useChosen(const QString& configPath, const QString& recipePath);

private:
    void showReport(const QJsonObject& report);
    void ended(const CommandAnswer& answer); // the tuner's process is gone

    QString m_recipePath;
    int m_numProcesses;
    QString m_mixedPrecision;
    QString m_outDir;
    QLineEdit* m_budget = nullptr;
    QSpinBox* m_time = nullptr;
    QPushButton* m_start = nullptr;
    QPushButton* m_use = nullptr;
    QLabel* m_status = nullptr;
    QTableWidget* m_table = nullptr;
    QCustomPlot* m_chart = nullptr;
    ShardscopeCommand* m_command = nullptr; // `shardscope tune --json`
    QJsonObject m_report;
};

} // namespace shardscope::ui
