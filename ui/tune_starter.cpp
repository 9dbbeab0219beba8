#include "ui/tune_starter.h"

#include "ui/file_bar.h"
#include "ui/tune_dialog.h"

#include <QDir>
#include <QFileInfo>
#include <QWidget>

namespace shardscope::ui {

QString tuneRefusal(const TuneInputs& inputs)
{
    if (inputs.scriptMode)
        return TuneStarter::tr("Tune… tries the recipe in Shardscope's engine; choose \"Run the recipe (engine)\".");
    if (!inputs.target.isEmpty())
        return TuneStarter::tr("Tune… runs its trials on this machine; choose \"This machine\" as the target.");
    if (inputs.recipePath.isEmpty() || inputs.recipeModified)
        return TuneStarter::tr("Save the recipe first: the tuner's trials read it from its file.");
    return {};
}

QString tuneOutputFolder(const TuneInputs& inputs)
{
    // The chosen files go beside the recipe, or beside the history for a bundled example.
    return isBundledExample(inputs.recipePath)
               ? QDir(QFileInfo(inputs.settingsFile).absolutePath()).filePath(QStringLiteral("tuned"))
               : QFileInfo(inputs.recipePath).absolutePath();
}

TuneStarter::TuneStarter(QWidget* page) : QObject(page), m_page(page) { }

QString TuneStarter::open(const TuneInputs& inputs)
{
    if (QString why = tuneRefusal(inputs); !why.isEmpty())
        return why;
    if (m_dialog && m_dialog->running()) {
        m_dialog->show();
        return {};
    }
    const QString outDir = tuneOutputFolder(inputs);
    QDir().mkpath(outDir);
    if (m_dialog)
        m_dialog->deleteLater();
    m_dialog = new TuneDialog(inputs.recipePath, inputs.processes, inputs.mixedPrecision, outDir, m_page);
    connect(m_dialog, &TuneDialog::useChosen, this, &TuneStarter::useChosen);
    m_dialog->show();
    return {};
}

} // namespace shardscope::ui
