#include "ui/recipe_data_check.h"

#include "ui/format.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QPointer>
#include <QThreadPool>

namespace shardscope::ui {

RecipeDataCheck::RecipeDataCheck(QObject* parent) : QObject(parent) { }

void RecipeDataCheck::check(const std::optional<config::Recipe>& recipe, const QString& recipePath)
{
    const std::string key = recipe ? config::recipeToYaml(*recipe) : std::string();
    if (key == m_key)
        return;
    m_key = key;
    m_problem.clear();
    if (!recipe)
        return;
    const std::uint64_t generation = ++m_generation;
    config::Recipe resolved = *recipe;
    // Relative paths are the recipe file's, as the launcher reads them (config::loadRecipe).
    if (!recipePath.isEmpty())
        config::resolveRecipePaths(resolved, QFileInfo(recipePath).absolutePath().toStdString());
    QThreadPool::globalInstance()->start([self = QPointer<RecipeDataCheck>(this), recipe = std::move(resolved), generation] {
        const auto checked = config::checkRecipeInputs(recipe);
        const QString problem = checked ? QString() : qs(checked.error().message);
        // Delivered on the GUI thread (the application object's), where the check is looked at: a
        // QPointer read here could race with the check's destruction (as trace_page and recipe_editor).
        QMetaObject::invokeMethod(
            QCoreApplication::instance(),
            [self, generation, problem] {
                if (!self || generation != self->m_generation)
                    return;
                self->m_problem = problem;
                emit self->checked();
            },
            Qt::QueuedConnection);
    });
}

} // namespace shardscope::ui
