// tables.hpp: how the server experiments print their tables: the head of a run, columns of
// cells, footnote markers, and the row a cell is read from.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "results.hpp"
#include "servers/running_server.hpp"
#include "servers/served_content.hpp"

namespace bench {

// Footnote markers for a table: each distinct text gets "[1]", "[2]", ... once.
class footnotes {
 public:
  std::string mark(const std::string& text);  // "" for empty text
  void print(std::FILE* out) const;

 private:
  std::vector<std::string> texts_;
};

// The head of a run's output: `head` ("# http:     ..."), the servers' names, and what is served.
void print_run_head(const std::string& head, const std::vector<server_kind>& servers,
                    const served_content& served);

// `v` with `decimals` digits after the point.
std::string fixed(double v, int decimals);
// Prints `cells` (the first line the head) as columns two blanks apart: the columns in `left`
// are text (names, ranges) and left-aligned, the rest right-aligned.
void print_cells(const std::vector<std::vector<std::string>>& cells,
                 const std::vector<std::size_t>& left);
// The row of `experiment` at (variant, peer, threads), or nullptr.
const row* find_row(const results& res, const std::string& experiment, const std::string& variant,
                    const std::string& peer, unsigned threads);

}  // namespace bench
