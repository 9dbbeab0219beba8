#pragma once

// The recipe's data files read as the launcher reads them before any rank starts (a missing text
// file passed the Configure page as "Problems: none" and failed at launch), on a thread of their
// own: a corpus may be large, and the GUI never waits on the disk. Read again when the recipe
// changes; an answer for a recipe edited since is dropped.

#include "engine/recipe/recipe.h"

#include <QObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>

namespace shardscope::ui {

class RecipeDataCheck : public QObject {
    Q_OBJECT
public:
    explicit RecipeDataCheck(QObject* parent = nullptr);

    // Reads `recipe`'s data in the background unless it was the last one asked (checked when
    // done); relative paths are `recipePath`'s folder's (none: as given). No recipe: no problem.
    void check(const std::optional<config::Recipe>& recipe, const QString& recipePath);
    // The recipe is read again at the next check, even unchanged (its file was opened anew).
    void forget() { m_key.clear(); }
    // What the last answer said (empty: nothing wrong, or no answer yet for this recipe).
    QString problem() const { return m_problem; }

signals:
    void checked();

private:
    std::string m_key; // the recipe the last check was for
    QString m_problem;
    std::uint64_t m_generation = 0; // which check is the latest
};

} // namespace shardscope::ui
