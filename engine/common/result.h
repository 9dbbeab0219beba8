#pragma once

// Result<T>: a value or an Error, for expected failures that cross module borders (bad input,
// missing file, port in use). Internal bugs are asserts, run-ending conditions inside a rank are
// exceptions caught once in the worker's main; see ../shared/STYLE.md, "Errors".
//
// std::expected is C++23 and g++ 12 (Debian bookworm) lacks it, hence this small type with the
// same spirit: check with `if (!r)`, read r.error() or *r.

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace shardscope {

// What kind of mistake an Error is, so that a front end can choose how to show it (a syntax
// error points into the file, an unknown key offers the known ones, a file that cannot be read
// offers to pick another) without reading the text.
enum class ErrorKind {
    Unspecified,
    Io, // a file or folder that cannot be read or written
    Syntax, // text that cannot be parsed (YAML, JSON)
    UnknownKey, // a key the format does not have
    BadValue, // a value of the wrong type, out of range or not one of the choices
    Conflict, // values that do not go together, or that this machine cannot run
};

// An error a user can act on: what went wrong, where, and how to fix it, in one message (what
// people read), with the kind, the "where" and the fix also as fields when they are known, so
// that an editor can point at it without parsing the text.
struct Error {
    std::string message; // the whole text, "file:line:column: what ...; how to fix"
    ErrorKind kind = ErrorKind::Unspecified;
    std::string fix; // how to fix it, when said apart from the message (it is in the message too)
    std::string file; // where, when known
    int line = 0; // 1-based; 0: unknown
    int column = 0; // 1-based; 0: unknown
    std::string keyPath; // the key at fault, dotted ("model.n_head"), when known
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_state(std::in_place_index<0>, std::move(value)) { }
    Result(Error error) : m_state(std::in_place_index<1>, std::move(error)) { }

    bool ok() const { return m_state.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() &
    {
        assert(ok());
        return std::get<0>(m_state);
    }
    const T& value() const&
    {
        assert(ok());
        return std::get<0>(m_state);
    }
    T&& value() &&
    {
        assert(ok());
        return std::get<0>(std::move(m_state));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const
    {
        assert(!ok());
        return std::get<1>(m_state);
    }

private:
    std::variant<T, Error> m_state;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : m_error(std::move(error)) { }

    bool ok() const { return !m_error.has_value(); }
    explicit operator bool() const { return ok(); }
    const Error& error() const
    {
        assert(!ok());
        return *m_error;
    }

private:
    std::optional<Error> m_error;
};

inline Error makeError(std::string message, ErrorKind kind = ErrorKind::Unspecified)
{
    Error error;
    error.message = std::move(message);
    error.kind = kind;
    return error;
}

// The error, saying which file it is about (the message names it already).
inline Error inFile(Error error, std::string file)
{
    error.file = std::move(file);
    return error;
}

// An error at a place in a file: the message is "file:line:column: what; fix", the parts are
// fields too.
inline Error errorAt(ErrorKind kind, std::string file, int line, int column, const std::string& what, std::string fix = {})
{
    Error error;
    error.message = file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what
                    + (fix.empty() ? std::string() : "; " + fix);
    error.kind = kind;
    error.fix = std::move(fix);
    error.file = std::move(file);
    error.line = line;
    error.column = column;
    return error;
}

} // namespace shardscope
