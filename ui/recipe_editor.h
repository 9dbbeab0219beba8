#pragma once

// The Configure page's Recipe tab: the recipe's YAML in an editor beside a form of the keys most
// recipes set, the pickers that edit the text (model folder, data files, tokenizer), the help of
// the key under the cursor, the parse status (with the error's line marked) and the data preview.
// The text is parsed on every edit (recipe(), error()); which file it is and whether it is saved
// are the page's.

#include "engine/common/result.h"
#include "engine/recipe/recipe.h"

#include <QWidget>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

class QLabel;
class QPlainTextEdit;

namespace shardscope::ui {

class RecipeEditor : public QWidget {
    Q_OBJECT
public:
    explicit RecipeEditor(QWidget* parent = nullptr);

    QString text() const;
    void setText(const QString& yaml);
    // The file the text is from (empty: none): its folder resolves the recipe's relative paths
    // and starts the pickers; its name is the one messages use.
    void setPath(const QString& path);
    std::string sourceName() const;

    // The text as parsed: none while it has an error (error(); goToError() shows its line).
    const std::optional<config::Recipe>& recipe() const { return m_recipe; }
    QString error() const { return m_error; }
    // The text for a copy elsewhere (a run's scratch copy): relative paths made absolute.
    std::string copyText() const;

    // Edits of the text, each one undoable (comments and other lines kept); false, with the reason
    // in the status line, when the text cannot be edited so.
    bool setModelFolder(const QString& dir);
    bool setDataFiles(const QStringList& files, const QString& tokenizer = QString());
    bool setRecipeValue(const QString& keyPath, const QString& value);

    // Reads and tokenizes the data off the GUI thread for `worldSize` ranks, then shows its
    // statistics and rank 0's first batch decoded; dataPreviewed when done.
    void previewData(int worldSize);
    QString dataPreviewText() const;
    // The cursor to the error's line, the focus to the editor.
    void goToError();

signals:
    void textEdited(); // every change of the text, before it is parsed
    void recipeChanged(); // the text was parsed again (recipe() or error() may have changed)
    void previewRequested(); // "Preview data": the page knows the ranks
    void dataPreviewed(bool ok);

private:
    QWidget* buildForm(QWidget* parent);
    void fillForm(); // the form's fields from the parsed text
    void showKeyHelp();
    void parse();
    bool replaceText(const Result<std::string>& edited);

    QString m_path;
    std::optional<config::Recipe> m_recipe;
    QString m_error;
    int m_errorLine = 0;
    QPlainTextEdit* m_editor = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_keyHelp = nullptr; // the help of the key under the cursor
    std::vector<std::pair<QString, QWidget*>> m_fields; // the form: key path, editor
    QPlainTextEdit* m_dataPreview = nullptr;
    std::uint64_t m_previewGeneration = 0; // the newest preview asked for; older answers are dropped
};

} // namespace shardscope::ui
