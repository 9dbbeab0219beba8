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

} // namespace shardscope::testing
