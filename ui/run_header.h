#pragma once

// The Run page's header: the run's name on a line of its own (a long one never pushes Stop
// off-screen), then its status (precision, ranks, a cluster job and what the scheduler says of
// it), its progress (step, elapsed, ETA), and the page's controls: smoothing, the x axis, Charts,
// Follow, Try model…, Resume, Diagnose and Stop, each enabled when it applies to the run shown.

#include "ui/run_data_source.h"

#include <QWidget>

#include <cstdint>

class QComboBox;
class QLabel;
class QMenu;
class QPushButton;
class QSlider;

namespace shardscope::ui {

class RunHeader : public QWidget {
    Q_OBJECT
public:
    explicit RunHeader(QWidget* parent = nullptr);

    // Shows `info` with the last step reached (-1: none yet). `diagnosing`: a Diagnose is on its
    // way (it is not asked twice). `now`: seconds since the epoch, for a live run's elapsed time.
    void showRun(const RunInfo& info, std::int64_t lastStep, bool diagnosing, double now);
    QString statusLine() const; // as shown (rich text)
    QString progressLine() const;

    void setXAxisIndex(int index); // 0 step, 1 time, 2 tokens
    void setSmoothing(double weight); // the slider and its label, without smoothingChosen
    void setFollowing(bool following);
    void setStopEnabled(bool enabled);
    void setDiagnoseEnabled(bool enabled);

signals:
    void xAxisChosen(int index);
    void smoothingChosen(double weight);
    void followRequested();
    void stopRequested();
    void diagnoseRequested();
    void resumeRequested(); // Resume is disabled once clicked: the launcher takes it from there
    void tryModelRequested();
    void chartsMenuRequested(QMenu* menu); // the Charts menu is about to show: fill it

private:
    QLabel* m_title = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_progress = nullptr;
    QComboBox* m_xAxisBox = nullptr;
    QSlider* m_smoothingSlider = nullptr;
    QLabel* m_smoothingLabel = nullptr;
    QPushButton* m_chartsButton = nullptr;
    QPushButton* m_followButton = nullptr; // checked while the charts follow the data
    QPushButton* m_stopButton = nullptr;
    QPushButton* m_diagnoseButton = nullptr;
    QPushButton* m_resumeButton = nullptr;
    QPushButton* m_tryModelButton = nullptr;
};

} // namespace shardscope::ui
