#include "servers/tables.hpp"

#include <algorithm>

namespace bench {

std::string footnotes::mark(const std::string& text) {
  if (text.empty()) return "";
  auto it = std::find(texts_.begin(), texts_.end(), text);
  if (it == texts_.end()) it = texts_.insert(texts_.end(), text);
  return "[" + std::to_string(it - texts_.begin() + 1) + "]";
}

void footnotes::print(std::FILE* out) const {
  for (std::size_t i = 0; i < texts_.size(); ++i)
    std::fprintf(out, "   [%zu] %s\n", i + 1, texts_[i].c_str());
}

void print_run_head(const std::string& head, const std::vector<server_kind>& servers,
                    const served_content& served) {
  std::string line = head + "; servers:";
  for (const server_kind& k : servers) line += " " + k.name;
  if (served.expected.page) {
    std::printf("%s\n# serving:  %s, spoold's guestbook page (a store visit per request)\n",
                line.c_str(), served.url_path.c_str());
  } else {
    std::printf("%s\n# serving:  %s%s (%zu bytes)\n", line.c_str(), served.root.c_str(),
                served.url_path.c_str(), served.expected.text.size());
  }
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void print_cells(const std::vector<std::vector<std::string>>& cells,
                 const std::vector<std::size_t>& left) {
  std::vector<std::size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const bool is_left = std::find(left.begin(), left.end(), i) != left.end();
      const std::string pad(width[i] - line[i].size(), ' ');
      text += (is_left ? line[i] + pad : pad + line[i]) + "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    std::printf("%s\n", text.c_str());
  }
}

const row* find_row(const results& res, const std::string& experiment, const std::string& variant,
                    const std::string& peer, unsigned threads) {
  for (const row& r : res.rows())
    if (r.experiment == experiment && r.variant == variant && r.peer == peer &&
        r.threads == threads)
      return &r;
  return nullptr;
}

}  // namespace bench
