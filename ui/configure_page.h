#pragma once

// The Configure page (docs/DESIGN.md, "The workbench at a glance"): the config and recipe files
// at the top; the wizard, the form and the recipe editor on the left; on the right the file
// exactly as it will be saved above the per-rank memory estimate of the recipe under this config;
// below, validation's errors and warnings (a click goes to the field) and Launch, disabled while
// an error remains. Launch starts `shardscope launch` detached with what is on screen (unsaved
// edits as copies under $SHARDSCOPE_HOME/configure: it never writes the user's files, and bundled
// examples open as templates); the run is opened (runOpened) as soon as the launcher has recorded
// it in the history.

#include "engine/config/accelerate_config.h"
#include "engine/config/memory_estimate.h"
#include "engine/config/recipe.h"
#include "engine/config/validation.h"

#include <QWidget>

#include <filesystem>
#include <optional>

class QCPBars;
class QCPItemText;
class QCheckBox;
class QComboBox;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QVBoxLayout;
class QListView;
class QPlainTextEdit;
class QPushButton;
class QTabWidget;
class QTimer;

namespace shardscope::ui {

class ConfigForm;
class HistoryService;
class ConfigWizard;
class DiagnosticModel;

// Whether `path` is one of Shardscope's bundled examples (under resources/): those open as
// templates and are never written.
bool isBundledExample(const QString& path);

class ConfigurePage : public QWidget {
    Q_OBJECT
public:
    // databaseFile: the run history a launched run is looked up in.
    // `history`: the workbench's history service (where a launched run is looked for); none: its own.
    explicit ConfigurePage(std::filesystem::path databaseFile, QWidget* parent = nullptr, HistoryService* history = nullptr);

    ConfigWizard* wizard() const { return m_wizard; }
    ConfigForm* form() const { return m_form; }
    DiagnosticModel* diagnosticModel() const { return m_diagnostics; }
    const config::AccelerateConfig& currentConfig() const;
    QString previewText() const;
    // Null when the recipe does not parse or the config names no sharding the estimate knows.
    const std::optional<config::MemoryEstimate>& memoryEstimate() const { return m_estimate; }
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

signals:
    void runLaunched(const QString& runName);
    void runOpened(std::int64_t runId);
    void dataPreviewed(bool ok);

private:
    void buildTopBar(QWidget* bar);
    void buildStartPanel(QVBoxLayout* layout);
    void useCpuRanks(); // MULTI_CPU, 2 processes, use_cpu: what runs on any machine
    void buildBottom(QWidget* parent);
    QWidget* buildRecipeTab(QWidget* parent);
    QWidget* buildRecipeForm(QWidget* parent);
    void fillRecipeForm(); // the form's fields from the recipe text
    // Per-rank device bytes by category, host (offloaded) bytes stacked on top.
    void setUpMemoryChart();
    void configChanged(bool modified);
    void recipeChanged();
    void showRecipeKeyHelp();
    void refresh();
    void updateMemoryChart();
    void updateTitles();
    void pollLaunchedRun();
    void showMessage(const QString& text, bool error);
    bool replaceRecipeText(const Result<std::string>& edited);
    // A file for this run's copy of an unsaved config or recipe, under $SHARDSCOPE_HOME/configure.
    QString scratchFile(const QString& fileName) const;
    // The recipe editor's text for such a copy, its relative paths made absolute.
    std::string recipeCopyText() const;
    // Where Save as… starts: the file itself, or for a bundled example its name in the home folder.
    QString saveAsStart(const QString& path) const;
    // True, with the reason shown, when `path` is a bundled example (never written).
    bool refuseBundled(const QString& path);
    void remember(const QString& key, const QString& path) const;

    std::filesystem::path m_databaseFile;
    config::MachineInfo m_machine; // probed once: GPUs and what they support
    int m_physicalCores = 0;
    QString m_configPath;
    QString m_recipePath;
    bool m_configModified = false;
    QString m_openError; // the last Open that failed, until a config is opened, saved or edited
    bool m_recipeModified = false;
    std::optional<config::Recipe> m_recipe;
    QString m_recipeError;
    int m_recipeErrorLine = 0;
    std::optional<config::MemoryEstimate> m_estimate;
    QString m_pendingRun;
    qint64 m_pendingPid = 0; // its launcher
    QString m_pendingOutput; // the launcher's output file
    int m_pollsLeft = 0;

    QWidget* m_startPanel = nullptr; // the first-run path
    QLabel* m_configLabel = nullptr;
    QLabel* m_recipeLabel = nullptr;
    QTabWidget* m_tabs = nullptr;
    ConfigWizard* m_wizard = nullptr;
    ConfigForm* m_form = nullptr;
    QPlainTextEdit* m_recipeEditor = nullptr;
    QLabel* m_recipeStatus = nullptr;
    QLabel* m_recipeKeyHelp = nullptr; // the help of the key under the cursor
    std::vector<std::pair<QString, QWidget*>> m_recipeFields; // the recipe form: key path, editor
    QPlainTextEdit* m_dataPreview = nullptr;
    std::uint64_t m_previewGeneration = 0; // the newest preview asked for; older answers are dropped
    QPlainTextEdit* m_preview = nullptr;
    QLabel* m_memorySummary = nullptr;
    QCustomPlot* m_memoryChart = nullptr;
    QCPBars* m_deviceBars = nullptr;
    QCPBars* m_hostBars = nullptr;
    std::vector<QCPItemText*> m_barLabels; // a value above each bar
    DiagnosticModel* m_diagnostics = nullptr;
    QListView* m_diagnosticView = nullptr;
    QLabel* m_problems = nullptr;
    QLabel* m_message = nullptr;
    QPushButton* m_launch = nullptr;
    QPushButton* m_fixButton = nullptr; // "Fix: …", shown when a problem has a one-click fix
    std::optional<config::ConfigFix> m_fix;
    QComboBox* m_runKind = nullptr; // "Engine recipe" / "Accelerate script"
    QCheckBox* m_profile = nullptr; // an engine run's --profile
    QWidget* m_scriptRow = nullptr;
    QLineEdit* m_scriptPath = nullptr;
    QLineEdit* m_scriptArgs = nullptr;
    QLineEdit* m_python = nullptr;
    QLineEdit* m_scriptCommand = nullptr; // read-only, selectable: the exact command
    void buildScriptRow(QWidget* parent, QVBoxLayout* layout);
    std::vector<config::Diagnostic> scriptDiagnostics(QStringList& texts);
    QTimer* m_pollTimer = nullptr;
    HistoryService* m_history = nullptr;
    bool m_polling = false; // a look for the launched run is on its way
};

} // namespace shardscope::ui
