#include "ui/start_panel.h"

#include "engine/recipe/recipe.h"
#include "ui/format.h"

#include <QCoreApplication>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

namespace shardscope::ui {

QString demoLength()
{
    // resources/recipes/demo-gpt.yaml's max_steps (tst_configure_page holds them equal); 82 s on
    // the 2-core CPU of docs/BENCHMARKS.md, longer on a busy laptop ("about a minute" was short).
    return QCoreApplication::translate("StartPanel", "300 steps: one to three minutes on a laptop's CPU");
}

StartPanel::StartPanel(QWidget* parent) : QFrame(parent)
{
    setFrameShape(QFrame::StyledPanel);
    setObjectName(QStringLiteral("startPanel"));
    setStyleSheet(QStringLiteral("QFrame#startPanel { background: #eef5fd; }"));
    auto* row = new QHBoxLayout(this);
    auto* text = new QLabel(tr("<b>New here?</b> Start from the demo (a small GPT on two CPU ranks, %1), "
                               "an example recipe, or your own Accelerate script.")
                                .arg(demoLength()),
                            this);
    text->setObjectName(QStringLiteral("startText"));
    text->setWordWrap(true);
    row->addWidget(text, 1);
    auto button = [this, row](const QString& label, const QString& name, auto slot) {
        auto* b = new QPushButton(label, this);
        b->setObjectName(name);
        connect(b, &QPushButton::clicked, this, slot);
        row->addWidget(b);
    };
    const QString examples = qs(config::resourcesFolder());
    button(tr("Try the demo"), QStringLiteral("startDemo"), [this] { emit demoRequested(); });
    button(tr("Open an example recipe…"), QStringLiteral("startExample"), [this, examples] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Example recipes"), examples + QStringLiteral("/recipes"),
                                                          tr("Recipe (*.yaml *.yml)"));
        if (!path.isEmpty())
            emit exampleChosen(path);
    });
    button(tr("Run my own script…"), QStringLiteral("startScript"), [this, examples] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Your Accelerate or Trainer script"),
                                                          examples + QStringLiteral("/examples"), tr("Python (*.py)"));
        if (!path.isEmpty())
            emit scriptChosen(path);
    });
    button(tr("Dismiss"), QStringLiteral("startDismiss"), [this] {
        hide();
        emit dismissed();
    });
}

} // namespace shardscope::ui
