#include "ui/configure_page.h"

#include "ui/cluster_profiles_dialog.h"
#include "ui/tune_dialog.h"

#include "engine/plan/machine_probe.h"
#include "engine/accelerate/yaml_io.h"
#include "ui/config_form.h"
#include "ui/config_wizard.h"
#include "ui/diagnostic_model.h"
#include "ui/file_bar.h"
#include "ui/format.h"
#include "ui/history_service.h"
#include "ui/launch_controller.h"
#include "ui/memory_chart.h"
#include "ui/recipe_editor.h"
#include "ui/script_panel.h"
#include "ui/start_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QPointer>
#include <QSettings>
#include <QThreadPool>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace shardscope::ui {

namespace {

// The target choice's last item: it opens the cluster profiles' editor.
constexpr const char* kEditProfiles = "edit-cluster-profiles";

} // namespace

// The problems (with the one-click fix), the script row, the message and Launch.
void ConfigurePage::buildBottom(QWidget* parent)
{
    auto* bottom = new QWidget(parent);
    auto* bottomLayout = new QVBoxLayout(bottom);
    bottomLayout->setContentsMargins(0, 0, 0, 0);
    m_diagnostics = new DiagnosticModel(this);
    m_diagnosticView = new QListView(bottom);
    m_diagnosticView->setObjectName(QStringLiteral("diagnostics"));
    m_diagnosticView->setModel(m_diagnostics);
    m_diagnosticView->setWordWrap(true);
    m_problems = new QLabel(bottom);
    m_problems->setObjectName(QStringLiteral("problemsSummary"));
    bottomLayout->addWidget(m_problems);
    auto* launchRow = new QHBoxLayout;
    m_message = new QLabel(bottom);
    m_message->setObjectName(QStringLiteral("configureMessage"));
    m_message->setWordWrap(true);
    // A message may hold a long path (a word that cannot wrap): it must not widen the window past
    // the screen and push Launch off it (#45 point 1); it wraps, or is cut, in the room there is.
    m_message->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_message->setMinimumWidth(200);
    m_launch = new QPushButton(tr("Launch"), bottom);
    m_launch->setObjectName(QStringLiteral("launchButton"));
    m_launch->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    m_launch->setToolTip(tr("Start `shardscope launch` with the config and the recipe as shown (Ctrl+Enter)"));
    launchRow->addWidget(m_message, 1);
    m_runKind = new QComboBox(bottom);
    m_runKind->setObjectName(QStringLiteral("runKind"));
    m_runKind->addItem(tr("Run the recipe (engine)"));
    m_runKind->addItem(tr("Run my Accelerate script"));
    m_runKind->setToolTip(tr("What Launch starts: the recipe in Shardscope's engine, or your own Accelerate or Trainer "
                             "script through the real `accelerate launch`, with this config"));
    launchRow->addWidget(m_runKind);
    m_profile = new QCheckBox(tr("Profile"), bottom);
    m_profile->setObjectName(QStringLiteral("profileRun"));
    m_profile->setToolTip(tr("Trace steps 3-7 (or the recipe's profile window) for the Trace page: "
                             "`shardscope launch --profile`"));
    launchRow->addWidget(m_profile);
    m_target = new QComboBox(bottom);
    m_target->setObjectName(QStringLiteral("runTarget"));
    m_target->addItem(tr("This machine"), QString());
    m_target->setToolTip(tr("Where Launch runs: this machine, or a SLURM cluster profile of clusters.ini "
                            "(`shardscope launch --target slurm:NAME`)"));
    launchRow->addWidget(m_target);
    m_batchScriptButton = new QPushButton(tr("Batch script…"), bottom);
    m_batchScriptButton->setObjectName(QStringLiteral("batchScriptButton"));
    m_batchScriptButton->setToolTip(tr("Show the sbatch script Launch would submit, and submit it from there"));
    m_batchScriptButton->setVisible(false);
    launchRow->addWidget(m_batchScriptButton);
    m_target->addItem(tr("Cluster profiles…"), QString::fromLatin1(kEditProfiles));
    connect(m_target, &QComboBox::currentIndexChanged, this, [this] {
        if (m_target->currentData().toString() == QLatin1String(kEditProfiles)) {
            const QSignalBlocker blocker(m_target);
            m_target->setCurrentIndex(m_lastTargetIndex); // an action, not a target
            editClusterProfiles();
            return;
        }
        m_lastTargetIndex = m_target->currentIndex();
        const bool cluster = !target().isEmpty();
        m_batchScriptButton->setVisible(cluster);
        m_profile->setVisible(!cluster && !scriptMode()); // a job does not profile yet
    });
    connect(m_batchScriptButton, &QPushButton::clicked, this, [this] { showBatchScript(); });
    m_tuneButton = new QPushButton(tr("Tune…"), bottom);
    m_tuneButton->setObjectName(QStringLiteral("tuneButton"));
    m_tuneButton->setToolTip(tr("Find the fastest sharding, micro-batch, checkpointing and offload of this recipe that fit a "
                                "memory budget per rank: short trials, one at a time (`shardscope tune`)"));
    connect(m_tuneButton, &QPushButton::clicked, this, [this] {
        if (const QString why = tune(); !why.isEmpty())
            showMessage(why, true);
    });
    launchRow->addWidget(m_tuneButton);
    launchRow->addWidget(m_launch);
    bottomLayout->addWidget(m_diagnosticView, 1);
    m_fixButton = new QPushButton(bottom);
    m_fixButton->setObjectName(QStringLiteral("applyFix"));
    m_fixButton->setToolTip(tr("Change the config so that it runs on this machine (an edit: save it to keep it)"));
    m_fixButton->setVisible(false);
    connect(m_fixButton, &QPushButton::clicked, this, &ConfigurePage::applyFix);
    auto* fixRow = new QHBoxLayout;
    fixRow->addWidget(m_fixButton);
    fixRow->addStretch(1);
    bottomLayout->addLayout(fixRow);
    m_scriptPanel = new ScriptPanel(bottom);
    m_scriptPanel->setVisible(false);
    bottomLayout->addWidget(m_scriptPanel);
    connect(m_scriptPanel, &ScriptPanel::edited, this, &ConfigurePage::refresh);
    connect(m_runKind, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_scriptPanel->setVisible(index == 1);
        m_profile->setVisible(index == 0 && target().isEmpty()); // a script profiles itself (docs/SCRIPTS.md)
        refresh();
    });
    bottomLayout->addLayout(launchRow);
}

ConfigurePage::ConfigurePage(std::filesystem::path databaseFile, QWidget* parent, HistoryService* history)
    : QWidget(parent), m_databaseFile(std::move(databaseFile)), m_machine(config::probeMachine()),
      m_physicalCores(config::physicalCoreCount()),
      m_launcher(new LaunchController(m_databaseFile, history ? history : new HistoryService(this), this))
{
    auto* layout = new QVBoxLayout(this);
    m_fileBar = new FileBar(this);
    layout->addWidget(m_fileBar);
    m_startPanel = new StartPanel(this);
    layout->addWidget(m_startPanel);

    auto* vertical = new QSplitter(Qt::Vertical, this);
    auto* horizontal = new QSplitter(Qt::Horizontal, vertical);

    m_tabs = new QTabWidget(horizontal);
    m_tabs->setObjectName(QStringLiteral("configureTabs"));
    m_wizard = new ConfigWizard({}, m_tabs);
    m_wizard->setObjectName(QStringLiteral("wizard"));
    m_form = new ConfigForm(m_tabs);
    m_form->setObjectName(QStringLiteral("form"));
    m_recipeEditor = new RecipeEditor(m_tabs);
    m_tabs->addTab(m_form, tr("Form"));
    m_tabs->addTab(m_wizard, tr("Wizard"));
    m_tabs->addTab(m_recipeEditor, tr("Recipe"));

    auto* right = new QSplitter(Qt::Vertical, horizontal);
    m_preview = new QPlainTextEdit(right);
    m_preview->setObjectName(QStringLiteral("yamlPreview"));
    m_preview->setReadOnly(true);
    m_preview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_memoryChart = new MemoryChart(right);
    right->setStretchFactor(0, 1);
    right->setStretchFactor(1, 1);
    horizontal->setStretchFactor(0, 1);
    horizontal->setStretchFactor(1, 1);

    buildBottom(vertical);
    vertical->setStretchFactor(0, 4);
    vertical->setStretchFactor(1, 1);
    layout->addWidget(vertical, 1);

    connectFileBarAndStartPanel();
    connect(m_launcher, &LaunchController::runLaunched, this, &ConfigurePage::runLaunched);
    connect(m_launcher, &LaunchController::runOpened, this, &ConfigurePage::runOpened);
    connect(m_launcher, &LaunchController::message, this, &ConfigurePage::showMessage);
    connect(m_form, &ConfigForm::configEdited, this, [this] { configChanged(true); });
    connect(m_wizard, &ConfigWizard::configFinished, this, [this](const config::AccelerateConfig& cfg) {
        m_form->setConfig(cfg);
        configChanged(true);
    });
    connect(m_recipeEditor, &RecipeEditor::textEdited, this, [this] { m_recipeModified = true; });
    connect(m_recipeEditor, &RecipeEditor::recipeChanged, this, &ConfigurePage::refresh);
    connect(m_recipeEditor, &RecipeEditor::previewRequested, this, &ConfigurePage::previewData);
    connect(m_recipeEditor, &RecipeEditor::dataPreviewed, this, &ConfigurePage::dataPreviewed);
    connect(m_diagnosticView, &QListView::clicked, this,
            [this](const QModelIndex& index) { goToDiagnostic(index.data(DiagnosticModel::KeyPathRole).toString()); });
    connect(m_diagnosticView, &QListView::activated, this,
            [this](const QModelIndex& index) { goToDiagnostic(index.data(DiagnosticModel::KeyPathRole).toString()); });
    connect(m_launch, &QPushButton::clicked, this, [this] { launch(); });

    // Accelerate's default file is what `accelerate launch` uses without --config_file; start there.
    const QString defaultFile = qs(config::defaultConfigFile());
    if (!(QFileInfo::exists(defaultFile) && openConfigFile(defaultFile)))
        configChanged(false);
    setRecipeText(qs(config::recipeToYaml(config::Recipe{})));
    m_recipeModified = false;
    updateTitles();
}

// The top bar's files and the first-run path's choices.
void ConfigurePage::connectFileBarAndStartPanel()
{
    connect(m_fileBar, &FileBar::openConfig, this, &ConfigurePage::openConfigFile);
    connect(m_fileBar, &FileBar::saveConfig, this, &ConfigurePage::saveConfigTo);
    connect(m_fileBar, &FileBar::openRecipe, this, &ConfigurePage::openRecipeFile);
    connect(m_fileBar, &FileBar::saveRecipe, this, &ConfigurePage::saveRecipeTo);
    connect(m_startPanel, &StartPanel::demoRequested, this, &ConfigurePage::startDemo);
    connect(m_startPanel, &StartPanel::exampleChosen, this, [this](const QString& path) {
        if (openRecipeFile(path))
            useCpuRanks();
    });
    connect(m_startPanel, &StartPanel::scriptChosen, this, [this](const QString& path) {
        useCpuRanks();
        setScriptMode(true);
        setScript(path);
        m_startPanel->hide();
    });
    connect(m_startPanel, &StartPanel::dismissed, this,
            [this] { remember(QStringLiteral("configure/startDismissed"), QStringLiteral("1")); });
}

void ConfigurePage::useCpuRanks()
{
    // What runs on any machine: data parallelism over two CPU ranks (Gloo).
    config::AccelerateConfig cfg = currentConfig();
    cfg.setField("distributed_type", config::Value("MULTI_CPU"));
    cfg.setField("num_processes", config::Value(2));
    cfg.setField("use_cpu", config::Value(true));
    m_form->setConfig(cfg);
    configChanged(true);
}

void ConfigurePage::startDemo()
{
    useCpuRanks();
    setScriptMode(false);
    if (!openRecipeFile(qs(config::resourcesFolder()) + QStringLiteral("/recipes/demo-gpt.yaml")))
        return;
    m_startPanel->hide();
    showMessage(tr("The demo is ready: Launch trains a small GPT on two CPU ranks (%1), and the Run page "
                   "opens as it starts. The recipe is a bundled example: Save as… to keep changes.")
                    .arg(demoLength()),
                false);
}

const config::AccelerateConfig& ConfigurePage::currentConfig() const { return m_form->config(); }

QString ConfigurePage::previewText() const { return m_preview->toPlainText(); }

const std::optional<config::MemoryEstimate>& ConfigurePage::memoryEstimate() const { return m_check.estimate; }

QStringList ConfigurePage::memoryBarLabels() const { return m_memoryChart->barLabels(); }

void ConfigurePage::setMachine(const config::MachineInfo& machine)
{
    m_machine = machine;
    refresh();
}

bool ConfigurePage::canLaunch() const { return m_launch->isEnabled(); }

bool ConfigurePage::openConfigFile(const QString& path)
{
    auto loaded = config::loadAccelerateConfig(path.toStdString());
    if (!loaded) {
        // The form keeps the config it had; the problem line says so, not "valid".
        m_openError = tr("%1 was not opened; the form still shows %2.")
                          .arg(path, m_configPath.isEmpty() ? tr("the new config") : m_configPath);
        refresh();
        showMessage(qs(loaded.error().message), true);
        return false;
    }
    m_openError.clear();
    m_configPath = path;
    m_form->setConfig(*loaded);
    configChanged(false);
    remember(QStringLiteral("configure/lastConfig"), path);
    showMessage(tr("Opened %1").arg(path), false);
    return true;
}

QString ConfigurePage::settingsFile() const { return qs((m_databaseFile.parent_path() / "workbench.ini").string()); }

void ConfigurePage::remember(const QString& key, const QString& path) const
{
    QSettings settings(settingsFile(), QSettings::IniFormat);
    settings.setValue(key, QFileInfo(path).absoluteFilePath());
}

void ConfigurePage::restoreLastFiles()
{
    QSettings settings(settingsFile(), QSettings::IniFormat);
    if (!settings.value(QStringLiteral("configure/startDismissed")).toString().isEmpty())
        m_startPanel->hide();
    const QString config = settings.value(QStringLiteral("configure/lastConfig")).toString();
    const QString recipe = settings.value(QStringLiteral("configure/lastRecipe")).toString();
    if (!config.isEmpty() && QFileInfo::exists(config))
        openConfigFile(config);
    if (!recipe.isEmpty() && QFileInfo::exists(recipe))
        openRecipeFile(recipe);
    if (!m_recipePath.isEmpty())
        m_startPanel->hide(); // not the first run: the user's own files are back
}

bool ConfigurePage::refuseBundled(const QString& path)
{
    if (!isBundledExample(path))
        return false;
    showMessage(tr("%1 is one of Shardscope's bundled examples and stays as it is: use Save as… to keep your "
                   "changes in a file of your own.")
                    .arg(path),
                true);
    return true;
}

// A name typed without an extension gets ".yaml" (the Open dialogs list *.yaml and *.yml; a file
// saved as "mine" was then hidden from them). The dialog asked about the name typed, not this one:
// an existing file of that name is not replaced.
std::optional<QString> ConfigurePage::withYamlSuffix(const QString& path)
{
    if (!QFileInfo(path).suffix().isEmpty())
        return path;
    const QString named = path + QStringLiteral(".yaml");
    if (QFileInfo::exists(named)) {
        showMessage(tr("%1 exists: choose it in Save as… to replace it, or give another name").arg(named), true);
        return std::nullopt;
    }
    return named;
}

bool ConfigurePage::saveConfigTo(const QString& given)
{
    const auto named = withYamlSuffix(given);
    if (!named)
        return false;
    const QString& path = *named;
    if (refuseBundled(path))
        return false;
    if (auto r = config::saveAccelerateConfig(currentConfig(), path.toStdString()); !r) {
        showMessage(qs(r.error().message), true);
        return false;
    }
    m_configPath = path;
    m_openError.clear();
    configChanged(false);
    remember(QStringLiteral("configure/lastConfig"), path);
    showMessage(tr("Saved %1").arg(path), false);
    return true;
}

bool ConfigurePage::openRecipeFile(const QString& path)
{
    const auto text = config::readTextFile(path.toStdString());
    if (!text) {
        showMessage(qs(text.error().message), true);
        return false;
    }
    m_recipePath = path;
    m_dataCheckKey.clear(); // opened: its data read again, as it is now
    m_recipeEditor->setPath(path);
    setRecipeText(qs(*text));
    m_recipeModified = false;
    updateTitles();
    remember(QStringLiteral("configure/lastRecipe"), path);
    showMessage(tr("Opened %1").arg(path), false);
    return true;
}

bool ConfigurePage::saveRecipeTo(const QString& given)
{
    const auto named = withYamlSuffix(given);
    if (!named)
        return false;
    const QString& path = *named;
    if (refuseBundled(path))
        return false;
    if (auto written = config::writeTextFile(path.toStdString(), m_recipeEditor->text().toStdString()); !written) {
        showMessage(qs(written.error().message), true);
        return false;
    }
    m_recipePath = path;
    m_recipeModified = false;
    m_recipeEditor->setPath(path); // parsed again: its relative paths are the file's now
    remember(QStringLiteral("configure/lastRecipe"), path);
    showMessage(tr("Saved %1").arg(path), false);
    return true;
}

void ConfigurePage::setRecipeText(const QString& yaml) { m_recipeEditor->setText(yaml); }

void ConfigurePage::configChanged(bool modified)
{
    m_configModified = modified;
    if (modified)
        m_openError.clear();
    refresh();
}

bool ConfigurePage::setModelFolder(const QString& dir) { return m_recipeEditor->setModelFolder(dir); }

bool ConfigurePage::setDataFiles(const QStringList& files, const QString& tokenizer)
{
    return m_recipeEditor->setDataFiles(files, tokenizer);
}

bool ConfigurePage::setRecipeValue(const QString& keyPath, const QString& value)
{
    return m_recipeEditor->setRecipeValue(keyPath, value);
}

QString ConfigurePage::dataPreviewText() const { return m_recipeEditor->dataPreviewText(); }

void ConfigurePage::previewData()
{
    m_recipeEditor->previewData(
        static_cast<int>(std::max<std::int64_t>(1, currentConfig().intField("num_processes").value_or(1))));
}

// The recipe's data files are read as the launcher reads them before any rank starts (a missing
// text file passed the page as "Problems: none" and failed at launch), on a thread of their own:
// a corpus may be large, and the GUI never waits on the disk. Read again when what they depend on
// changes; an answer for a recipe edited since is dropped.
void ConfigurePage::checkRecipeDataInBackground(const std::optional<config::Recipe>& recipe)
{
    const std::string key = recipe ? config::recipeToYaml(*recipe) : std::string();
    if (key == m_dataCheckKey)
        return;
    m_dataCheckKey = key;
    m_dataProblem.clear();
    if (!recipe)
        return;
    const std::uint64_t generation = ++m_dataCheckGeneration;
    config::Recipe resolved = *recipe;
    // Relative paths are the recipe file's, as the launcher reads them (config::loadRecipe).
    if (!m_recipePath.isEmpty())
        config::resolveRecipePaths(resolved, QFileInfo(m_recipePath).absolutePath().toStdString());
    QThreadPool::globalInstance()->start([page = QPointer<ConfigurePage>(this), recipe = std::move(resolved), generation] {
        const auto checked = config::checkRecipeInputs(recipe);
        const QString problem = checked ? QString() : qs(checked.error().message);
        // Delivered on the GUI thread (the application object's), where the page is looked at: a
        // QPointer read here could race with the page's destruction (as trace_page and recipe_editor).
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [page, generation, problem] {
                if (!page || generation != page->m_dataCheckGeneration)
                    return;
                page->m_dataProblem = problem;
                page->refresh();
                emit page->dataChecked();
            },
            Qt::QueuedConnection);
    });
}

void ConfigurePage::refresh()
{
    const auto& cfg = currentConfig();
    const bool json = !m_configPath.isEmpty() && config::formatForPath(m_configPath.toStdString()) == config::FileFormat::Json;
    const QString text = qs(json ? config::toJsonText(cfg) : config::toYamlText(cfg));
    if (m_preview->toPlainText() != text)
        m_preview->setPlainText(text);

    // Checked as `shardscope launch` will check it (ui/configure_check.h): Launch stays disabled
    // while an error remains, instead of a launch that reports success and never starts.
    ConfigureInputs inputs{cfg,
                           m_configPath,
                           m_machine,
                           m_physicalCores,
                           m_recipeEditor->recipe(),
                           m_recipeEditor->sourceName(),
                           m_recipeEditor->error(),
                           scriptMode(),
                           {},
                           {},
                           {}};
    if (inputs.script)
        inputs.scriptProblems = m_scriptPanel->check(cfg, m_configPath, m_machine, inputs.scriptTexts);
    checkRecipeDataInBackground(inputs.recipe);
    inputs.dataProblem = m_dataProblem;
    m_check = checkConfigure(inputs);
    m_fixButton->setVisible(m_check.fix.has_value());
    if (m_check.fix)
        m_fixButton->setText(tr("Fix: %1").arg(qs(m_check.fix->label)));
    m_diagnostics->setDiagnostics(m_check.problems, m_check.texts);
    const int errors = m_diagnostics->errorCount();
    const int warnings = m_diagnostics->rowCount() - errors;
    m_problems->setText(
        (m_openError.isEmpty() ? QString()
                               : QStringLiteral("<span style=\"color:#c62828\">%1</span> ").arg(m_openError.toHtmlEscaped()))
        + (m_diagnostics->rowCount() == 0
               ? tr("<b>Problems:</b> none; the config on screen is valid.")
               : tr("<b>Problems:</b> %1 error(s), %2 warning(s) (click one to go to its field)").arg(errors).arg(warnings)));
    m_launch->setEnabled(errors == 0);
    m_launch->setToolTip(
        errors == 0 ? (scriptMode() ? tr("Start your script with `shardscope launch --script` and the config as shown "
                                         "(Ctrl+Enter); unsaved edits go to a copy for the run, your files stay as they are")
                                    : tr("Start `shardscope launch` with the config and the recipe as shown (Ctrl+Enter); "
                                         "unsaved edits go to a copy for the run, your files stay as they are"))
                    : tr("%n error(s) to fix first", nullptr, errors));
    m_memoryChart->show(m_check.estimate, m_check.memorySummary);
    updateTitles();
}

bool ConfigurePage::applyFix()
{
    if (!m_check.fix)
        return false;
    config::AccelerateConfig fixed = currentConfig();
    for (const auto& [key, value] : m_check.fix->set)
        fixed.setField(key, value);
    const QString label = qs(m_check.fix->label);
    m_form->setConfig(fixed);
    configChanged(true);
    showMessage(tr("Changed the config: %1").arg(label), false);
    return true;
}

void ConfigurePage::updateTitles() { m_fileBar->setFiles(m_configPath, m_configModified, m_recipePath, m_recipeModified); }

void ConfigurePage::showMessage(const QString& text, bool error)
{
    m_message->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    m_message->setText(text);
}

void ConfigurePage::goToDiagnostic(const QString& keyPath)
{
    if (keyPath == QLatin1String(DiagnosticModel::kRecipeKeyPath)) {
        m_tabs->setCurrentWidget(m_recipeEditor);
        m_recipeEditor->goToError();
        return;
    }
    m_tabs->setCurrentWidget(m_form);
    m_form->focusDiagnostic(keyPath);
}

void ConfigurePage::setScriptMode(bool script) { m_runKind->setCurrentIndex(script ? 1 : 0); }

bool ConfigurePage::scriptMode() const { return m_runKind && m_runKind->currentIndex() == 1; }

void ConfigurePage::setScript(const QString& path, const QString& arguments, const QString& python)
{
    m_scriptPanel->setScript(path, arguments, python);
}

QString ConfigurePage::scriptCommand() const { return scriptMode() ? m_scriptPanel->command() : QString(); }

QString ConfigurePage::prepareLaunch(LaunchRequest& request)
{
    if (!canLaunch()) {
        const QString why = tr("Fix the errors first.");
        showMessage(why, true);
        return why;
    }
    request.numProcesses = static_cast<int>(std::max<std::int64_t>(1, currentConfig().intField("num_processes").value_or(1)));
    request.target = target();
    const auto& recipe = m_recipeEditor->recipe();
    QString stem = recipe ? qs(recipe->name) : QStringLiteral("run");
    if (scriptMode()) {
        request.scriptFile = m_scriptPanel->script();
        request.workerArgs = splitCommandLine(m_scriptPanel->arguments());
        request.python = m_scriptPanel->python();
        stem = QFileInfo(request.scriptFile).completeBaseName();
    }
    request.runName = QStringLiteral("%1-%2").arg(stem, QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    // The launcher reads files, and Launch writes none the user did not save: what is on screen
    // and unsaved goes to a copy for this run under $SHARDSCOPE_HOME/configure; the opened files
    // (bundled examples among them) stay as they are, and so does their "modified" mark.
    request.configFile = m_configPath;
    if (m_configModified || m_configPath.isEmpty()) {
        request.configFile = m_launcher->scratchFile(request.runName + QStringLiteral("-config.yaml"));
        if (auto r = config::saveAccelerateConfig(currentConfig(), request.configFile.toStdString()); !r) {
            showMessage(qs(r.error().message), true);
            return m_message->text();
        }
    }
    if (!scriptMode()) {
        request.profile = m_profile->isChecked() && request.target.isEmpty();
        request.recipeFile = m_recipePath;
        if (m_recipeModified || m_recipePath.isEmpty()) {
            request.recipeFile = m_launcher->scratchFile(request.runName + QStringLiteral("-recipe.yaml"));
            if (auto r = config::writeTextFile(request.recipeFile.toStdString(), m_recipeEditor->copyText()); !r) {
                showMessage(qs(r.error().message), true);
                return m_message->text();
            }
        }
    }
    return {};
}

QString ConfigurePage::launch()
{
    LaunchRequest request;
    if (QString why = prepareLaunch(request); !why.isEmpty())
        return why;
    const QString error = m_launcher->start(request);
    if (!error.isEmpty())
        showMessage(error, true);
    return error;
}

ConfigurePage::~ConfigurePage()
{
    // A `shardscope clusters` or dry run still running must not report into a page being torn down.
    for (QProcess* process : {m_clusters, m_dryRun})
        if (process) {
            process->disconnect(this);
            process->kill();
            process->waitForFinished(5000);
        }
}

void ConfigurePage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (!m_targetsAsked) {
        m_targetsAsked = true;
        refreshTargets();
    }
}

bool ConfigurePage::setTarget(const QString& target)
{
    const int index = m_target->findData(target);
    if (index < 0)
        return false;
    m_target->setCurrentIndex(index);
    return true;
}

QString ConfigurePage::target() const { return m_target ? m_target->currentData().toString() : QString(); }

QStringList ConfigurePage::targets() const
{
    QStringList all;
    for (int i = 0; i < m_target->count(); ++i)
        if (m_target->itemData(i).toString() != QLatin1String(kEditProfiles))
            all << m_target->itemData(i).toString();
    return all;
}

ClusterProfilesDialog* ConfigurePage::editClusterProfiles()
{
    auto* dialog = new ClusterProfilesDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ClusterProfilesDialog::profilesChanged, this, &ConfigurePage::refreshTargets);
    dialog->open();
    return dialog;
}

void ConfigurePage::refreshTargets()
{
    if (m_clusters)
        return; // one is on its way
    m_clusters = new QProcess(this);
    m_clusters->setProcessChannelMode(QProcess::MergedChannels);
    connect(m_clusters, &QProcess::finished, this, [this] {
        const QString said = QString::fromUtf8(m_clusters->readAll());
        m_clusters->deleteLater();
        m_clusters = nullptr;
        targetsListed(said);
    });
    connect(m_clusters, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
        if (error != QProcess::FailedToStart)
            return;
        m_clusters->deleteLater();
        m_clusters = nullptr;
        targetsListed({});
    });
    m_clusters->start(launcherProgram(), {QStringLiteral("clusters")});
}

void ConfigurePage::targetsListed(const QString& clustersOutput)
{
    const QString chosen = target();
    const QSignalBlocker blocker(m_target);
    while (m_target->count() > 1)
        m_target->removeItem(1);
    for (const QString& t : slurmTargets(clustersOutput))
        m_target->addItem(tr("SLURM: %1").arg(t.mid(QStringLiteral("slurm:").size())), t);
    m_target->addItem(tr("Cluster profiles…"), QString::fromLatin1(kEditProfiles));
    // What `shardscope clusters` said (each profile, SLURM's partitions, or why there are none).
    m_target->setToolTip(tr("Where Launch runs: this machine, or a SLURM cluster profile "
                            "(`shardscope launch --target slurm:NAME`).\n\n%1")
                             .arg(clustersOutput.trimmed().isEmpty() ? tr("No cluster profiles.") : clustersOutput.trimmed()));
    m_target->setCurrentIndex(std::max(0, m_target->findData(chosen)));
    m_lastTargetIndex = m_target->currentIndex();
    m_batchScriptButton->setVisible(!target().isEmpty());
    emit targetsLoaded();
}

QString ConfigurePage::showBatchScript()
{
    if (target().isEmpty())
        return tr("The batch script is for a SLURM target.");
    if (m_dryRun)
        return tr("The batch script is being written.");
    LaunchRequest request;
    if (QString why = prepareLaunch(request); !why.isEmpty())
        return why;
    m_shownRequest = request;
    request.dryRun = true;
    m_dryRun = new QProcess(this);
    m_dryRun->setProcessChannelMode(QProcess::MergedChannels);
    connect(m_dryRun, &QProcess::finished, this, [this](int exitCode, QProcess::ExitStatus status) {
        const QString said = QString::fromUtf8(m_dryRun->readAll());
        m_dryRun->deleteLater();
        m_dryRun = nullptr;
        if (status != QProcess::NormalExit || exitCode != 0) {
            showMessage(said.trimmed(), true);
            return;
        }
        if (!m_batchScriptDialog) {
            m_batchScriptDialog = new QDialog(this);
            m_batchScriptDialog->setObjectName(QStringLiteral("batchScriptDialog"));
            auto* layout = new QVBoxLayout(m_batchScriptDialog);
            m_batchScriptView = new QPlainTextEdit(m_batchScriptDialog);
            m_batchScriptView->setObjectName(QStringLiteral("batchScript"));
            m_batchScriptView->setReadOnly(true);
            m_batchScriptView->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
            layout->addWidget(m_batchScriptView);
            auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, m_batchScriptDialog);
            auto* submit = buttons->addButton(tr("Submit"), QDialogButtonBox::AcceptRole);
            submit->setObjectName(QStringLiteral("submitJob"));
            connect(buttons, &QDialogButtonBox::rejected, m_batchScriptDialog, &QDialog::reject);
            connect(submit, &QPushButton::clicked, this, [this] { submitShownScript(); });
            layout->addWidget(buttons);
            m_batchScriptDialog->resize(760, 560);
        }
        m_batchScriptDialog->setWindowTitle(tr("Batch script of %1 (%2)").arg(m_shownRequest.runName, m_shownRequest.target));
        m_batchScriptView->setPlainText(said);
        m_batchScriptDialog->show();
        emit batchScriptShown();
    });
    m_dryRun->start(launcherProgram(), launchArguments(request));
    return {};
}

QString ConfigurePage::tune()
{
    if (scriptMode())
        return tr("Tune… tries the recipe in Shardscope's engine; choose \"Run the recipe (engine)\".");
    if (!target().isEmpty())
        return tr("Tune… runs its trials on this machine; choose \"This machine\" as the target.");
    if (m_recipePath.isEmpty() || m_recipeModified)
        return tr("Save the recipe first: the tuner's trials read it from its file.");
    if (m_tuneDialog && m_tuneDialog->running()) {
        m_tuneDialog->show();
        return {};
    }
    // The chosen files go beside the recipe, or beside the history for a bundled example.
    const QString outDir = isBundledExample(m_recipePath)
                               ? QDir(QFileInfo(settingsFile()).absolutePath()).filePath(QStringLiteral("tuned"))
                               : QFileInfo(m_recipePath).absolutePath();
    QDir().mkpath(outDir);
    const int processes = static_cast<int>(std::max<std::int64_t>(1, currentConfig().intField("num_processes").value_or(1)));
    if (m_tuneDialog)
        m_tuneDialog->deleteLater();
    m_tuneDialog = new TuneDialog(m_recipePath, processes, qs(currentConfig().mixedPrecision()), outDir, this);
    connect(m_tuneDialog, &TuneDialog::useChosen, this, [this](const QString& configPath, const QString& recipePath) {
        openConfigFile(configPath);
        openRecipeFile(recipePath);
    });
    m_tuneDialog->show();
    return {};
}

QString ConfigurePage::batchScriptText() const { return m_batchScriptView ? m_batchScriptView->toPlainText() : QString(); }

QString ConfigurePage::submitShownScript()
{
    if (m_shownRequest.runName.isEmpty())
        return tr("No batch script is shown.");
    const QString error = m_launcher->start(m_shownRequest);
    if (!error.isEmpty()) {
        showMessage(error, true);
        return error;
    }
    m_shownRequest = {};
    if (m_batchScriptDialog)
        m_batchScriptDialog->accept();
    return {};
}

} // namespace shardscope::ui
