#include "results.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "progress.hpp"

namespace bench {

summary summarize(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.front(), values.back()};
}

summary row::value() const {
  std::vector<double> v;
  for (const sample& s : samples) v.push_back(s.value);
  return summarize(std::move(v));
}

std::optional<summary> row::extra(std::string_view name) const {
  std::vector<double> v;
  for (const sample& s : samples)
    for (const auto& [key, value] : s.extras)
      if (key == name) v.push_back(value);
  if (v.empty()) return std::nullopt;
  return summarize(std::move(v));
}

std::vector<std::string> row::extra_names() const {
  std::vector<std::string> names;
  for (const sample& s : samples)
    for (const auto& kv : s.extras)
      if (std::find(names.begin(), names.end(), kv.first) == names.end()) names.push_back(kv.first);
  return names;
}

std::string human(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (!std::isfinite(v)) return v > 0 ? "inf" : "nan";
  // Each threshold sits half a rounding step below its power, so that 999,960 prints as "1M",
  // not "1e+03k".
  struct scale {
    double from, divisor;
    const char* format;
  };
  static constexpr scale scales[] = {
      {999.5e6, 1e9, "%.3gG"}, {999.5e3, 1e6, "%.3gM"}, {9999.5, 1e3, "%.3gk"}, {0, 1, "%.4g"}};
  for (const scale& s : scales) {
    if (a >= s.from) {
      std::snprintf(buf, sizeof buf, s.format, v / s.divisor);
      break;
    }
  }
  return buf;
}

void results::add(std::vector<row> rows) {
  for (row& r : rows) rows_.push_back(std::move(r));
}

std::optional<double> results::ratio_vs_spool(const row& r) const {
  if (r.peer == "spool" || r.reference || !r.ran()) return std::nullopt;
  for (const row& s : rows_) {
    if (s.peer != "spool" || !s.ran() || s.experiment != r.experiment || s.variant != r.variant ||
        s.threads != r.threads)
      continue;
    const double spool = s.value().median, peer = r.value().median;
    const double num = r.m.higher_is_better ? spool : peer;
    const double den = r.m.higher_is_better ? peer : spool;
    if (den == 0) return num == 0 ? 1.0 : INFINITY;
    return num / den;
  }
  return std::nullopt;
}

namespace {

std::string ratio_text(const row& r, std::optional<double> ratio) {
  if (!ratio) return r.peer == "spool" && r.ran() ? "-" : "";
  char buf[48];
  const char* direction = r.m.higher_is_better ? "spool/peer" : "peer/spool";
  if (*ratio >= 100)
    std::snprintf(buf, sizeof buf, "%s %.0fx", direction, *ratio);
  else
    std::snprintf(buf, sizeof buf, "%s %.2fx", direction, *ratio);
  return buf;
}

// "p99_us=12.3 max_us=40.1 speedup_vs_serial=1.8x": extras as medians over the repeats.
std::string notes_text(const row& r) {
  if (!r.not_available.empty()) return r.not_available;
  std::string out;
  for (const std::string& name : r.extra_names()) {
    if (!out.empty()) out += ' ';
    out += name + "=" + human(r.extra(name)->median);
  }
  for (const auto& [name, value] : r.derived) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", value);
    if (!out.empty()) out += ' ';
    out += name + "=" + buf;
  }
  return out;
}

std::string threads_text(unsigned t) { return std::to_string(t); }

}  // namespace

void results::print_table(std::FILE* out, std::string_view experiment) const {
  std::vector<std::vector<std::string>> cells;
  cells.push_back(
      {"experiment", "variant", "peer", "thr", "median", "min-max", "unit", "vs spool", "notes"});
  for (const row& r : rows_) {
    if (r.experiment != experiment) continue;
    if (!r.ran()) {
      cells.push_back({r.experiment, r.variant, r.peer, threads_text(r.threads), "n/a", "", "", "",
                       r.not_available.empty() ? "not run" : r.not_available});
      continue;
    }
    const summary s = r.value();
    cells.push_back({r.experiment, r.variant, r.peer, threads_text(r.threads), human(s.median),
                     human(s.min) + "-" + human(s.max), r.m.unit, ratio_text(r, ratio_vs_spool(r)),
                     notes_text(r)});
  }
  if (cells.size() == 1) return;

  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  const int repeats = [&] {
    std::size_t most = 0;
    for (const row& r : rows_)
      if (r.experiment == experiment) most = std::max(most, r.samples.size());
    return static_cast<int>(most);
  }();
  std::fprintf(out, "\n== %.*s: median and min-max over %d repeat(s) ==\n",
               static_cast<int>(experiment.size()), experiment.data(), repeats);
  std::fprintf(out,
               "   vs spool: ratio of medians from this run, > 1 means spool is ahead "
               "(spool/peer for rates and efficiency, peer/spool for times, latency, CPU)\n");
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const bool right = i == 3 || i == 4;  // numbers: threads and median
      std::string cell = line[i];
      const std::string pad(width[i] - cell.size(), ' ');
      if (i + 1 == line.size())
        text += cell;
      else
        text += (right ? pad + cell : cell + pad) + "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    std::fprintf(out, "%s\n", text.c_str());
  }
  std::fflush(out);
}

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string json_summary(const summary& s) {
  return "{\"median\": " + json_number(s.median) + ", \"min\": " + json_number(s.min) +
         ", \"max\": " + json_number(s.max) + "}";
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

bool results::write_json(std::FILE* f, const run_info& info) const {
  std::string s = "{\n";
  s += "  \"command\": " + json_string(info.command_line) + ",\n";
  s += "  \"machine\": " + json_string(info.machine) + ",\n";
  s += "  \"compiler\": " + json_string(info.compiler) + ",\n";
  s += "  \"peers\": " + json_string(info.peers) + ",\n";
  s += "  \"rows\": [";
  bool first = true;
  for (const row& r : rows_) {
    s += first ? "\n" : ",\n";
    first = false;
    s += "    {\"experiment\": " + json_string(r.experiment) +
         ", \"variant\": " + json_string(r.variant) + ", \"peer\": " + json_string(r.peer) +
         ", \"threads\": " + std::to_string(r.threads) + ", \"metric\": " + json_string(r.m.name) +
         ", \"unit\": " + json_string(r.m.unit) +
         ", \"higher_is_better\": " + (r.m.higher_is_better ? "true" : "false");
    if (!r.ran()) {
      s += ", \"not_available\": " +
           json_string(r.not_available.empty() ? "not run" : r.not_available) + "}";
      continue;
    }
    s += ", \"value\": " + json_summary(r.value()) + ", \"samples\": [";
    for (std::size_t i = 0; i < r.samples.size(); ++i)
      s += (i ? ", " : "") + json_number(r.samples[i].value);
    s += "], \"extras\": {";
    bool first_extra = true;
    for (const std::string& name : r.extra_names()) {
      s += (first_extra ? "" : ", ") + json_string(name) + ": " + json_summary(*r.extra(name));
      first_extra = false;
    }
    for (const auto& [name, value] : r.derived) {
      s += (first_extra ? "" : ", ") + json_string(name) + ": " + json_number(value);
      first_extra = false;
    }
    s += "}, \"sample_extras\": {";  // each extra per repeat, in the order of "samples"
    first_extra = true;
    for (const std::string& name : r.extra_names()) {
      s += (first_extra ? "" : ", ") + json_string(name) + ": [";
      bool first_value = true;
      for (const sample& one : r.samples)
        for (const auto& [key, value] : one.extras)
          if (key == name) {
            s += (first_value ? "" : ", ") + json_number(value);
            first_value = false;
          }
      s += "]";
      first_extra = false;
    }
    s += "}";
    if (auto ratio = ratio_vs_spool(r)) {
      s += ", \"ratio_vs_spool\": " + json_number(*ratio) + ", \"ratio_direction\": " +
           json_string(r.m.higher_is_better ? "spool/peer" : "peer/spool");
    }
    s += "}";
  }
  s += "\n  ]\n}\n";
  return std::fputs(s.c_str(), f) >= 0;
}

bool results::write_csv(std::FILE* f) const {
  std::string s =
      "experiment,variant,peer,threads,metric,unit,higher_is_better,repeats,median,min,max,"
      "ratio_vs_spool,ratio_direction,notes\n";
  for (const row& r : rows_) {
    s += csv_field(r.experiment) + "," + csv_field(r.variant) + "," + csv_field(r.peer) + "," +
         std::to_string(r.threads) + "," + csv_field(r.m.name) + "," + csv_field(r.m.unit) + "," +
         (r.m.higher_is_better ? "1" : "0") + "," + std::to_string(r.samples.size()) + ",";
    if (!r.ran()) {
      s += ",,,,," + csv_field("n/a: " + r.not_available) + "\n";
      continue;
    }
    const summary v = r.value();
    s += json_number(v.median) + "," + json_number(v.min) + "," + json_number(v.max) + ",";
    if (auto ratio = ratio_vs_spool(r))
      s += json_number(*ratio) + "," + (r.m.higher_is_better ? "spool/peer" : "peer/spool");
    else
      s += ",";
    s += "," + csv_field(notes_text(r)) + "\n";
  }
  return std::fputs(s.c_str(), f) >= 0;
}

bool results::write(const std::string& path, const run_info& info) const {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  if (!json && !csv) {
    std::fprintf(stderr, "%s: --out %s: the name must end in .csv or .json\n", program_name(),
                 path.c_str());
    return false;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", program_name(), path.c_str(),
                 std::strerror(errno));
    return false;
  }
  bool ok = json ? write_json(f, info) : write_csv(f);
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "%s: writing %s failed\n", program_name(), path.c_str());
  return ok;
}

}  // namespace bench
