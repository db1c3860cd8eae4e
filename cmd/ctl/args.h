// Command-line parsing for gpupoolctl: flag specs, a parser and the generated help text.
//
// Accepted forms: --name value, --name=value, -n value, -n=value; boolean flags take no value
// (--gang) or an explicit one (--gang=false); repeated flags collect every occurrence
// (--label a=1 --label b=2). "--" ends the flags: everything after it is kept verbatim
// (a job's command line). Anything else that does not start with '-' is positional.
//
// Errors are usage errors: the caller prints them and exits with kExitUsage.
//
// Thread safety: plain values and functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool::ctl {

enum class FlagKind {
  kBool,      // present = true
  kValue,     // one value; the last occurrence wins
  kRepeated,  // every occurrence kept in order
};

struct FlagSpec {
  std::string name;     // long name without dashes, e.g. "tenant"
  char short_name = 0;  // e.g. 'o'; 0 = none
  FlagKind kind = FlagKind::kValue;
  std::string value_name;  // shown in help, e.g. "PATH"
  std::string help;
};

// What ParseFlags found.
class ParsedArgs {
 public:
  bool Has(std::string_view flag) const;
  // The last value of a flag (a bool flag reads "true"/"false"), or `fallback`.
  std::string Get(std::string_view flag, std::string fallback = "") const;
  std::optional<std::string> Find(std::string_view flag) const;
  // Every value of a repeated flag, in order.
  std::vector<std::string> GetAll(std::string_view flag) const;
  bool GetBool(std::string_view flag) const;

  std::vector<std::string> positional;
  // Words after "--", verbatim.
  std::vector<std::string> rest;
  bool saw_dash_dash = false;

 private:
  friend Result<ParsedArgs> ParseFlags(const std::vector<FlagSpec>& specs,
                                       const std::vector<std::string>& words);
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// Parses `words` against `specs`. InvalidArgument with a message a person can act on
// ("unknown flag --tenat", "flag --pool needs a value") on bad input.
Result<ParsedArgs> ParseFlags(const std::vector<FlagSpec>& specs,
                              const std::vector<std::string>& words);

// "  --tenant PATH     Tenant path …" lines, aligned.
std::string FormatFlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace gpupool::ctl
