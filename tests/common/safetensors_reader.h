#pragma once

// A minimal reader of the float32 tensors of a safetensors file, for tests that compare the
// parameters our engine writes without linking the engine (and torch).

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QVector>

#include <cstring>
#include <map>

namespace shardscope::testing {

inline std::map<QString, QVector<float>> readFloatSafetensors(const QString& path)
{
    QFile file(path);
    std::map<QString, QVector<float>> tensors;
    if (!file.open(QIODevice::ReadOnly))
        return tensors;
    const QByteArray all = file.readAll();
    quint64 length = 0;
    for (int i = 0; i < 8; ++i)
        length |= quint64(quint8(all[i])) << (8 * i);
    const auto header = QJsonDocument::fromJson(all.mid(8, int(length))).object();
    const char* data = all.constData() + 8 + length;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const QJsonObject info = it.value().toObject();
        if (it.key() == "__metadata__" || info["dtype"].toString() != "F32")
            continue;
        const auto range = info["data_offsets"].toArray();
        const auto begin = range[0].toInteger(), end = range[1].toInteger();
        QVector<float> values(int((end - begin) / 4));
        std::memcpy(values.data(), data + begin, size_t(end - begin));
        tensors[it.key()] = values;
    }
    return tensors;
}

} // namespace shardscope::testing
