#include "ui/configure_page.h"

#include "engine/accelerate/yaml_io.h"
#include "engine/plan/machine_probe.h"
#include "ui/batch_script_dialog.h"
#include "ui/config_form.h"
#include "ui/config_wizard.h"
#include "ui/diagnostic_model.h"
#include "ui/file_bar.h"
#include "ui/format.h"
#include "ui/history_service.h"
#include "ui/launch_controller.h"
#include "ui/launch_panel.h"
#include "ui/memory_chart.h"
#include "ui/recipe_data_check.h"
#include "ui/recipe_editor.h"
#include "ui/script_panel.h"
#include "ui/start_panel.h"
#include "ui/target_choice.h"
#include "ui/tune_starter.h"

#include <QDateTime>
#include <QFileInfo>
#include <QFontDatabase>
#include <QPlainTextEdit>
#include <QSettings>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace shardscope::ui {

namespace {

int processesOf(const config::AccelerateConfig& cfg)
{
    return static_cast<int>(std::max<std::int64_t>(1, cfg.intField("num_processes").value_or(1)));
}

} // namespace

ConfigurePage::ConfigurePage(std::filesystem::path databaseFile, QWidget* parent, HistoryService* history)
    : QWidget(parent), m_databaseFile(std::move(databaseFile)), m_machine(config::probeMachine()),
      m_physicalCores(config::physicalCoreCount()),
      m_launcher(new LaunchController(m_databaseFile, history ? history : new HistoryService(this), this))
{
    m_dataCheck = new RecipeDataCheck(this);
    m_tune = new TuneStarter(this);
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

    m_bottom = new LaunchPanel(vertical);
    vertical->setStretchFactor(0, 4);
    vertical->setStretchFactor(1, 1);
    layout->addWidget(vertical, 1);

    connectFileBarAndStartPanel();
    connectBottom();
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
    connect(m_dataCheck, &RecipeDataCheck::checked, this, [this] {
        refresh();
        emit dataChecked();
    });

    // Accelerate's default file is what `accelerate launch` uses without --config_file; start there.
    const QString defaultFile = qs(config::defaultConfigFile());
    if (!(QFileInfo::exists(defaultFile) && openConfigFile(defaultFile)))
        configChanged(false);
    setRecipeText(qs(config::recipeToYaml(config::Recipe{})));
    m_recipeModified = false;
    updateTitles();
}

// The problems, the script's row, Launch and its neighbours (ui/launch_panel.h); Tune… and the
// batch script of a cluster target.
void ConfigurePage::connectBottom()
{
    connect(m_bottom, &LaunchPanel::launchRequested, this, [this] { launch(); });
    connect(m_bottom, &LaunchPanel::fixRequested, this, &ConfigurePage::applyFix);
    connect(m_bottom, &LaunchPanel::diagnosticChosen, this, &ConfigurePage::goToDiagnostic);
    connect(m_bottom, &LaunchPanel::runChanged, this, &ConfigurePage::refresh);
    connect(m_bottom, &LaunchPanel::targetsLoaded, this, &ConfigurePage::targetsLoaded);
    connect(m_bottom, &LaunchPanel::batchScriptRequested, this, [this] { showBatchScript(); });
    connect(m_bottom, &LaunchPanel::tuneRequested, this, [this] {
        if (const QString why = tune(); !why.isEmpty())
            showMessage(why, true);
    });
    connect(m_tune, &TuneStarter::useChosen, this, [this](const QString& configPath, const QString& recipePath) {
        openConfigFile(configPath);
        openRecipeFile(recipePath);
    });
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

DiagnosticModel* ConfigurePage::diagnosticModel() const { return m_bottom->diagnostics(); }

QStringList ConfigurePage::memoryBarLabels() const { return m_memoryChart->barLabels(); }

void ConfigurePage::setMachine(const config::MachineInfo& machine)
{
    m_machine = machine;
    refresh();
}

bool ConfigurePage::canLaunch() const { return m_bottom->canLaunch(); }

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
    if (!named || refuseBundled(*named))
        return false;
    const QString& path = *named;
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
    m_dataCheck->forget(); // opened: its data read again, as it is now
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
    if (!named || refuseBundled(*named))
        return false;
    const QString& path = *named;
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

void ConfigurePage::previewData() { m_recipeEditor->previewData(processesOf(currentConfig())); }

void ConfigurePage::checkRecipeDataInBackground(const std::optional<config::Recipe>& recipe)
{
    m_dataCheck->check(recipe, m_recipePath);
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
    checkRecipeDataInBackground(m_recipeEditor->recipe());
    ConfigureInputs inputs(cfg, m_configPath, m_machine, m_physicalCores, m_recipeEditor->recipe(), m_recipeEditor->sourceName(),
                           m_recipeEditor->error(), scriptMode(), std::vector<config::Diagnostic>(), QStringList(),
                           m_dataCheck->problem());
    inputs.clusterTarget = !target().isEmpty();
    if (inputs.script)
        inputs.scriptProblems = m_bottom->scriptPanel()->check(cfg, m_configPath, m_machine, inputs.scriptTexts);
    m_check = checkConfigure(inputs);
    m_bottom->showCheck(m_check, m_openError);
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

void ConfigurePage::showMessage(const QString& text, bool error) { m_bottom->showMessage(text, error); }

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

void ConfigurePage::setScriptMode(bool script) { m_bottom->setScriptMode(script); }

bool ConfigurePage::scriptMode() const { return m_bottom && m_bottom->scriptMode(); }

void ConfigurePage::setScript(const QString& path, const QString& arguments, const QString& python)
{
    m_bottom->scriptPanel()->setScript(path, arguments, python);
}

QString ConfigurePage::scriptCommand() const { return scriptMode() ? m_bottom->scriptPanel()->command() : QString(); }

QString ConfigurePage::prepareLaunch(LaunchRequest& request)
{
    if (!canLaunch()) {
        const QString why = tr("Fix the errors first.");
        showMessage(why, true);
        return why;
    }
    request.numProcesses = processesOf(currentConfig());
    m_bottom->fillRequest(request);
    const auto& recipe = m_recipeEditor->recipe();
    const QString stem = scriptMode() ? QFileInfo(request.scriptFile).completeBaseName()
                         : recipe     ? qs(recipe->name)
                                      : QStringLiteral("run");
    request.runName = QStringLiteral("%1-%2").arg(stem, QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    const QString error = m_launcher->setRunFiles(request,
                                                  {&currentConfig(), m_configPath, m_configModified, !scriptMode(), m_recipePath,
                                                   m_recipeModified, [this] { return m_recipeEditor->copyText(); }});
    if (!error.isEmpty())
        showMessage(error, true);
    return error;
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

void ConfigurePage::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (!m_targetsAsked) {
        m_targetsAsked = true;
        refreshTargets();
    }
}

bool ConfigurePage::setTarget(const QString& target) { return m_bottom->targetChoice()->setTarget(target); }
QString ConfigurePage::target() const { return m_bottom ? m_bottom->targetChoice()->target() : QString(); }
QStringList ConfigurePage::targets() const { return m_bottom->targetChoice()->targets(); }
void ConfigurePage::refreshTargets() { m_bottom->targetChoice()->refresh(); }
ClusterProfilesDialog* ConfigurePage::editClusterProfiles() { return m_bottom->targetChoice()->editProfiles(); }

QString ConfigurePage::showBatchScript()
{
    if (target().isEmpty())
        return tr("The batch script is for a SLURM target.");
    if (m_batchScript && m_batchScript->writing())
        return tr("The batch script is being written.");
    LaunchRequest request;
    if (QString why = prepareLaunch(request); !why.isEmpty())
        return why;
    if (!m_batchScript) {
        m_batchScript = new BatchScriptDialog(m_launcher, this);
        connect(m_batchScript, &BatchScriptDialog::scriptShown, this, &ConfigurePage::batchScriptShown);
        connect(m_batchScript, &BatchScriptDialog::failed, this, [this](const QString& said) { showMessage(said, true); });
    }
    m_batchScript->showScriptOf(request);
    return {};
}

QString ConfigurePage::tune()
{
    return m_tune->open({scriptMode(), target(), m_recipePath, m_recipeModified, processesOf(currentConfig()),
                         qs(currentConfig().mixedPrecision()), settingsFile()});
}

TuneDialog* ConfigurePage::tuneDialog() const { return m_tune->dialog(); }

QString ConfigurePage::batchScriptText() const { return m_batchScript ? m_batchScript->scriptText() : QString(); }

QString ConfigurePage::submitShownScript() { return m_batchScript ? m_batchScript->submit() : tr("No batch script is shown."); }

} // namespace shardscope::ui
