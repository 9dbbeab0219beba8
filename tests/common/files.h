#pragma once

// Files a test writes for itself: a test that cannot write one fails there.

#include <QFile>
#include <QString>
#include <QTest>

namespace shardscope::testing {

inline void writeFile(const QString& path, const QByteArray& bytes)
{
    QFile file(path);
    QVERIFY2(file.open(QIODevice::WriteOnly | QIODevice::Truncate), qPrintable(path));
    QVERIFY2(file.write(bytes) == bytes.size(), qPrintable(path));
}

// The whole file; empty when it cannot be read (the comparison after it then fails, naming it).
inline QByteArray readFile(const QString& path)
{
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

} // namespace shardscope::testing
