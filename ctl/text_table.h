// Aligned text tables and ages as syncbusctl prints them (kubectl style: two spaces between
// columns, the last column unpadded; "65s", "3m20s", "47m", "2h5m", "30h", "3d4h"). Pure functions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace syncbus::ctl {

// rows[0] is the header. Rows shorter than the header are padded with empty cells.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// A duration for people, coarser the longer it is; negative counts as zero.
std::string FormatAge(std::chrono::seconds age);

}  // namespace syncbus::ctl
