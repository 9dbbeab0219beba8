#pragma once

// Configure → Tune…: whether the tuner can try what the page shows (a saved recipe, run in the
// engine, on this machine), where the files it chooses go (beside the recipe, or beside the
// history for a bundled example), and its one dialog: kept while the tuner runs (Tune… shows it
// again), replaced by a new one otherwise. "Use this" comes back as useChosen.

#include <QObject>
#include <QString>

namespace shardscope::ui {

class TuneDialog;

// What the Configure page shows, as Tune… needs it.
struct TuneInputs {
    bool scriptMode = false; // "Run my Accelerate script"
    QString target; // "" (this machine) or a cluster's
    QString recipePath; // empty: not saved yet
    bool recipeModified = false;
    int processes = 1; // the config's num_processes
    QString mixedPrecision; // the config's
    QString settingsFile; // the workbench's ini, beside the history
};

// Why Tune… cannot run on `inputs`; empty when it can.
QString tuneRefusal(const TuneInputs& inputs);
// Where the tuner writes the config and recipe it chooses.
QString tuneOutputFolder(const TuneInputs& inputs);

class TuneStarter : public QObject {
    Q_OBJECT
public:
    // The dialog's parent: the page.
    explicit TuneStarter(QWidget* page);

    // Opens the tuner's dialog on `inputs` (the one running, if any); empty, or why not.
    QString open(const TuneInputs& inputs);
    TuneDialog* dialog() const { return m_dialog; }

signals:
    void useChosen(const QString& configPath, const QString& recipePath);

private:
    QWidget* m_page = nullptr;
    TuneDialog* m_dialog = nullptr;
};

} // namespace shardscope::ui
