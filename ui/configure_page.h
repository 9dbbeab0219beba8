#pragma once

// The Configure page (docs/DESIGN.md, "The workbench at a glance"): the config and recipe files
// at the top; the wizard, the form and the recipe editor on the left; on the right the file
// exactly as it will be saved above the per-rank memory estimate of the recipe under this config;
// below, validation's errors and warnings (a click goes to the field) and Launch, disabled while
// an error remains. Launch starts `shardscope launch` detached with what is on screen (unsaved
// edits as copies under $SHARDSCOPE_HOME/configure: it never writes the user's files, and bundled
// examples open as templates); the run is opened (runOpened) as soon as the launcher has recorded
// it in the history.

#include "engine/accelerate/accelerate_config.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/plan/run_plan.h"
#include "engine/accelerate/validation.h"
#include "ui/configure_check.h"
#include "ui/run_launcher.h"

#include <QWidget>

#include <cstdint>
#include <filesystem>
#include <optional>

class QPlainTextEdit;
class QTabWidget;

namespace shardscope::ui {

class BatchScriptDialog;
class ClusterProfilesDialog;
class ConfigForm;
class ConfigWizard;
class DiagnosticModel;
class FileBar;
class HistoryService;
class LaunchController;
class LaunchPanel;
class MemoryChart;
class RecipeDataCheck;
class RecipeEditor;
class StartPanel;
class TuneDialog;
class TuneStarter;

class ConfigurePage : public QWidget {
    Q_OBJECT
public:
    // databaseFile: the run history a launched run is looked up in.
    // `history`: the workbench's history service (where a launched run is looked for); none: its own.
    explicit ConfigurePage(std::filesystem::path databaseFile, QWidget* parent = nullptr, HistoryService* history = nullptr);
    // A `shardscope clusters` or dry run still running is killed with its part, its answer dropped.
    ~ConfigurePage() override = default;

    ConfigWizard* wizard() const { return m_wizard; }
    ConfigForm* form() const { return m_form; }
    DiagnosticModel* diagnosticModel() const;
    const config::AccelerateConfig& currentConfig() const;
    QString previewText() const;
    // Null when the recipe does not parse or the config names no sharding the estimate knows.
    const std::optional<config::MemoryEstimate>& memoryEstimate() const;
    // The config and the recipe on screen, planned as `shardscope launch` would plan them here.
    const config::PlanResult& planResult() const { return m_check.plan; }
    // The values written above the memory chart's bars (parameters, gradients, optimizer, activations).
    QStringList memoryBarLabels() const;
    bool canLaunch() const;
    QString configPath() const { return m_configPath; }
    QString recipePath() const { return m_recipePath; }
    // The machine the config is checked against (probed when the page is made); tests set it.
    void setMachine(const config::MachineInfo& machine);

public slots:
    bool openConfigFile(const QString& path);
    // Opens the config and recipe last opened or saved (remembered beside the run history).
    void restoreLastFiles();
    QString settingsFile() const; // the workbench's settings, beside the run history
    std::optional<QString> withYamlSuffix(const QString& path);
    void checkRecipeDataInBackground(const std::optional<config::Recipe>& recipe);
    bool saveConfigTo(const QString& path);
    bool openRecipeFile(const QString& path);
    bool saveRecipeTo(const QString& path);
    void setRecipeText(const QString& yaml);
    // The recipe editor's "Model folder…": sets model.pretrained in the recipe text (an edit the
    // user can undo; comments and other lines kept). False, with the reason in the recipe's
    // status line, when the text cannot be edited so.
    bool setModelFolder(const QString& dir);
    // The recipe editor's "Data files…" and "Tokenizer…": data.type tokens with these files (and
    // data.tokenizer, when `tokenizer` is not empty), as setModelFolder edits the text.
    bool setDataFiles(const QStringList& files, const QString& tokenizer = QString());
    // The recipe form's edit of one key (section.key): the text changed as Model folder… changes it.
    bool setRecipeValue(const QString& keyPath, const QString& value);
    // "Preview data": reads and tokenizes the recipe's data off the GUI thread, then shows its
    // statistics and rank 0's first batch decoded (dataPreviewText); dataPreviewed when done.
    void previewData();
    QString dataPreviewText() const;
    // The problem list's one-click fix (config::fixFor), when one is offered: applies it as an
    // edit. False when none is offered.
    bool applyFix();
    // Goes to the field a diagnostic names (the form's field, or the recipe editor's line).
    void goToDiagnostic(const QString& keyPath);
    // Empty on success, else why nothing was launched (also shown on the page).
    QString launch();
    // The start panel's "Try the demo": two CPU ranks (MULTI_CPU, use_cpu) and the bundled demo
    // recipe, ready to Launch.
    void startDemo();
    // What Launch runs (the "Run" choice): the recipe in the engine, or the user's own Accelerate
    // script through the real `accelerate launch` (`shardscope launch --script`), checked as the
    // launcher will check it (the silent degradations of Accelerate on this machine refused).
    void setScriptMode(bool script);
    bool scriptMode() const;
    // The script, its arguments (as on a command line) and the Python whose accelerate runs it
    // (empty: the active virtual environment, else python3).
    void setScript(const QString& path, const QString& arguments = {}, const QString& python = {});
    // In script mode, the command the launcher will run, as a shell would take it; else empty.
    QString scriptCommand() const;

    // Where Launch runs: "" (this machine) or "slurm:NAME", a profile `shardscope clusters --json`
    // lists ($SHARDSCOPE_HOME/clusters.ini). False when no such target is offered.
    bool setTarget(const QString& target);
    QString target() const;
    QStringList targets() const; // the targets the choice offers, "" first
    // Asks `shardscope clusters --json` again (ui/target_choice.h, in the background);
    // targetsLoaded when done.
    void refreshTargets();
    // The cluster profiles' editor (the target choice's last item, "Cluster profiles…"); what it
    // saves is offered as a target at once.
    ClusterProfilesDialog* editClusterProfiles();
    // A SLURM target's batch script, as `shardscope launch --dry-run` writes it for what Launch
    // would submit now, shown in a dialog whose Submit submits exactly that (same run name, same
    // files); batchScriptShown when it is there. Empty on success, else why not.
    QString showBatchScript();
    // Tune…: `shardscope tune` of the saved recipe with this config's process count, in a dialog;
    // empty, or why not (a recipe not saved yet, a script run, a cluster target).
    QString tune();
    TuneDialog* tuneDialog() const;
    QString batchScriptText() const;
    QString submitShownScript();

signals:
    void runLaunched(const QString& runName);
    void runOpened(std::int64_t runId);
    void dataPreviewed(bool ok);
    void targetsLoaded();
    void batchScriptShown();
    // The recipe's data files were read (off the GUI thread) and the problems refreshed.
    void dataChecked();

protected:
    void showEvent(QShowEvent* event) override; // the first time: the cluster targets listed

private:
    void connectBottom();
    void connectFileBarAndStartPanel();
    void useCpuRanks(); // MULTI_CPU, 2 processes, use_cpu: what runs on any machine
    void configChanged(bool modified);
    void refresh();
    void updateTitles();
    void showMessage(const QString& text, bool error);
    // True, with the reason shown, when `path` is a bundled example (never written).
    bool refuseBundled(const QString& path);
    void remember(const QString& key, const QString& path) const;
    // What Launch would start now (unsaved files copied to scratch files); empty, or why not.
    QString prepareLaunch(LaunchRequest& request);

    std::filesystem::path m_databaseFile;
    config::MachineInfo m_machine; // probed once: GPUs and what they support
    int m_physicalCores = 0;
    QString m_configPath;
    QString m_recipePath;
    bool m_configModified = false;
    QString m_openError; // the last Open that failed, until a config is opened, saved or edited
    bool m_recipeModified = false;
    ConfigureCheck m_check; // of what is on screen

    LaunchController* m_launcher = nullptr;
    RecipeDataCheck* m_dataCheck = nullptr; // the recipe's data files, read in the background
    TuneStarter* m_tune = nullptr; // Tune… and its dialog
    FileBar* m_fileBar = nullptr;
    StartPanel* m_startPanel = nullptr; // the first-run path
    QTabWidget* m_tabs = nullptr;
    ConfigWizard* m_wizard = nullptr;
    ConfigForm* m_form = nullptr;
    RecipeEditor* m_recipeEditor = nullptr;
    QPlainTextEdit* m_preview = nullptr;
    MemoryChart* m_memoryChart = nullptr;
    LaunchPanel* m_bottom = nullptr; // the problems, the script's row, the target and Launch
    BatchScriptDialog* m_batchScript = nullptr; // made by the first Batch script…
    bool m_targetsAsked = false;
};

} // namespace shardscope::ui
