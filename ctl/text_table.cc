#include "ctl/text_table.h"

#include <algorithm>
#include <sstream>

namespace syncbus::ctl {

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  const size_t columns = rows[0].size();
  std::vector<size_t> width(columns, 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i + 1 < columns && i < row.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < columns; ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < columns) line += std::string(width[i] - cell.size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
  return out.str();
}

std::string FormatAge(std::chrono::seconds age) {
  const long long s = std::max<long long>(0, age.count());
  const long long m = s / 60, h = s / 3600, d = s / 86400;
  auto two = [](long long a, const char* ua, long long b, const char* ub) {
    return std::to_string(a) + ua + (b == 0 ? "" : std::to_string(b) + ub);
  };
  if (s < 120) return std::to_string(s) + "s";
  if (m < 10) return two(m, "m", s % 60, "s");
  if (m < 180) return std::to_string(m) + "m";
  if (h < 8) return two(h, "h", m % 60, "m");
  if (h < 48) return std::to_string(h) + "h";
  if (d < 8) return two(d, "d", h % 24, "h");
  return std::to_string(d) + "d";
}

}  // namespace syncbus::ctl
