#include "engine/protocol/flight_record.h"

#include <nlohmann/json.hpp>

namespace shardscope::protocol {

using nlohmann::json;

std::string flightRecordJson(const FlightRecord& record)
{
    json collectives = json::array();
    for (const auto& c : record.collectives) {
        json j = {{"group", c.group}, {"seq", c.seq},   {"kind", c.kind},   {"bytes", c.bytes},
                  {"dtype", c.dtype}, {"step", c.step}, {"phase", c.phase}, {"issued_at", c.issuedAt}};
        j["completed_at"] = c.completedAt ? json(*c.completedAt) : json(nullptr);
        collectives.push_back(std::move(j));
    }
    const json j = {{"rank", record.rank},   {"request", record.request}, {"time", record.time},       {"step", record.step},
                    {"phase", record.phase}, {"issued", record.issued},   {"collectives", collectives}};
    return j.dump(1) + "\n";
}

Result<FlightRecord> parseFlightRecord(std::string_view text, const std::string& where)
{
    auto bad = [&](const std::string& what) {
        return makeError(where + ": not a flight record (" + what + "); it is written by shardscope-worker, do not edit it",
                         ErrorKind::Syntax);
    };
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return bad("not a JSON object");
    try {
        FlightRecord r;
        r.rank = j.at("rank").get<int>();
        r.request = j.at("request").get<std::int64_t>();
        r.time = j.at("time").get<double>();
        r.step = j.at("step").get<std::int64_t>();
        r.phase = j.at("phase").get<std::string>();
        r.issued = j.at("issued").get<std::map<std::string, std::int64_t>>();
        for (const auto& c : j.at("collectives")) {
            CollectiveRecord e;
            e.group = c.at("group").get<std::string>();
            e.seq = c.at("seq").get<std::int64_t>();
            e.kind = c.at("kind").get<std::string>();
            e.bytes = c.at("bytes").get<std::int64_t>();
            e.dtype = c.at("dtype").get<std::string>();
            e.step = c.at("step").get<std::int64_t>();
            e.phase = c.at("phase").get<std::string>();
            e.issuedAt = c.at("issued_at").get<double>();
            if (!c.at("completed_at").is_null())
                e.completedAt = c.at("completed_at").get<double>();
            r.collectives.push_back(std::move(e));
        }
        return r;
    } catch (const json::exception& e) {
        return bad(e.what());
    }
}

std::filesystem::path flightRequestFile(const std::filesystem::path& flightDir) { return flightDir / "request"; }

std::filesystem::path flightRecordFile(const std::filesystem::path& flightDir, int rank)
{
    return flightDir / ("rank" + std::to_string(rank) + ".json");
}

} // namespace shardscope::protocol
