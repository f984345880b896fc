// syncbusctl's output formats, as kubectl's -o: `table` (aligned columns for people), `wide`
// (more columns or rows), `json` and `yaml` (the complete data, for scripts). Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace syncbus::ctl {

enum class OutputFormat { kTable, kWide, kJson, kYaml };

// "table", "wide", "json", "yaml"; anything else is an InvalidArgument naming the choices.
Result<OutputFormat> ParseOutputFormat(std::string_view text);
const char* OutputFormatName(OutputFormat format);
// The names, in the order above (for -o's help and shell completion).
const std::vector<std::string>& OutputFormatNames();

bool IsDocument(OutputFormat format);  // json or yaml

// `doc` as indented JSON or as YAML (block style; strings quoted where YAML would read them as
// something else), ending in a newline. Table and wide print JSON.
std::string FormatDocument(const Json& doc, OutputFormat format);
// One document of a stream: a JSON line, or a YAML document starting with "---".
std::string FormatStreamItem(const Json& doc, OutputFormat format);

std::string ToYaml(const Json& doc);

}  // namespace syncbus::ctl
