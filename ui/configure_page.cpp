#include "ui/configure_page.h"

#include "engine/config/data_preview.h"
#include "engine/config/hf_config_keys.h"
#include "engine/config/machine_probe.h"
#include "engine/config/model_architecture.h"
#include "engine/config/recipe_keys.h"
#include "engine/config/run_plan.h"
#include "engine/config/script_plan.h"
#include "storage/config_diff.h"
#include "storage/run_store.h"
#include "storage/store_paths.h"
#include "ui/config_form.h"
#include "ui/config_wizard.h"
#include "ui/diagnostic_model.h"
#include "ui/format.h"
#include "ui/history_service.h"
#include "ui/run_launcher.h"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QScrollArea>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QTabWidget>
#include <QTextBlock>
#include <QThreadPool>
#include <QTimer>
#include <QVBoxLayout>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>

namespace shardscope::ui {

namespace {

// The recipe form's keys: what most recipes set (the rest are in the YAML and docs/RECIPES.md).
constexpr const char* kRecipeFormKeys[] = {"model.type",
                                           "model.pretrained",
                                           "model.block_size",
                                           "data.type",
                                           "data.path",
                                           "data.tokenizer",
                                           "optimizer.type",
                                           "optimizer.lr",
                                           "optimizer.weight_decay",
                                           "schedule.type",
                                           "schedule.warmup_steps",
                                           "training.max_steps",
                                           "training.per_device_batch_size",
                                           "training.gradient_accumulation_steps",
                                           "training.max_grad_norm",
                                           "training.eval_every",
                                           "training.checkpoint_every"};

QStringList toQStringList(const std::vector<std::string>& texts)
{
    QStringList out;
    for (const auto& t : texts)
        out << qs(t);
    return out;
}

config::OptimizerKind optimizerOf(const config::Recipe& r)
{
    if (r.optimizer.type == "sgd")
        return r.optimizer.momentum > 0 ? config::OptimizerKind::SgdMomentum : config::OptimizerKind::Sgd;
    return config::OptimizerKind::Adam;
}

bool writeText(const QString& path, const std::string& text, QString* error)
{
    std::ofstream out(path.toStdString(), std::ios::binary);
    out << text;
    if (!out) {
        *error = QObject::tr("Cannot write %1").arg(path);
        return false;
    }
    return true;
}

// The path with links resolved as far as it exists (a file to be saved need not exist yet).
QString resolvedPath(const QString& path)
{
    const QFileInfo info(path);
    if (info.exists())
        return info.canonicalFilePath();
    const QString folder = QFileInfo(info.absolutePath()).canonicalFilePath();
    return folder.isEmpty() ? info.absoluteFilePath() : folder + QLatin1Char('/') + info.fileName();
}

QString readText(const QString& path, bool* ok)
{
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    *ok = static_cast<bool>(in);
    return qs(s.str());
}

} // namespace

bool isBundledExample(const QString& path)
{
    const QString resources = QFileInfo(qs(config::resourcesFolder())).canonicalFilePath();
    return !path.isEmpty() && !resources.isEmpty() && resolvedPath(path).startsWith(resources + QLatin1Char('/'));
}

// The Recipe tab: the pickers (model folder, data files, tokenizer) and Preview data above the
// editor, its status line and the data preview below.
QWidget* ConfigurePage::buildRecipeTab(QWidget* parent)
{
    auto* recipeTab = new QWidget(parent);
    auto* recipeLayout = new QVBoxLayout(recipeTab);
    m_recipeEditor = new QPlainTextEdit(recipeTab);
    m_recipeEditor->setObjectName(QStringLiteral("recipeEditor"));
    m_recipeEditor->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_recipeStatus = new QLabel(recipeTab);
    m_recipeStatus->setObjectName(QStringLiteral("recipeStatus"));
    m_recipeStatus->setWordWrap(true);
    auto* modelFolder = new QPushButton(tr("Model folder…"), recipeTab);
    modelFolder->setObjectName(QStringLiteral("pickModelFolder"));
    modelFolder->setToolTip(tr("A Hugging Face model folder (config.json and safetensors) for model.pretrained"));
    connect(modelFolder, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Hugging Face model folder"),
                                                              QFileInfo(m_recipePath).path());
        if (!dir.isEmpty())
            setModelFolder(dir);
    });
    auto* dataFiles = new QPushButton(tr("Data files…"), recipeTab);
    dataFiles->setObjectName(QStringLiteral("pickDataFiles"));
    dataFiles->setToolTip(tr("Token files, or text / JSON Lines corpora to tokenize, for data.path (data.type tokens)"));
    connect(dataFiles, &QPushButton::clicked, this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(
            this, tr("Training data"), QFileInfo(m_recipePath).path(),
            tr("Corpora and token files (*.jsonl *.ndjson *.json *.txt *.md *.bin *.tokens);;All files (*)"));
        if (!files.isEmpty())
            setDataFiles(files);
    });
    auto* tokenizerFolder = new QPushButton(tr("Tokenizer…"), recipeTab);
    tokenizerFolder->setObjectName(QStringLiteral("pickTokenizer"));
    tokenizerFolder->setToolTip(tr("A folder with tokenizer.json (and tokenizer_config.json) for data.tokenizer"));
    connect(tokenizerFolder, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Tokenizer folder"), QFileInfo(m_recipePath).path());
        if (!dir.isEmpty() && m_recipe)
            setDataFiles(toQStringList(m_recipe->data.paths), dir);
    });
    auto* previewButton = new QPushButton(tr("Preview data"), recipeTab);
    previewButton->setObjectName(QStringLiteral("previewData"));
    previewButton->setToolTip(tr("The data's statistics and rank 0's first batch, decoded, as the run will see them"));
    connect(previewButton, &QPushButton::clicked, this, &ConfigurePage::previewData);
    auto* pickers = new QHBoxLayout;
    pickers->addWidget(modelFolder);
    pickers->addWidget(dataFiles);
    pickers->addWidget(tokenizerFolder);
    pickers->addWidget(previewButton);
    pickers->addStretch(1);
    m_dataPreview = new QPlainTextEdit(recipeTab);
    m_dataPreview->setObjectName(QStringLiteral("dataPreview"));
    m_dataPreview->setReadOnly(true);
    m_dataPreview->setMaximumBlockCount(200);
    m_dataPreview->setPlaceholderText(tr("Preview data shows what the run will train on"));
    recipeLayout->addLayout(pickers);
    // The form (the keys most recipes set, each with its help) beside the YAML it edits.
    auto* formAndText = new QSplitter(Qt::Horizontal, recipeTab);
    formAndText->addWidget(buildRecipeForm(formAndText));
    formAndText->addWidget(m_recipeEditor);
    formAndText->setStretchFactor(0, 2);
    formAndText->setStretchFactor(1, 3);
    recipeLayout->addWidget(formAndText, 3);
    // The help of the key under the cursor (docs/RECIPES.md's line for it).
    m_recipeKeyHelp = new QLabel(recipeTab);
    m_recipeKeyHelp->setObjectName(QStringLiteral("recipeKeyHelp"));
    m_recipeKeyHelp->setWordWrap(true);
    m_recipeKeyHelp->setText(tr("Put the cursor on a key for its help; docs/RECIPES.md lists every key."));
    connect(m_recipeEditor, &QPlainTextEdit::cursorPositionChanged, this, &ConfigurePage::showRecipeKeyHelp);
    recipeLayout->addWidget(m_recipeKeyHelp);
    recipeLayout->addWidget(m_recipeStatus);
    recipeLayout->addWidget(m_dataPreview, 1);
    return recipeTab;
}

// The recipe form: the keys of recipeFormKeys as fields (a choice list where the key has one), each
// with the key's help; an edit changes the YAML text (undoable, comments kept), and the fields
// follow the text as it is edited.
QWidget* ConfigurePage::buildRecipeForm(QWidget* parent)
{
    auto* scroll = new QScrollArea(parent);
    scroll->setObjectName(QStringLiteral("recipeForm"));
    scroll->setWidgetResizable(true);
    auto* body = new QWidget(scroll);
    auto* form = new QFormLayout(body);
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    for (const char* path : kRecipeFormKeys) {
        const config::RecipeKeyDoc* doc = config::findRecipeKey(path);
        if (!doc)
            continue;
        const QString keyPath = QString::fromLatin1(path);
        const QString tip =
            QStringLiteral("<b>%1</b> (%2)<p>%3</p>").arg(keyPath, qs(doc->type).toHtmlEscaped(), qs(doc->doc).toHtmlEscaped());
        QWidget* editor = nullptr;
        const QStringList choices = qs(doc->type).split(QStringLiteral(" | "));
        if (choices.size() > 1) {
            auto* combo = new QComboBox(body);
            combo->addItems(choices);
            connect(combo, &QComboBox::activated, this,
                    [this, keyPath, combo] { setRecipeValue(keyPath, combo->currentText()); });
            editor = combo;
        } else {
            auto* line = new QLineEdit(body);
            line->setPlaceholderText(qs(doc->defaultValue));
            connect(line, &QLineEdit::editingFinished, this, [this, keyPath, line] {
                if (line->isModified())
                    setRecipeValue(keyPath, line->text().trimmed());
                line->setModified(false);
            });
            editor = line;
        }
        editor->setObjectName(QStringLiteral("recipe_") + keyPath);
        editor->setToolTip(tip);
        auto* label = new QLabel(keyPath, body);
        label->setToolTip(tip);
        form->addRow(label, editor);
        m_recipeFields.push_back({keyPath, editor});
    }
    scroll->setWidget(body);
    return scroll;
}

bool ConfigurePage::setRecipeValue(const QString& keyPath, const QString& value)
{
    if (value.isEmpty())
        return false; // a cleared field keeps the text's value (the key's default shows as placeholder)
    return replaceRecipeText(
        config::withRecipeValue(m_recipeEditor->toPlainText().toStdString(), keyPath.toStdString(), value.toStdString()));
}

void ConfigurePage::fillRecipeForm()
{
    std::map<std::string, std::string> values;
    if (m_recipe)
        for (auto& [key, value] : storage::flattenYaml(config::recipeToYaml(*m_recipe)))
            values[key] = value;
    for (const auto& [keyPath, editor] : m_recipeFields) {
        const auto it = values.find(keyPath.toStdString());
        const QString value = it == values.end() ? QString() : qs(it->second);
        editor->setEnabled(m_recipe.has_value()); // a text that does not parse is fixed in the text
        const QSignalBlocker blocker(editor);
        if (auto* combo = qobject_cast<QComboBox*>(editor))
            combo->setCurrentIndex(std::max(0, combo->findText(value)));
        else if (auto* line = qobject_cast<QLineEdit*>(editor); line && !line->hasFocus())
            line->setText(value);
    }
}

// A first-run path: the demo, an example recipe or the user's own script, one click each. Shown
// while nothing is open, until dismissed (remembered beside the history).
void ConfigurePage::buildStartPanel(QVBoxLayout* layout)
{
    auto* frame = new QFrame(this);
    frame->setFrameShape(QFrame::StyledPanel);
    m_startPanel = frame;
    m_startPanel->setObjectName(QStringLiteral("startPanel"));
    m_startPanel->setStyleSheet(QStringLiteral("QFrame#startPanel { background: #eef5fd; }"));
    auto* row = new QHBoxLayout(m_startPanel);
    auto* text = new QLabel(tr("<b>New here?</b> Start from the demo (a small GPT on two CPU ranks, about a minute), "
                               "an example recipe, or your own Accelerate script."),
                            m_startPanel);
    text->setWordWrap(true);
    row->addWidget(text, 1);
    auto button = [this, row](const QString& label, const QString& name, auto slot) {
        auto* b = new QPushButton(label, m_startPanel);
        b->setObjectName(name);
        connect(b, &QPushButton::clicked, this, slot);
        row->addWidget(b);
    };
    button(tr("Try the demo"), QStringLiteral("startDemo"), [this] { startDemo(); });
    button(tr("Open an example recipe…"), QStringLiteral("startExample"), [this] {
        const QString path = QFileDialog::getOpenFileName(
            this, tr("Example recipes"), qs(config::resourcesFolder()) + QStringLiteral("/recipes"), tr("Recipe (*.yaml *.yml)"));
        if (!path.isEmpty() && openRecipeFile(path))
            useCpuRanks();
    });
    button(tr("Run my own script…"), QStringLiteral("startScript"), [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Your Accelerate or Trainer script"),
                                                          qs(config::resourcesFolder()) + QStringLiteral("/examples"),
                                                          tr("Python (*.py)"));
        if (path.isEmpty())
            return;
        useCpuRanks();
        setScriptMode(true);
        setScript(path);
        m_startPanel->hide();
    });
    button(tr("Dismiss"), QStringLiteral("startDismiss"), [this] {
        m_startPanel->hide();
        remember(QStringLiteral("configure/startDismissed"), QStringLiteral("1"));
    });
    layout->addWidget(m_startPanel);
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
    showMessage(tr("The demo is ready: Launch trains a small GPT on two CPU ranks (about a minute), and the Run page "
                   "opens as it starts. The recipe is a bundled example: Save as… to keep changes."),
                false);
}

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
    buildScriptRow(bottom, bottomLayout);
    bottomLayout->addLayout(launchRow);
}

ConfigurePage::ConfigurePage(std::filesystem::path databaseFile, QWidget* parent, HistoryService* history)
    : QWidget(parent), m_databaseFile(std::move(databaseFile)), m_machine(config::probeMachine()),
      m_physicalCores(config::physicalCoreCount()), m_history(history ? history : new HistoryService(this))
{
    auto* layout = new QVBoxLayout(this);
    auto* bar = new QWidget(this);
    buildTopBar(bar);
    layout->addWidget(bar);
    buildStartPanel(layout);

    auto* vertical = new QSplitter(Qt::Vertical, this);
    auto* horizontal = new QSplitter(Qt::Horizontal, vertical);

    m_tabs = new QTabWidget(horizontal);
    m_tabs->setObjectName(QStringLiteral("configureTabs"));
    m_wizard = new ConfigWizard({}, m_tabs);
    m_wizard->setObjectName(QStringLiteral("wizard"));
    m_form = new ConfigForm(m_tabs);
    m_form->setObjectName(QStringLiteral("form"));
    QWidget* recipeTab = buildRecipeTab(m_tabs);
    m_tabs->addTab(m_form, tr("Form"));
    m_tabs->addTab(m_wizard, tr("Wizard"));
    m_tabs->addTab(recipeTab, tr("Recipe"));

    auto* right = new QSplitter(Qt::Vertical, horizontal);
    m_preview = new QPlainTextEdit(right);
    m_preview->setObjectName(QStringLiteral("yamlPreview"));
    m_preview->setReadOnly(true);
    m_preview->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    auto* memory = new QWidget(right);
    auto* memoryLayout = new QVBoxLayout(memory);
    memoryLayout->setContentsMargins(0, 0, 0, 0);
    m_memorySummary = new QLabel(memory);
    m_memorySummary->setObjectName(QStringLiteral("memorySummary"));
    m_memorySummary->setWordWrap(true);
    m_memoryChart = new QCustomPlot(memory);
    m_memoryChart->setObjectName(QStringLiteral("memoryChart"));
    m_memoryChart->setMinimumHeight(200);
    memoryLayout->addWidget(m_memorySummary);
    memoryLayout->addWidget(m_memoryChart, 1);
    right->setStretchFactor(0, 1);
    right->setStretchFactor(1, 1);
    horizontal->setStretchFactor(0, 1);
    horizontal->setStretchFactor(1, 1);

    buildBottom(vertical);
    vertical->setStretchFactor(0, 4);
    vertical->setStretchFactor(1, 1);
    layout->addWidget(vertical, 1);

    setUpMemoryChart();

    m_pollTimer = new QTimer(this);
    m_pollTimer->setInterval(500);
    connect(m_pollTimer, &QTimer::timeout, this, &ConfigurePage::pollLaunchedRun);
    connect(m_form, &ConfigForm::configEdited, this, [this] { configChanged(true); });
    connect(m_wizard, &ConfigWizard::configFinished, this, [this](const config::AccelerateConfig& cfg) {
        m_form->setConfig(cfg);
        configChanged(true);
    });
    connect(m_recipeEditor, &QPlainTextEdit::textChanged, this, [this] {
        m_recipeModified = true;
        recipeChanged();
    });
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

void ConfigurePage::setUpMemoryChart()
{
    // Chart: per-rank device bytes by category, host (offloaded) bytes stacked on top.
    m_deviceBars = new QCPBars(m_memoryChart->xAxis, m_memoryChart->yAxis);
    m_deviceBars->setName(tr("device"));
    m_deviceBars->setBrush(QColor(0x4f, 0x9c, 0xf0));
    m_deviceBars->setPen(Qt::NoPen);
    m_hostBars = new QCPBars(m_memoryChart->xAxis, m_memoryChart->yAxis);
    m_hostBars->setName(tr("host (offloaded)"));
    m_hostBars->setBrush(QColor(0xb0, 0xb0, 0xb0));
    m_hostBars->setPen(Qt::NoPen);
    m_hostBars->moveAbove(m_deviceBars);
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    ticker->addTick(1, tr("parameters"));
    ticker->addTick(2, tr("gradients"));
    ticker->addTick(3, tr("optimizer"));
    ticker->addTick(4, tr("activations"));
    m_memoryChart->xAxis->setTicker(ticker);
    m_memoryChart->xAxis->setRange(0.4, 4.6);
    m_memoryChart->xAxis->grid()->setVisible(false);
    m_memoryChart->legend->setVisible(true);
    for (int i = 0; i < 4; ++i) {
        auto* label = new QCPItemText(m_memoryChart);
        label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
        label->setPadding(QMargins(0, 0, 0, 2));
        label->setFont(QFont(font().family(), font().pointSize() - 1));
        m_barLabels.push_back(label);
    }
    // Top left, above the headroom left over the bars (see updateMemoryChart), clear of any bar.
    m_memoryChart->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
}

void ConfigurePage::buildTopBar(QWidget* bar)
{
    auto* layout = new QHBoxLayout(bar);
    layout->setContentsMargins(0, 0, 0, 0);
    auto button = [bar, layout](const QString& text, const QString& name, auto slot) {
        auto* b = new QPushButton(text, bar);
        b->setObjectName(name);
        QObject::connect(b, &QPushButton::clicked, bar, slot);
        layout->addWidget(b);
        return b;
    };
    m_configLabel = new QLabel(bar);
    m_configLabel->setObjectName(QStringLiteral("configPath"));
    layout->addWidget(m_configLabel, 1);
    button(tr("Open…"), QStringLiteral("openConfig"), [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open Accelerate config"), QFileInfo(m_configPath).path(),
                                                          tr("Accelerate config (*.yaml *.yml *.json);;All files (*)"));
        if (!path.isEmpty())
            openConfigFile(path);
    });
    auto saveAs = [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save Accelerate config"), saveAsStart(m_configPath),
                                                          tr("Accelerate config (*.yaml *.yml *.json)"));
        if (!path.isEmpty())
            saveConfigTo(path);
    };
    button(tr("Save"), QStringLiteral("saveConfig"), [this, saveAs] {
        if (m_configPath.isEmpty() || isBundledExample(m_configPath))
            saveAs();
        else
            saveConfigTo(m_configPath);
    })->setShortcut(QKeySequence::Save);
    button(tr("Save as…"), QStringLiteral("saveConfigAs"), saveAs);
    layout->addSpacing(24);
    m_recipeLabel = new QLabel(bar);
    m_recipeLabel->setObjectName(QStringLiteral("recipePath"));
    layout->addWidget(m_recipeLabel, 1);
    button(tr("Open…"), QStringLiteral("openRecipe"), [this] {
        // Among the bundled examples until a recipe of the user's own is open.
        const QString folder = m_recipePath.isEmpty() ? qs(config::resourcesFolder()) + QStringLiteral("/recipes")
                                                      : QFileInfo(m_recipePath).path();
        const QString path = QFileDialog::getOpenFileName(this, tr("Open recipe"), folder,
                                                          tr("Recipe (*.yaml *.yml);;All files (*)"));
        if (!path.isEmpty())
            openRecipeFile(path);
    });
    auto saveRecipeAs = [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save recipe"), saveAsStart(m_recipePath),
                                                          tr("Recipe (*.yaml *.yml)"));
        if (!path.isEmpty())
            saveRecipeTo(path);
    };
    button(tr("Save"), QStringLiteral("saveRecipe"), [this, saveRecipeAs] {
        if (m_recipePath.isEmpty() || isBundledExample(m_recipePath))
            saveRecipeAs();
        else
            saveRecipeTo(m_recipePath);
    });
    button(tr("Save as…"), QStringLiteral("saveRecipeAs"), saveRecipeAs);
}

const config::AccelerateConfig& ConfigurePage::currentConfig() const { return m_form->config(); }

QString ConfigurePage::previewText() const { return m_preview->toPlainText(); }

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

QString ConfigurePage::saveAsStart(const QString& path) const
{
    // A bundled example is a template: its copy goes among the user's files, not into resources/.
    return isBundledExample(path) ? QDir::home().filePath(QFileInfo(path).fileName()) : path;
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

bool ConfigurePage::saveConfigTo(const QString& path)
{
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
    bool ok = false;
    const QString text = readText(path, &ok);
    if (!ok) {
        showMessage(tr("Cannot read %1").arg(path), true);
        return false;
    }
    m_recipePath = path;
    setRecipeText(text);
    m_recipeModified = false;
    updateTitles();
    remember(QStringLiteral("configure/lastRecipe"), path);
    showMessage(tr("Opened %1").arg(path), false);
    return true;
}

bool ConfigurePage::saveRecipeTo(const QString& path)
{
    if (refuseBundled(path))
        return false;
    QString error;
    if (!writeText(path, m_recipeEditor->toPlainText().toStdString(), &error)) {
        showMessage(error, true);
        return false;
    }
    m_recipePath = path;
    m_recipeModified = false;
    recipeChanged();
    remember(QStringLiteral("configure/lastRecipe"), path);
    showMessage(tr("Saved %1").arg(path), false);
    return true;
}

void ConfigurePage::setRecipeText(const QString& yaml) { m_recipeEditor->setPlainText(yaml); }

void ConfigurePage::configChanged(bool modified)
{
    m_configModified = modified;
    if (modified)
        m_openError.clear();
    refresh();
}

void ConfigurePage::showRecipeKeyHelp()
{
    const std::string path = config::recipeKeyPathAt(m_recipeEditor->toPlainText().toStdString(),
                                                     m_recipeEditor->textCursor().blockNumber());
    const config::RecipeKeyDoc* doc = path.empty() ? nullptr : config::findRecipeKey(path);
    // A Hugging Face family's model keys are its config.json's.
    if (!doc && path.rfind("model.", 0) == 0 && path.find('.', 6) == std::string::npos)
        doc = config::findRecipeKey("model.<config.json key>");
    if (!doc)
        return; // keep the last help: a blank line or a value says nothing new
    m_recipeKeyHelp->setText(
        tr("<b>%1</b> (%2%3): %4")
            .arg(qs(path).toHtmlEscaped(), qs(doc->type).toHtmlEscaped(),
                 doc->defaultValue.empty() ? QString() : tr(", default %1").arg(qs(doc->defaultValue).toHtmlEscaped()),
                 qs(doc->doc).toHtmlEscaped()));
}

bool ConfigurePage::setModelFolder(const QString& dir)
{
    return replaceRecipeText(config::withPretrainedFolder(m_recipeEditor->toPlainText().toStdString(), dir.toStdString()));
}

bool ConfigurePage::setDataFiles(const QStringList& files, const QString& tokenizer)
{
    std::vector<std::string> paths;
    for (const auto& f : files)
        paths.push_back(f.toStdString());
    return replaceRecipeText(config::withTokenData(m_recipeEditor->toPlainText().toStdString(), paths, tokenizer.toStdString()));
}

bool ConfigurePage::replaceRecipeText(const Result<std::string>& edited)
{
    if (!edited) {
        m_recipeStatus->setStyleSheet(QStringLiteral("color: #c62828;"));
        m_recipeStatus->setText(qs(edited.error().message));
        return false;
    }
    QTextCursor cursor(m_recipeEditor->document()); // one undoable edit, unlike setPlainText
    cursor.select(QTextCursor::Document);
    cursor.insertText(QString::fromStdString(*edited));
    return true;
}

QString ConfigurePage::dataPreviewText() const { return m_dataPreview->toPlainText(); }

namespace {

// The recipe as the launcher will load it: its relative paths its file's, a Hugging Face family's
// vocab_size from its architecture; then what its data will be.
Result<config::DataPreview> previewOf(config::Recipe recipe, const std::string& recipeFolder, const std::string& source,
                                      int worldSize)
{
    config::resolveRecipePaths(recipe, recipeFolder);
    if (config::isHfFamilyType(recipe.model.type)) {
        auto architecture = config::resolveArchitecture(recipe.model, source);
        if (!architecture)
            return architecture.error();
        recipe.model = config::withArchitecture(recipe.model, *architecture);
    }
    return config::previewTokenData(recipe, worldSize);
}

} // namespace

void ConfigurePage::previewData()
{
    if (!m_recipe) {
        m_dataPreview->setPlainText(tr("The recipe has an error; fix it first."));
        emit dataPreviewed(false);
        return;
    }
    const std::uint64_t generation = ++m_previewGeneration;
    m_dataPreview->setPlainText(tr("Reading the data…"));
    const std::string folder = m_recipePath.isEmpty() ? QDir::currentPath().toStdString()
                                                      : QFileInfo(m_recipePath).absolutePath().toStdString();
    const std::string source = m_recipePath.isEmpty() ? std::string("recipe.yaml") : m_recipePath.toStdString();
    const int ranks = static_cast<int>(std::max<std::int64_t>(1, currentConfig().intField("num_processes").value_or(1)));
    QPointer<ConfigurePage> guard(this);
    // Reading and tokenizing a corpus takes seconds: never on the GUI thread.
    QThreadPool::globalInstance()->start([guard, generation, recipe = *m_recipe, folder, source, ranks] {
        auto preview = std::make_shared<Result<config::DataPreview>>(previewOf(recipe, folder, source, ranks));
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [guard, generation, preview] {
                if (!guard || guard->m_previewGeneration != generation)
                    return;
                guard->m_dataPreview->setPlainText(*preview ? qs(config::formatDataPreview(**preview))
                                                            : tr("error: %1").arg(qs(preview->error().message)));
                emit guard->dataPreviewed(preview->ok());
            },
            Qt::QueuedConnection);
    });
}

void ConfigurePage::recipeChanged()
{
    const std::string source = m_recipePath.isEmpty() ? std::string("recipe.yaml") : m_recipePath.toStdString();
    auto parsed = config::parseRecipe(m_recipeEditor->toPlainText().toStdString(), source);
    // A Hugging Face model's architecture (model.pretrained's config.json, or the recipe's keys)
    // must resolve, as the launcher will check; the memory estimate reads it too.
    if (parsed && config::isHfFamilyType(parsed->model.type))
        if (auto architecture = config::resolveArchitecture(parsed->model, source); !architecture)
            parsed = architecture.error();
    QList<QTextEdit::ExtraSelection> marks;
    if (parsed) {
        m_recipe = *parsed;
        m_recipeError.clear();
        m_recipeErrorLine = 0;
        const auto shape = config::modelShapeOf(*m_recipe);
        m_recipeStatus->setStyleSheet(QString());
        m_recipeStatus->setText(tr("%1: %2 model, %3 parameters; %4 lr %5, %6 schedule; %7 steps of %8 per device")
                                    .arg(qs(m_recipe->name), qs(m_recipe->model.type))
                                    .arg(shape.parameters)
                                    .arg(qs(m_recipe->optimizer.type))
                                    .arg(m_recipe->optimizer.lr)
                                    .arg(qs(m_recipe->schedule.type))
                                    .arg(m_recipe->maxSteps)
                                    .arg(m_recipe->perDeviceBatchSize));
    } else {
        m_recipe.reset();
        m_recipeError = qs(parsed.error().message);
        m_recipeErrorLine = parsed.error().line; // where the editor points (0: no line)
        m_recipeStatus->setStyleSheet(QStringLiteral("color: #c62828;"));
        m_recipeStatus->setText(m_recipeError);
        if (m_recipeErrorLine > 0) {
            QTextEdit::ExtraSelection mark;
            mark.format.setBackground(QColor(0xff, 0xe0, 0xe0));
            mark.format.setProperty(QTextFormat::FullWidthSelection, true);
            mark.cursor = QTextCursor(m_recipeEditor->document()->findBlockByNumber(m_recipeErrorLine - 1));
            marks << mark;
        }
    }
    m_recipeEditor->setExtraSelections(marks);
    fillRecipeForm();
    refresh();
}

void ConfigurePage::refresh()
{
    const auto& cfg = currentConfig();
    const bool json = !m_configPath.isEmpty() && config::formatForPath(m_configPath.toStdString()) == config::FileFormat::Json;
    const QString text = qs(json ? config::toJsonText(cfg) : config::toYamlText(cfg));
    if (m_preview->toPlainText() != text)
        m_preview->setPlainText(text);

    // Checked as `shardscope launch` will check it on this machine: what the launcher would refuse
    // (FSDP without GPUs and without use_cpu, fp8 without an fp8 GPU, ...) is an error here, and
    // Launch stays disabled, instead of a launch that reports success and never starts.
    // The recipe's own errors are the recipe editor's (checking its text file here would read
    // the disk on every edit); the launcher checks the data again.
    config::PlanInputs inputs;
    inputs.config = cfg;
    inputs.configBaseDir = m_configPath.isEmpty() ? std::string() : QFileInfo(m_configPath).absolutePath().toStdString();
    inputs.machine = m_machine;
    inputs.environment.physicalCores = m_physicalCores;
    QStringList texts;
    auto diagnostics = scriptMode() ? scriptDiagnostics(texts) : config::buildRunPlan(inputs).problems;
    if (!scriptMode())
        for (const auto& d : diagnostics)
            texts << qs(config::formatDiagnostic(cfg, d));
    if (!m_recipeError.isEmpty() && !scriptMode()) {
        diagnostics.push_back({config::Severity::Error, DiagnosticModel::kRecipeKeyPath, m_recipeError.toStdString()});
        texts << tr("recipe: error: %1").arg(m_recipeError);
    }
    // The one-click fix of the first problem that has one (a GPU distribution on a CPU machine).
    m_fix.reset();
    for (const auto& d : diagnostics)
        if (!m_fix)
            m_fix = config::fixFor(d, cfg, m_machine);
    m_fixButton->setVisible(m_fix.has_value());
    if (m_fix)
        m_fixButton->setText(tr("Fix: %1").arg(qs(m_fix->label)));
    m_diagnostics->setDiagnostics(std::move(diagnostics), texts);
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
    updateMemoryChart();
    updateTitles();
}

QStringList ConfigurePage::memoryBarLabels() const
{
    QStringList labels;
    for (const auto* label : m_barLabels)
        labels << label->text();
    return labels;
}

bool ConfigurePage::applyFix()
{
    if (!m_fix)
        return false;
    config::AccelerateConfig fixed = currentConfig();
    for (const auto& [key, value] : m_fix->set)
        fixed.setField(key, value);
    const QString label = qs(m_fix->label);
    m_form->setConfig(fixed);
    configChanged(true);
    showMessage(tr("Changed the config: %1").arg(label), false);
    return true;
}

void ConfigurePage::updateMemoryChart()
{
    m_estimate.reset();
    QVector<double> keys{1, 2, 3, 4};
    QVector<double> device(4, 0.0);
    QVector<double> host(4, 0.0);
    QString summary;
    auto setup = config::memorySetupFromConfig(
        currentConfig(), m_configPath.isEmpty() ? std::string() : QFileInfo(m_configPath).absolutePath().toStdString());
    if (!m_recipe) {
        summary = tr("Per-rank memory: no estimate while the recipe has an error.");
    } else if (!setup) {
        summary = tr("Per-rank memory: %1").arg(qs(setup.error().message));
    } else {
        const auto shape = config::modelShapeOf(*m_recipe);
        m_estimate = config::estimateMemory(shape, setup->precision, setup->sharding, optimizerOf(*m_recipe));
        const auto& e = *m_estimate;
        device = {e.parameters, e.gradients, e.optimizer, e.activations};
        host = {e.hostParameters, e.hostGradients, 0.0, 0.0};
        host[2] = e.hostOptimizer;
        summary = tr("Per-rank memory of %1 (%2 parameters): %3, %4 — device %5")
                      .arg(qs(m_recipe->name))
                      .arg(shape.parameters)
                      .arg(qs(setup->sharding.label), qs(config::precisionName(setup->precision)),
                           formatBytes(e.deviceTotal())); // IEC units, as the chart's axis
        if (e.hostTotal() > 0)
            summary += tr(", host %1").arg(formatBytes(e.hostTotal()));
        for (const auto& note : setup->notes)
            summary += QStringLiteral("<br><small>%1</small>").arg(qs(note).toHtmlEscaped());
    }
    m_memorySummary->setText(summary);

    // One unit for the whole chart, the largest that keeps the biggest bar above 1.
    double peak = 0;
    for (int i = 0; i < 4; ++i)
        peak = std::max(peak, device[i] + host[i]);
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (unit < 4 && peak >= 1024.0 * std::pow(1024.0, unit))
        ++unit;
    const double scale = std::pow(1024.0, unit);
    for (int i = 0; i < 4; ++i) {
        device[i] /= scale;
        host[i] /= scale;
    }
    m_deviceBars->setData(keys, device, true);
    m_hostBars->setData(keys, host, true);
    m_memoryChart->yAxis->setLabel(tr("per rank (%1)").arg(QLatin1String(units[unit])));
    m_memoryChart->yAxis->setRange(0, peak > 0 ? peak / scale * 1.4 : 1);
    // Each bar's value above it (device, and host when offloaded), in the units of the summary.
    for (int i = 0; i < 4; ++i) {
        auto* label = m_barLabels[static_cast<std::size_t>(i)];
        const double deviceBytes = device[i] * scale, hostBytes = host[i] * scale;
        label->setText(deviceBytes + hostBytes <= 0 ? QString()
                       : hostBytes > 0              ? tr("%1 + %2 host").arg(formatBytes(deviceBytes), formatBytes(hostBytes))
                                                    : formatBytes(deviceBytes));
        label->position->setCoords(keys[i], device[i] + host[i]);
    }
    m_memoryChart->replot(QCustomPlot::rpQueuedReplot);
}

void ConfigurePage::updateTitles()
{
    const auto title = [](const QString& path, bool modified) {
        if (path.isEmpty())
            return tr("(new)") + (modified ? QStringLiteral(" *") : QString());
        const QString shown = elidedName(path, 80).toHtmlEscaped() + (modified ? QStringLiteral(" *") : QString());
        return isBundledExample(path) ? tr("%1 <i>(bundled example: Save as… keeps your changes)</i>").arg(shown) : shown;
    };
    m_configLabel->setText(tr("<b>Config:</b> %1").arg(title(m_configPath, m_configModified)));
    m_configLabel->setToolTip(m_configPath);
    m_recipeLabel->setText(tr("<b>Recipe:</b> %1").arg(title(m_recipePath, m_recipeModified)));
    m_recipeLabel->setToolTip(m_recipePath);
}

void ConfigurePage::showMessage(const QString& text, bool error)
{
    m_message->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    m_message->setText(text);
}

void ConfigurePage::goToDiagnostic(const QString& keyPath)
{
    if (keyPath == QLatin1String(DiagnosticModel::kRecipeKeyPath)) {
        m_tabs->setCurrentIndex(2);
        if (m_recipeErrorLine > 0) {
            QTextCursor cursor(m_recipeEditor->document()->findBlockByNumber(m_recipeErrorLine - 1));
            m_recipeEditor->setTextCursor(cursor);
        }
        m_recipeEditor->setFocus();
        return;
    }
    m_tabs->setCurrentWidget(m_form);
    // A nested key may have no field of its own (or one that does not apply): its section's
    // switch is the next best place.
    if (m_form->focusField(keyPath))
        return;
    const QString top = keyPath.section(QLatin1Char('.'), 0, 0);
    if (m_form->focusField(top))
        return;
    if (top == QLatin1String("fsdp_config") || top == QLatin1String("deepspeed_config"))
        m_form->focusField(QStringLiteral("distributed_type"));
    else if (top == QLatin1String("fp8_config"))
        m_form->focusField(QStringLiteral("mixed_precision"));
}

QString ConfigurePage::scratchFile(const QString& fileName) const
{
    auto home = storage::shardscopeHome();
    QDir dir(home ? qs(home->string()) : QDir::tempPath());
    dir.mkpath(QStringLiteral("configure"));
    return dir.filePath(QStringLiteral("configure/") + fileName);
}

std::string ConfigurePage::recipeCopyText() const
{
    std::string text = m_recipeEditor->toPlainText().toStdString();
    if (!m_recipe || m_recipePath.isEmpty())
        return text;
    // Relative paths in the recipe are the opened file's folder's: a copy elsewhere has them made
    // absolute (written in the recipe's own form, so its comments go; the opened file keeps them).
    config::Recipe resolved = *m_recipe;
    config::resolveRecipePaths(resolved, QFileInfo(m_recipePath).absolutePath().toStdString());
    if (config::recipeToYaml(resolved) != config::recipeToYaml(*m_recipe))
        text = config::recipeToYaml(resolved);
    return text;
}

void ConfigurePage::buildScriptRow(QWidget* parent, QVBoxLayout* layout)
{
    m_scriptRow = new QWidget(parent);
    auto* outer = new QVBoxLayout(m_scriptRow);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    m_scriptPath = new QLineEdit(m_scriptRow);
    m_scriptPath->setObjectName(QStringLiteral("scriptPath"));
    m_scriptPath->setPlaceholderText(tr("your training script (train.py)"));
    auto* browse = new QPushButton(tr("Script…"), m_scriptRow);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Accelerate script"), QFileInfo(m_scriptPath->text()).path(),
                                                          tr("Python scripts (*.py);;All files (*)"));
        if (!path.isEmpty())
            m_scriptPath->setText(path);
    });
    m_scriptArgs = new QLineEdit(m_scriptRow);
    m_scriptArgs->setObjectName(QStringLiteral("scriptArgs"));
    m_scriptArgs->setPlaceholderText(tr("its arguments, as on a command line"));
    m_python = new QLineEdit(m_scriptRow);
    m_python->setObjectName(QStringLiteral("scriptPython"));
    m_python->setPlaceholderText(tr("Python (default: the active venv, else python3)"));
    m_scriptCommand = new QLineEdit(m_scriptRow);
    m_scriptCommand->setObjectName(QStringLiteral("scriptCommand"));
    m_scriptCommand->setReadOnly(true); // selectable and copyable
    m_scriptCommand->setToolTip(tr("The command the launcher runs (also kept as command.sh in the run directory)"));
    row->addWidget(new QLabel(tr("Script:"), m_scriptRow));
    row->addWidget(m_scriptPath, 2);
    row->addWidget(browse);
    row->addWidget(m_scriptArgs, 2);
    row->addWidget(m_python, 1);
    outer->addLayout(row);
    outer->addWidget(m_scriptCommand);
    m_scriptRow->setVisible(false);
    layout->addWidget(m_scriptRow);
    for (auto* edit : {m_scriptPath, m_scriptArgs, m_python})
        connect(edit, &QLineEdit::textChanged, this, &ConfigurePage::refresh);
    connect(m_runKind, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_scriptRow->setVisible(index == 1);
        m_profile->setVisible(index == 0); // a script profiles itself (docs/SCRIPTS.md)
        refresh();
    });
}

// The script run's problems, as the launcher's planScriptRun finds them on this machine (the
// python is not probed here: that runs a process; the launcher does it).
std::vector<config::Diagnostic> ConfigurePage::scriptDiagnostics(QStringList& texts)
{
    const auto& cfg = currentConfig();
    config::ScriptInputs inputs;
    inputs.config = cfg;
    inputs.configPath = m_configPath.isEmpty() ? std::string("config.yaml") : m_configPath.toStdString();
    inputs.configBaseDir = m_configPath.isEmpty() ? std::string() : QFileInfo(m_configPath).absolutePath().toStdString();
    inputs.python = m_python->text().isEmpty() ? std::string("python") : m_python->text().toStdString();
    inputs.script = m_scriptPath->text().isEmpty() ? std::string()
                                                   : QFileInfo(m_scriptPath->text()).absoluteFilePath().toStdString();
    for (const QString& arg : splitCommandLine(m_scriptArgs->text()))
        inputs.scriptArgs.push_back(arg.toStdString());
    inputs.torchrunLogDir = "<run>/logs/torchrun";
    inputs.machine = m_machine;
    auto planned = config::planScriptRun(inputs);
    for (const auto& d : planned.problems)
        texts << (d.keyPath.rfind("--", 0) == 0
                      ? qs(std::string(d.severity == config::Severity::Error ? "error: " : "warning: ") + d.message)
                      : qs(config::formatDiagnostic(cfg, d)));
    m_scriptCommand->setText(planned.plan ? qs(planned.plan->commandLine()) : QString());
    return planned.problems;
}

void ConfigurePage::setScriptMode(bool script) { m_runKind->setCurrentIndex(script ? 1 : 0); }

bool ConfigurePage::scriptMode() const { return m_runKind && m_runKind->currentIndex() == 1; }

void ConfigurePage::setScript(const QString& path, const QString& arguments, const QString& python)
{
    m_scriptPath->setText(path);
    m_scriptArgs->setText(arguments);
    m_python->setText(python);
    refresh();
}

QString ConfigurePage::scriptCommand() const { return scriptMode() ? m_scriptCommand->text() : QString(); }

QString ConfigurePage::launch()
{
    if (!canLaunch()) {
        const QString why = tr("Fix the errors first.");
        showMessage(why, true);
        return why;
    }
    LaunchRequest request;
    request.numProcesses = static_cast<int>(std::max<std::int64_t>(1, currentConfig().intField("num_processes").value_or(1)));
    QString stem = m_recipe ? qs(m_recipe->name) : QStringLiteral("run");
    if (scriptMode()) {
        request.scriptFile = m_scriptPath->text();
        request.workerArgs = splitCommandLine(m_scriptArgs->text());
        request.python = m_python->text();
        stem = QFileInfo(request.scriptFile).completeBaseName();
    }
    request.runName = QStringLiteral("%1-%2").arg(stem, QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")));
    // The launcher reads files, and Launch writes none the user did not save: what is on screen
    // and unsaved goes to a copy for this run under $SHARDSCOPE_HOME/configure; the opened files
    // (bundled examples among them) stay as they are, and so does their "modified" mark.
    request.configFile = m_configPath;
    if (m_configModified || m_configPath.isEmpty()) {
        request.configFile = scratchFile(request.runName + QStringLiteral("-config.yaml"));
        if (auto r = config::saveAccelerateConfig(currentConfig(), request.configFile.toStdString()); !r) {
            showMessage(qs(r.error().message), true);
            return m_message->text();
        }
    }
    if (!scriptMode()) {
        request.profile = m_profile->isChecked();
        request.recipeFile = m_recipePath;
        QString error;
        if ((m_recipeModified || m_recipePath.isEmpty())
            && !writeText(request.recipeFile = scratchFile(request.runName + QStringLiteral("-recipe.yaml")), recipeCopyText(),
                          &error)) {
            showMessage(error, true);
            return error;
        }
    }
    request.outputFile = launcherOutputFile(QString::fromStdString(m_databaseFile.parent_path().string()), request.runName);
    const auto result = launchDetached(request);
    if (!result.started) {
        showMessage(result.error, true);
        return result.error;
    }
    m_pendingRun = request.runName;
    m_pendingPid = result.pid;
    m_pendingOutput = request.outputFile;
    m_pollsLeft = 120; // 60 s for the launcher to record the run
    m_pollTimer->start();
    showMessage(tr("Launched %1 (pid %2)").arg(request.runName).arg(result.pid), false);
    emit runLaunched(request.runName);
    return {};
}

void ConfigurePage::pollLaunchedRun()
{
    if (m_pendingRun.isEmpty() || --m_pollsLeft < 0) {
        if (!m_pendingRun.isEmpty())
            showMessage(tr("%1 did not appear in the run history; see Runs.").arg(m_pendingRun), true);
        m_pendingRun.clear();
        m_pollTimer->stop();
        return;
    }
    if (m_polling)
        return;
    m_polling = true;
    // In the history (on the history thread), or refused by a launcher that has exited: then
    // what it said, from its output file.
    struct Seen {
        std::int64_t runId = 0;
        bool launcherGone = false;
        QString said;
    };
    m_history->submit<std::shared_ptr<Seen>>(
        this,
        [file = m_databaseFile, name = m_pendingRun.toStdString(), pid = m_pendingPid, output = m_pendingOutput] {
            auto seen = std::make_shared<Seen>();
            storage::StoreOptions options;
            options.markInterrupted = false;
            if (auto store = storage::RunStore::open(file, options)) {
                if (auto id = store->resolveRun(name)) {
                    seen->runId = *id;
                    return seen;
                }
            }
            if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
                seen->launcherGone = true;
                seen->said = launcherErrorText(output);
            }
            return seen;
        },
        [this, name = m_pendingRun](std::shared_ptr<Seen> seen) {
            m_polling = false;
            if (name != m_pendingRun)
                return; // another launch since
            if (seen->runId > 0) {
                m_pendingRun.clear();
                m_pollTimer->stop();
                emit runOpened(seen->runId);
            } else if (seen->launcherGone) {
                showMessage(tr("The launch of %1 stopped before the run started: %2")
                                .arg(m_pendingRun, seen->said.isEmpty()
                                                       ? tr("the launcher said nothing (%1)").arg(m_pendingOutput)
                                                       : seen->said),
                            true);
                m_pendingRun.clear();
                m_pollTimer->stop();
            }
        });
}

} // namespace shardscope::ui
