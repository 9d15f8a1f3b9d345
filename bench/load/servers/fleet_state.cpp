#include "servers/fleet_state.hpp"

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "servers/temp_dir.hpp"

namespace bench {

namespace {

// A JSON value as state.json holds them: objects, arrays, strings and numbers (true, false and
// null are read and kept as their kind only).
struct json {
  enum class kind { object, array, string, number, other } k = kind::other;
  std::map<std::string, json> members;
  std::vector<json> items;
  std::string text;  // a string's content, a number's digits
};

// A recursive-descent reader of one JSON text (RFC 8259), enough for what json.dump writes.
class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_(s) {}

  json document() {
    json v = value();
    space();
    if (at_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(what + " at byte " + std::to_string(at_));
  }
  void space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  bool take(char c) {
    space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("'") + c + "' expected");
  }

  json value() {
    space();
    if (at_ >= s_.size()) fail("a value expected");
    const char c = s_[at_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return json{json::kind::string, {}, {}, string()};
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    for (std::string_view word : {"true", "false", "null"}) {
      if (s_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return json{};
      }
    }
    fail("a value expected");
  }
  json object() {
    json v{json::kind::object, {}, {}, {}};
    expect('{');
    if (take('}')) return v;
    do {
      space();
      if (at_ >= s_.size() || s_[at_] != '"') fail("a member name expected");
      std::string name = string();
      expect(':');
      v.members[name] = value();
    } while (take(','));
    expect('}');
    return v;
  }
  json array() {
    json v{json::kind::array, {}, {}, {}};
    expect('[');
    if (take(']')) return v;
    do v.items.push_back(value());
    while (take(','));
    expect(']');
    return v;
  }
  json number() {
    const std::size_t from = at_;
    while (at_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[at_])) ||
                               std::string_view("+-.eE").find(s_[at_]) != std::string_view::npos))
      ++at_;
    return json{json::kind::number, {}, {}, std::string(s_.substr(from, at_ - from))};
  }
  // A string's content; \uXXXX escapes of ASCII characters only (state.json's names,
  // addresses and paths need no more: a path beyond ASCII is refused, not misread).
  std::string string() {
    std::string out;
    ++at_;  // the opening quote
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) break;
      c = s_[at_++];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (at_ + 4 > s_.size()) fail("a short \\u escape");
          const long code = std::strtol(std::string(s_.substr(at_, 4)).c_str(), nullptr, 16);
          if (code <= 0 || code > 0x7f) fail("a \\u escape beyond ASCII");
          out += static_cast<char>(code);
          at_ += 4;
          break;
        }
        default:
          out += c;  // \" \\ \/
      }
    }
    if (at_ >= s_.size()) fail("an unterminated string");
    ++at_;  // the closing quote
    return out;
  }

  std::string_view s_;
  std::size_t at_ = 0;
};

const json& member(const json& object, const std::string& name, json::kind k,
                   const std::string& where) {
  const auto it = object.members.find(name);
  if (object.k != json::kind::object || it == object.members.end() || it->second.k != k)
    throw std::runtime_error(where + "." + name + " is missing or of the wrong type");
  return it->second;
}

fleet_endpoint endpoint(const json& e, const std::string& where) {
  fleet_endpoint out;
  out.name = member(e, "name", json::kind::string, where).text;
  out.addr = member(e, "addr", json::kind::string, where).text;
  const std::string& port = member(e, "port", json::kind::number, where).text;
  char* end = nullptr;
  const unsigned long p = std::strtoul(port.c_str(), &end, 10);
  if (*end != '\0' || p == 0 || p > 65535)
    throw std::runtime_error(where + ".port is not a port: " + port);
  out.port = static_cast<unsigned>(p);
  return out;
}

}  // namespace

fleet_state read_fleet_state(const std::string& path) {
  const std::string text = read_file(path);
  if (text.empty()) throw std::runtime_error("cannot read " + path);
  try {
    const json doc = json_reader(text).document();
    const json& layout = member(doc, "layout", json::kind::object, "state");
    fleet_state state;
    state.haproxy =
        endpoint(member(layout, "haproxy", json::kind::object, "layout"), "layout.haproxy");
    const json& nodes = member(layout, "nodes", json::kind::array, "layout");
    for (std::size_t i = 0; i < nodes.items.size(); ++i)
      state.nodes.push_back(endpoint(nodes.items[i], "layout.nodes[" + std::to_string(i) + "]"));
    return state;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace bench
