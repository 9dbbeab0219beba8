#pragma once

// The Configure page's first-run path: the demo, an example recipe or the user's own script, one
// click each, or Dismiss. What each choice does is the page's.

#include <QFrame>

namespace shardscope::ui {

// How long the bundled demo trains, for the words that offer it.
QString demoLength();

class StartPanel : public QFrame {
    Q_OBJECT
public:
    explicit StartPanel(QWidget* parent = nullptr);

signals:
    void demoRequested();
    void exampleChosen(const QString& recipePath);
    void scriptChosen(const QString& scriptPath);
    void dismissed();
};

} // namespace shardscope::ui
