#include "ui/file_bar.h"

#include "engine/recipe/recipe.h"
#include "ui/format.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QFontMetrics>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>

#include <algorithm>

namespace shardscope::ui {

namespace {

// The path with links resolved as far as it exists (a file to be saved need not exist yet).
QString resolvedPath(const QString& path)
{
    const QFileInfo info(path);
    if (info.exists())
        return info.canonicalFilePath();
    const QString folder = QFileInfo(info.absolutePath()).canonicalFilePath();
    return folder.isEmpty() ? info.absoluteFilePath() : folder + QLatin1Char('/') + info.fileName();
}

// Where Save as… starts: the file itself, or for a bundled example its name in the home folder
// (its copy goes among the user's files, not into resources/).
QString saveAsStart(const QString& path)
{
    return isBundledExample(path) ? QDir::home().filePath(QFileInfo(path).fileName()) : path;
}

// "<b>Recipe:</b> /path/…/demo-gpt.yaml <i>(bundled example)</i> *", the path elided in its middle
// to fit `width` px of `label`: a whole path set the window's minimum width (1542 px with the
// bundled demo, past a laptop's 1366).
QString fittedTitle(const QLabel* label, const QString& heading, const QString& path, bool modified, int width)
{
    const QString mark = modified ? QStringLiteral(" *") : QString();
    const QString note = isBundledExample(path) ? FileBar::tr(" (bundled example)") : QString();
    QFont boldFont = label->font();
    boldFont.setBold(true);
    const QFontMetrics plain(label->font());
    const int room = std::max(60, width - QFontMetrics(boldFont).horizontalAdvance(heading + QLatin1Char(' '))
                                      - plain.horizontalAdvance(note + mark) - 8);
    const QString shown = path.isEmpty() ? FileBar::tr("(new)") : plain.elidedText(path, Qt::ElideMiddle, room);
    return QStringLiteral("<b>%1</b> %2%3%4")
        .arg(heading.toHtmlEscaped(), shown.toHtmlEscaped(), note.isEmpty() ? QString() : "<i>" + note.toHtmlEscaped() + "</i>",
             mark);
}

// Before another file replaces one with unsaved edits: whether the user lets them go (opening
// another file discarded them without a word).
bool mayDiscard(QWidget* parent, bool modified, const QString& path)
{
    if (!modified)
        return true;
    QMessageBox ask(QMessageBox::Question, FileBar::tr("Unsaved changes"),
                    FileBar::tr("Your changes to %1 are not saved. Open another file and lose them?")
                        .arg(path.isEmpty() ? FileBar::tr("the new file") : QFileInfo(path).fileName()),
                    QMessageBox::Cancel, parent);
    ask.setObjectName(QStringLiteral("discardChanges"));
    QPushButton* discard = ask.addButton(FileBar::tr("Discard changes"), QMessageBox::DestructiveRole);
    ask.setDefaultButton(QMessageBox::Cancel);
    ask.exec();
    return ask.clickedButton() == discard;
}

} // namespace

bool isBundledExample(const QString& path)
{
    const QString resources = QFileInfo(qs(config::resourcesFolder())).canonicalFilePath();
    return !path.isEmpty() && !resources.isEmpty() && resolvedPath(path).startsWith(resources + QLatin1Char('/'));
}

FileBar::FileBar(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto button = [this, layout](const QString& text, const QString& name, auto slot) {
        auto* b = new QPushButton(text, this);
        b->setObjectName(name);
        connect(b, &QPushButton::clicked, this, slot);
        layout->addWidget(b);
        return b;
    };
    m_configLabel = new QLabel(this);
    m_configLabel->setObjectName(QStringLiteral("configPath"));
    // The labels take the room there is and elide their paths to it (refreshTitles): they never
    // widen the window.
    for (QLabel* label : {m_configLabel, m_recipeLabel = new QLabel(this)}) {
        label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
        label->setMinimumWidth(120);
    }
    layout->addWidget(m_configLabel, 1);
    button(tr("Open…"), QStringLiteral("openConfig"), [this] {
        if (!mayDiscard(this, m_configModified, m_configPath))
            return;
        const QString path = QFileDialog::getOpenFileName(this, tr("Open Accelerate config"), QFileInfo(m_configPath).path(),
                                                          tr("Accelerate config (*.yaml *.yml *.json);;All files (*)"));
        if (!path.isEmpty())
            emit openConfig(path);
    });
    auto saveAs = [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save Accelerate config"), saveAsStart(m_configPath),
                                                          tr("Accelerate config (*.yaml *.yml *.json)"));
        if (!path.isEmpty())
            emit saveConfig(path);
    };
    button(tr("Save"), QStringLiteral("saveConfig"), [this, saveAs] {
        if (m_configPath.isEmpty() || isBundledExample(m_configPath))
            saveAs();
        else
            emit saveConfig(m_configPath);
    })->setShortcut(QKeySequence::Save);
    button(tr("Save as…"), QStringLiteral("saveConfigAs"), saveAs);
    layout->addSpacing(24);
    m_recipeLabel->setObjectName(QStringLiteral("recipePath"));
    layout->addWidget(m_recipeLabel, 1);
    button(tr("Open…"), QStringLiteral("openRecipe"), [this] {
        if (!mayDiscard(this, m_recipeModified, m_recipePath))
            return;
        // Among the bundled examples until a recipe of the user's own is open.
        const QString folder = m_recipePath.isEmpty() ? qs(config::resourcesFolder()) + QStringLiteral("/recipes")
                                                      : QFileInfo(m_recipePath).path();
        const QString path = QFileDialog::getOpenFileName(this, tr("Open recipe"), folder,
                                                          tr("Recipe (*.yaml *.yml);;All files (*)"));
        if (!path.isEmpty())
            emit openRecipe(path);
    });
    auto saveRecipeAs = [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Save recipe"), saveAsStart(m_recipePath),
                                                          tr("Recipe (*.yaml *.yml)"));
        if (!path.isEmpty())
            emit saveRecipe(path);
    };
    button(tr("Save"), QStringLiteral("saveRecipe"), [this, saveRecipeAs] {
        if (m_recipePath.isEmpty() || isBundledExample(m_recipePath))
            saveRecipeAs();
        else
            emit saveRecipe(m_recipePath);
    });
    button(tr("Save as…"), QStringLiteral("saveRecipeAs"), saveRecipeAs);
}

void FileBar::setFiles(const QString& configPath, bool configModified, const QString& recipePath, bool recipeModified)
{
    m_configPath = configPath;
    m_recipePath = recipePath;
    m_configModified = configModified;
    m_recipeModified = recipeModified;
    const auto tip = [](const QString& path) {
        return isBundledExample(path) ? tr("%1\nA bundled example: Save as… keeps your changes").arg(path) : path;
    };
    m_configLabel->setToolTip(tip(configPath));
    m_recipeLabel->setToolTip(tip(recipePath));
    refreshTitles();
}

void FileBar::refreshTitles()
{
    m_configLabel->setText(fittedTitle(m_configLabel, tr("Config:"), m_configPath, m_configModified, m_configLabel->width()));
    m_recipeLabel->setText(fittedTitle(m_recipeLabel, tr("Recipe:"), m_recipePath, m_recipeModified, m_recipeLabel->width()));
}

void FileBar::resizeEvent(QResizeEvent* event)
{
    QWidget::resizeEvent(event);
    refreshTitles(); // the labels have their new widths now
}

} // namespace shardscope::ui
