#pragma once

// Every key a recipe takes, with its type, default and meaning: docs/RECIPES.md is this table
// (recipeKeysMarkdown), and the workbench's recipe editor shows a key's line as its help. A test
// holds it to the parser: every key parseRecipe accepts is here, every key here is accepted, and
// each default is Recipe{}'s.

#include <string>
#include <vector>

namespace shardscope::config {

struct RecipeKeyDoc {
    std::string path; // "training.max_steps"
    std::string type; // "integer >= 1", "adamw | sgd", ...
    std::string defaultValue; // as written in YAML; empty: none
    std::string doc;
};

const std::vector<RecipeKeyDoc>& recipeKeyReference();
// The reference entry of a key path, or nullptr.
const RecipeKeyDoc* findRecipeKey(const std::string& path);
// The key path of the block-style YAML key on `line` (0-based) of a recipe's text, its parents
// found by indentation ("training.max_steps"); empty when the line holds no key.
std::string recipeKeyPathAt(const std::string& yamlText, int line);
// docs/RECIPES.md, whole.
std::string recipeKeysMarkdown();

} // namespace shardscope::config
