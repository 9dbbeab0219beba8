#include "ui/recipe_editor.h"

#include "engine/recipe/data_preview.h"
#include "engine/recipe/hf_config_keys.h"
#include "engine/estimate/memory_estimate.h"
#include "engine/recipe/model_architecture.h"
#include "engine/recipe/recipe_keys.h"
#include "storage/config_diff.h"
#include "ui/format.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTextBlock>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <map>

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

} // namespace

// The pickers (model folder, data files, tokenizer) and Preview data above the editor, its status
// line and the data preview below.
RecipeEditor::RecipeEditor(QWidget* parent) : QWidget(parent)
{
    QWidget* recipeTab = this;
    auto* recipeLayout = new QVBoxLayout(recipeTab);
    m_editor = new QPlainTextEdit(recipeTab);
    m_editor->setObjectName(QStringLiteral("recipeEditor"));
    m_editor->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_status = new QLabel(recipeTab);
    m_status->setObjectName(QStringLiteral("recipeStatus"));
    m_status->setWordWrap(true);
    auto* modelFolder = new QPushButton(tr("Model folder…"), recipeTab);
    modelFolder->setObjectName(QStringLiteral("pickModelFolder"));
    modelFolder->setToolTip(tr("A Hugging Face model folder (config.json and safetensors) for model.pretrained"));
    connect(modelFolder, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Hugging Face model folder"), QFileInfo(m_path).path());
        if (!dir.isEmpty())
            setModelFolder(dir);
    });
    auto* dataFiles = new QPushButton(tr("Data files…"), recipeTab);
    dataFiles->setObjectName(QStringLiteral("pickDataFiles"));
    dataFiles->setToolTip(tr("Token files, or text / JSON Lines corpora to tokenize, for data.path (data.type tokens)"));
    connect(dataFiles, &QPushButton::clicked, this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(
            this, tr("Training data"), QFileInfo(m_path).path(),
            tr("Corpora and token files (*.jsonl *.ndjson *.json *.txt *.md *.bin *.tokens);;All files (*)"));
        if (!files.isEmpty())
            setDataFiles(files);
    });
    auto* tokenizerFolder = new QPushButton(tr("Tokenizer…"), recipeTab);
    tokenizerFolder->setObjectName(QStringLiteral("pickTokenizer"));
    tokenizerFolder->setToolTip(tr("A folder with tokenizer.json (and tokenizer_config.json) for data.tokenizer"));
    connect(tokenizerFolder, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Tokenizer folder"), QFileInfo(m_path).path());
        if (!dir.isEmpty() && m_recipe)
            setDataFiles(toQStringList(m_recipe->data.paths), dir);
    });
    auto* previewButton = new QPushButton(tr("Preview data"), recipeTab);
    previewButton->setObjectName(QStringLiteral("previewData"));
    previewButton->setToolTip(tr("The data's statistics and rank 0's first batch, decoded, as the run will see them"));
    connect(previewButton, &QPushButton::clicked, this, &RecipeEditor::previewRequested);
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
    formAndText->addWidget(buildForm(formAndText));
    formAndText->addWidget(m_editor);
    formAndText->setStretchFactor(0, 2);
    formAndText->setStretchFactor(1, 3);
    recipeLayout->addWidget(formAndText, 3);
    // The help of the key under the cursor (docs/RECIPES.md's line for it).
    m_keyHelp = new QLabel(recipeTab);
    m_keyHelp->setObjectName(QStringLiteral("recipeKeyHelp"));
    m_keyHelp->setWordWrap(true);
    m_keyHelp->setText(tr("Put the cursor on a key for its help; docs/RECIPES.md lists every key."));
    connect(m_editor, &QPlainTextEdit::cursorPositionChanged, this, &RecipeEditor::showKeyHelp);
    recipeLayout->addWidget(m_keyHelp);
    recipeLayout->addWidget(m_status);
    recipeLayout->addWidget(m_dataPreview, 1);
    connect(m_editor, &QPlainTextEdit::textChanged, this, [this] {
        emit textEdited();
        parse();
    });
}

// The recipe form: the keys of recipeFormKeys as fields (a choice list where the key has one), each
// with the key's help; an edit changes the YAML text (undoable, comments kept), and the fields
// follow the text as it is edited.
QWidget* RecipeEditor::buildForm(QWidget* parent)
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
        m_fields.push_back({keyPath, editor});
    }
    scroll->setWidget(body);
    return scroll;
}

bool RecipeEditor::setRecipeValue(const QString& keyPath, const QString& value)
{
    if (value.isEmpty())
        return false; // a cleared field keeps the text's value (the key's default shows as placeholder)
    return replaceText(
        config::withRecipeValue(m_editor->toPlainText().toStdString(), keyPath.toStdString(), value.toStdString()));
}

void RecipeEditor::fillForm()
{
    std::map<std::string, std::string> values;
    if (m_recipe)
        for (auto& [key, value] : storage::flattenYaml(config::recipeToYaml(*m_recipe)))
            values[key] = value;
    for (const auto& [keyPath, editor] : m_fields) {
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

void RecipeEditor::showKeyHelp()
{
    const std::string path = config::recipeKeyPathAt(m_editor->toPlainText().toStdString(), m_editor->textCursor().blockNumber());
    const config::RecipeKeyDoc* doc = path.empty() ? nullptr : config::findRecipeKey(path);
    // A Hugging Face family's model keys are its config.json's.
    if (!doc && path.rfind("model.", 0) == 0 && path.find('.', 6) == std::string::npos)
        doc = config::findRecipeKey("model.<config.json key>");
    if (!doc)
        return; // keep the last help: a blank line or a value says nothing new
    m_keyHelp->setText(
        tr("<b>%1</b> (%2%3): %4")
            .arg(qs(path).toHtmlEscaped(), qs(doc->type).toHtmlEscaped(),
                 doc->defaultValue.empty() ? QString() : tr(", default %1").arg(qs(doc->defaultValue).toHtmlEscaped()),
                 qs(doc->doc).toHtmlEscaped()));
}

bool RecipeEditor::setModelFolder(const QString& dir)
{
    return replaceText(config::withPretrainedFolder(m_editor->toPlainText().toStdString(), dir.toStdString()));
}

bool RecipeEditor::setDataFiles(const QStringList& files, const QString& tokenizer)
{
    std::vector<std::string> paths;
    for (const auto& f : files)
        paths.push_back(f.toStdString());
    return replaceText(config::withTokenData(m_editor->toPlainText().toStdString(), paths, tokenizer.toStdString()));
}

bool RecipeEditor::replaceText(const Result<std::string>& edited)
{
    if (!edited) {
        m_status->setStyleSheet(QStringLiteral("color: #c62828;"));
        m_status->setText(qs(edited.error().message));
        return false;
    }
    QTextCursor cursor(m_editor->document()); // one undoable edit, unlike setPlainText
    cursor.select(QTextCursor::Document);
    cursor.insertText(QString::fromStdString(*edited));
    return true;
}

QString RecipeEditor::dataPreviewText() const { return m_dataPreview->toPlainText(); }

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

void RecipeEditor::previewData(int worldSize)
{
    if (!m_recipe) {
        m_dataPreview->setPlainText(tr("The recipe has an error; fix it first."));
        emit dataPreviewed(false);
        return;
    }
    const std::uint64_t generation = ++m_previewGeneration;
    m_dataPreview->setPlainText(tr("Reading the data…"));
    const std::string folder = m_path.isEmpty() ? QDir::currentPath().toStdString()
                                                : QFileInfo(m_path).absolutePath().toStdString();
    const std::string source = sourceName();
    const int ranks = std::max(1, worldSize);
    QPointer<RecipeEditor> guard(this);
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

void RecipeEditor::parse()
{
    const std::string source = sourceName();
    auto parsed = config::parseRecipe(m_editor->toPlainText().toStdString(), source);
    // A Hugging Face model's architecture (model.pretrained's config.json, or the recipe's keys)
    // must resolve, as the launcher will check; the memory estimate reads it too.
    if (parsed && config::isHfFamilyType(parsed->model.type))
        if (auto architecture = config::resolveArchitecture(parsed->model, source); !architecture)
            parsed = architecture.error();
    QList<QTextEdit::ExtraSelection> marks;
    if (parsed) {
        m_recipe = *parsed;
        m_error.clear();
        m_errorLine = 0;
        const auto shape = config::modelShapeOf(*m_recipe);
        m_status->setStyleSheet(QString());
        m_status->setText(tr("%1: %2 model, %3 parameters; %4 lr %5, %6 schedule; %7 steps of %8 per device")
                              .arg(qs(m_recipe->name), qs(m_recipe->model.type))
                              .arg(shape.parameters)
                              .arg(qs(m_recipe->optimizer.type))
                              .arg(m_recipe->optimizer.lr)
                              .arg(qs(m_recipe->schedule.type))
                              .arg(m_recipe->maxSteps)
                              .arg(m_recipe->perDeviceBatchSize));
    } else {
        m_recipe.reset();
        m_error = qs(parsed.error().message);
        m_errorLine = parsed.error().line; // where the editor points (0: no line)
        m_status->setStyleSheet(QStringLiteral("color: #c62828;"));
        m_status->setText(m_error);
        if (m_errorLine > 0) {
            QTextEdit::ExtraSelection mark;
            mark.format.setBackground(QColor(0xff, 0xe0, 0xe0));
            mark.format.setProperty(QTextFormat::FullWidthSelection, true);
            mark.cursor = QTextCursor(m_editor->document()->findBlockByNumber(m_errorLine - 1));
            marks << mark;
        }
    }
    m_editor->setExtraSelections(marks);
    fillForm();
    emit recipeChanged();
}

std::string RecipeEditor::copyText() const
{
    std::string text = m_editor->toPlainText().toStdString();
    if (!m_recipe || m_path.isEmpty())
        return text;
    // Relative paths in the recipe are the opened file's folder's: a copy elsewhere has them made
    // absolute (written in the recipe's own form, so its comments go; the opened file keeps them).
    config::Recipe resolved = *m_recipe;
    config::resolveRecipePaths(resolved, QFileInfo(m_path).absolutePath().toStdString());
    if (config::recipeToYaml(resolved) != config::recipeToYaml(*m_recipe))
        text = config::recipeToYaml(resolved);
    return text;
}

QString RecipeEditor::text() const { return m_editor->toPlainText(); }

void RecipeEditor::setText(const QString& yaml) { m_editor->setPlainText(yaml); }

void RecipeEditor::setPath(const QString& path)
{
    if (path != m_path) {
        // Another recipe: the preview was the previous one's data (#45 point 9); one still being
        // read is dropped.
        ++m_previewGeneration;
        m_dataPreview->clear();
    }
    m_path = path;
    parse();
}

std::string RecipeEditor::sourceName() const { return m_path.isEmpty() ? std::string("recipe.yaml") : m_path.toStdString(); }

void RecipeEditor::goToError()
{
    if (m_errorLine > 0)
        m_editor->setTextCursor(QTextCursor(m_editor->document()->findBlockByNumber(m_errorLine - 1)));
    m_editor->setFocus();
}

} // namespace shardscope::ui
