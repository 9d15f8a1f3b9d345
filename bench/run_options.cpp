#include "run_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "progress.hpp"

namespace bench {

namespace {

std::string quoted(const char* arg) {
  std::string s = arg;
  if (!s.empty() && s.find_first_of(" \t\"'$\\") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

void usage_error(const run_options& o, const std::string& what) {
  std::fprintf(stderr, "%s %s: %s (see %s %s --help)\n", program_name(), o.subcommand.c_str(),
               what.c_str(), program_name(), o.subcommand.c_str());
  std::exit(2);
}

double parse_number(const run_options& o, std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
    usage_error(o, std::string(flag) + " wants a non-negative number, not '" + text + "'");
  return v;
}

std::uint64_t parse_count(const run_options& o, std::string_view flag, const std::string& text) {
  const double v = parse_number(o, flag, text);  // accepts 1e8 as well as 100000000
  if (v != std::floor(v) || v > 1e18)
    usage_error(o, std::string(flag) + " wants a whole number, not '" + text + "'");
  return static_cast<std::uint64_t>(v);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

unsigned run_options::max_threads() const {
  return *std::max_element(threads.begin(), threads.end());
}

int run_options::repeat_time_bound() const {
  return size == size_mode::quick && !repeat_given ? std::min(repeat, 3) : repeat;
}

void print_experiment_help(std::string_view name, std::string_view summary, std::string_view help) {
  std::printf("usage: %s %.*s [options]\n\n%.*s\n\n%.*s\n", program_name(),
              static_cast<int>(name.size()), name.data(), static_cast<int>(summary.size()),
              summary.data(), static_cast<int>(help.size()), help.data());
}

void print_run_options_help(std::FILE* out, std::string_view threads, std::string_view quick,
                            bool has_all) {
  std::fprintf(
      out,
      "\ncommon options:\n"
      "  --repeat N       runs per point, interleaved across the contenders (default 5)\n"
      "  --threads LIST   %.*s\n"
      "  --quick          %.*s\n"
      "  --tiny           minimal sizes, for the smoke test (figures are meaningless)\n"
      "  --out FILE       also write the results to FILE, as CSV or JSON by its extension\n"
      "  --plot FILE.png  bar chart of the medians through gnuplot; or a directory (ending in\n"
      "                   / or existing): DIR/EXPERIMENT.png%s\n"
      "  --help           this text\n",
      static_cast<int>(threads.size()), threads.data(), static_cast<int>(quick.size()),
      quick.data(),
      has_all ? "; for `all`, a directory or a\n                   prefix, one PNG per experiment"
              : "");
}

void parse_run_options(int argc, char** argv, run_options& o, bool one_experiment,
                       const flag_handler& own, const std::function<void()>& help) {
  o.subcommand = argc > 1 ? argv[1] : "";
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + quoted(argv[i]);

  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_inline_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
      has_inline_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) usage_error(o, flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      help();
      std::exit(0);
    } else if (flag == "--quick" || flag == "--tiny") {
      const size_mode mode = flag == "--quick" ? size_mode::quick : size_mode::tiny;
      if (o.size != size_mode::full && o.size != mode)
        usage_error(o, "--quick and --tiny exclude each other");
      o.size = mode;
    } else if (flag == "--repeat") {
      const std::uint64_t r = parse_count(o, flag, take_value());
      if (r < 1 || r > 1000) usage_error(o, "--repeat wants 1..1000");
      o.repeat = static_cast<int>(r);
      o.repeat_given = true;
    } else if (flag == "--threads") {
      o.threads.clear();
      for (const std::string& part : split(take_value())) {
        const std::uint64_t t = parse_count(o, flag, part);
        if (t < 1 || t > 1024) usage_error(o, "--threads wants counts in 1..1024");
        o.threads.push_back(static_cast<unsigned>(t));
      }
    } else if (flag == "--out") {
      o.out_file = take_value();
      const auto ends_with = [&](std::string_view tail) {
        return o.out_file.size() >= tail.size() &&
               o.out_file.compare(o.out_file.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (!ends_with(".csv") && !ends_with(".json"))
        usage_error(o, "--out wants a .csv or .json file");
    } else if (flag == "--plot") {
      o.plot_target = take_value();
    } else if (own(flag, take_value)) {
      continue;
    } else if (!one_experiment && flag.rfind("--", 0) == 0 && flag.size() > 2) {
      usage_error(o, "`all` takes only the common options (" + flag +
                         " belongs to one experiment: run that experiment alone)");
    } else {
      usage_error(o, "unknown option '" + flag + "'");
    }
  }
}

std::string count_label(std::uint64_t n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n >= 1'000 && n % 1'000 == 0) return std::to_string(n / 1'000) + "k";
  return std::to_string(n);
}

}  // namespace bench
