#include "ui/file_bar.h"

#include "engine/recipe/recipe.h"
#include "ui/format.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

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

QString title(const QString& path, bool modified)
{
    const QString mark = modified ? QStringLiteral(" *") : QString();
    if (path.isEmpty())
        return FileBar::tr("(new)") + mark;
    const QString shown = elidedName(path, 80).toHtmlEscaped() + mark;
    return isBundledExample(path) ? FileBar::tr("%1 <i>(bundled example: Save as… keeps your changes)</i>").arg(shown) : shown;
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
    layout->addWidget(m_configLabel, 1);
    button(tr("Open…"), QStringLiteral("openConfig"), [this] {
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
    m_recipeLabel = new QLabel(this);
    m_recipeLabel->setObjectName(QStringLiteral("recipePath"));
    layout->addWidget(m_recipeLabel, 1);
    button(tr("Open…"), QStringLiteral("openRecipe"), [this] {
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
    m_configLabel->setText(tr("<b>Config:</b> %1").arg(title(configPath, configModified)));
    m_configLabel->setToolTip(configPath);
    m_recipeLabel->setText(tr("<b>Recipe:</b> %1").arg(title(recipePath, recipeModified)));
    m_recipeLabel->setToolTip(recipePath);
}

} // namespace shardscope::ui
