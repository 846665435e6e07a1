#include "tools/shard_picture.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dtensor/base/status_macros.h"

namespace dtensor {
namespace {

// A range [begin, end) of one tensor dim; ordered by position.
using Range = std::pair<int64_t, int64_t>;

std::string RangeLabel(const Range& range) {
  return absl::StrCat(range.first, ":", range.second);
}

std::string Padded(const std::string& text, size_t width) {
  return text + std::string(width - text.size(), ' ');
}

// The grid of boxes: `rows` x `cols` cells with a label each, row headers on
// the left (empty for a single unnamed row) and column headers on top.
std::string DrawGrid(const std::vector<std::string>& row_headers,
                     const std::vector<std::string>& col_headers,
                     const std::vector<std::vector<std::string>>& cells) {
  size_t margin = 0;
  for (const std::string& header : row_headers) {
    margin = std::max(margin, header.size());
  }
  if (margin > 0) ++margin;
  std::vector<size_t> widths;
  for (size_t c = 0; c < col_headers.size(); ++c) {
    size_t width = col_headers[c].size();
    for (const auto& row : cells) width = std::max(width, row[c].size());
    widths.push_back(width + 2);
  }
  std::string rule = std::string(margin, ' ') + "+";
  std::string header_line = std::string(margin, ' ') + " ";
  for (size_t c = 0; c < widths.size(); ++c) {
    absl::StrAppend(&rule, std::string(widths[c], '-'), "+");
    absl::StrAppend(&header_line, " ", Padded(col_headers[c], widths[c]));
  }
  header_line.erase(header_line.find_last_not_of(' ') + 1);
  std::string picture = absl::StrCat(header_line, "\n", rule, "\n");
  for (size_t r = 0; r < cells.size(); ++r) {
    absl::StrAppend(&picture, Padded(row_headers[r], margin), "|");
    for (size_t c = 0; c < widths.size(); ++c) {
      absl::StrAppend(&picture, " ", Padded(cells[r][c], widths[c] - 1), "|");
    }
    absl::StrAppend(&picture, "\n", rule, "\n");
  }
  return picture;
}

}  // namespace

absl::StatusOr<std::string> DrawShardPicture(const DTensorSpec& spec) {
  if (spec.ndim() != 1 && spec.ndim() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "can only draw 1-d and 2-d tensors, not ", spec.ndim(), "-d"));
  }
  const bool two_d = spec.ndim() == 2;
  // The ranks holding each (row range, column range) block, in rank order.
  std::map<std::pair<Range, Range>, std::vector<int64_t>> holders;
  std::vector<int64_t> empty_holders;
  std::vector<int64_t> ranks = spec.mesh().Ranks();
  std::sort(ranks.begin(), ranks.end());
  for (int64_t rank : ranks) {
    DT_ASSIGN_OR_RETURN(ShardBlock block, spec.BlockOf(rank));
    if (block.empty()) {
      empty_holders.push_back(rank);
      continue;
    }
    auto range = [&](int d) {
      return Range{block.offset[d], block.offset[d] + block.shape[d]};
    };
    const Range row = two_d ? range(0) : Range{0, 1};
    const Range col = two_d ? range(1) : range(0);
    holders[{row, col}].push_back(rank);
  }

  std::string picture = two_d ? "rows: tensor dim 0, columns: tensor dim 1\n"
                              : "columns: tensor dim 0\n";
  if (holders.empty()) {
    absl::StrAppend(&picture, "(no elements)\n");
  } else {
    std::vector<Range> rows, cols;
    for (const auto& [key, unused] : holders) {
      rows.push_back(key.first);
      cols.push_back(key.second);
    }
    for (std::vector<Range>* ranges : {&rows, &cols}) {
      std::sort(ranges->begin(), ranges->end());
      ranges->erase(std::unique(ranges->begin(), ranges->end()), ranges->end());
    }
    std::vector<std::string> row_headers, col_headers;
    for (const Range& row : rows) {
      row_headers.push_back(two_d ? RangeLabel(row) : "");
    }
    for (const Range& col : cols) col_headers.push_back(RangeLabel(col));
    std::vector<std::vector<std::string>> cells(
        rows.size(), std::vector<std::string>(cols.size()));
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < cols.size(); ++c) {
        auto it = holders.find({rows[r], cols[c]});
        if (it != holders.end()) cells[r][c] = absl::StrJoin(it->second, ",");
      }
    }
    absl::StrAppend(&picture, DrawGrid(row_headers, col_headers, cells));
  }
  if (!empty_holders.empty()) {
    absl::StrAppend(&picture, "empty blocks: ranks ",
                    absl::StrJoin(empty_holders, ", "), "\n");
  }
  return picture;
}

}  // namespace dtensor
