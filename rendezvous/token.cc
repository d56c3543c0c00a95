#include "rendezvous/token.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "control/env_names.h"
#include "errors/error.h"

namespace dl::rdzv {

std::optional<std::string> load_token(const std::string& token_file) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) throw UsageError("cannot read token file " + token_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string t = ss.str();
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    if (t.empty()) throw UsageError("token file " + token_file + " is empty");
    return t;
  }
  if (const char* t = std::getenv(env::kDlToken); t && *t) return std::string(t);
  return std::nullopt;
}

}  // namespace dl::rdzv
