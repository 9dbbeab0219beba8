#pragma once

// The Configure page's top bar: the Accelerate config's file and the recipe's, each named (with a
// mark while it has unsaved edits) with Open…, Save and Save as…. The dialogs are here; what is
// opened or saved is the page's (the signals carry the chosen path). A bundled example (under
// resources/) is a template: Save asks for a file of the user's own.

#include <QWidget>

class QLabel;

namespace shardscope::ui {

// Whether `path` is one of Shardscope's bundled examples (under resources/): those open as
// templates and are never written.
bool isBundledExample(const QString& path);

class FileBar : public QWidget {
    Q_OBJECT
public:
    explicit FileBar(QWidget* parent = nullptr);

    // The files shown (empty: not saved yet) and whether each has unsaved edits.
    void setFiles(const QString& configPath, bool configModified, const QString& recipePath, bool recipeModified);

signals:
    void openConfig(const QString& path);
    void saveConfig(const QString& path);
    void openRecipe(const QString& path);
    void saveRecipe(const QString& path);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void refreshTitles();

    QLabel* m_configLabel = nullptr;
    QLabel* m_recipeLabel = nullptr;
    QString m_configPath;
    QString m_recipePath;
    bool m_configModified = false;
    bool m_recipeModified = false;
};

} // namespace shardscope::ui
