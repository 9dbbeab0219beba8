#pragma once

// The Run page's log panel: one rank's log (the failing rank's marked red in the list, and shown
// once its failure is first seen), with a filter. The bytes come with the page's polls: the view
// says which log it wants (rank(), generation(), offset()) and takes what arrives (append);
// choosing another rank starts it over (reloadRequested).

#include <QStringList>
#include <QWidget>

#include <cstdint>
#include <optional>

class QComboBox;
class QLineEdit;
class QPlainTextEdit;

namespace shardscope::ui {

class RankLogView : public QWidget {
    Q_OBJECT
public:
    explicit RankLogView(QWidget* parent = nullptr);

    // The run's ranks (the list is rebuilt when their number changes: a reload) and its failing one.
    void setRanks(int ranks, std::optional<int> failingRank);
    int rank() const;
    void setRank(int rank);
    void setFilter(const QString& text);
    QString text() const; // what is shown (the filter applied)

    std::uint64_t generation() const { return m_generation; } // which log the bytes asked for belong to
    std::uint64_t offset() const { return m_offset; } // bytes of it read so far
    void clear(); // another run: no ranks, nothing read
    void restart(); // the same rank from its beginning (another rank, or a rewritten file)
    void append(const QByteArray& bytes);

signals:
    void reloadRequested(); // the log to read changed: restarted, ask for its bytes

private:
    void applyFilter();

    QComboBox* m_rankBox = nullptr;
    QLineEdit* m_filter = nullptr;
    QPlainTextEdit* m_view = nullptr;
    QStringList m_lines; // the selected rank's log, whole lines
    std::uint64_t m_generation = 0;
    std::uint64_t m_offset = 0;
    QString m_partial; // an unfinished last line
    int m_rankCount = 0;
};

} // namespace shardscope::ui
