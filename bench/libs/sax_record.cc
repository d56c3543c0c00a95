#include "bench/libs/sax_record.h"

namespace dl::bench {

std::optional<std::string> sax_check_object(std::string_view text, const wire::RecordName& name, std::string_view tag,
                                            Tape& tape) {
  tape.clear();
  TapeBuilder b(tape);
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &b)) name.raise(name.label + " is not valid JSON");
  if (tape.tokens.empty() || tape.tokens[0].t != Tok::kObject) name.raise(name.label + " is not a JSON object");
  // The top level's members: a key, then its value (skipped whole).
  std::optional<std::string> found;
  TapeReader r(tape);
  r.eat('{');
  std::string key;
  while (r.cur().t == Tok::kKey) {
    r.string(key);
    const bool is_tag = !tag.empty() && key == tag;
    if (is_tag && r.cur().t == Tok::kString) {
      found.emplace();
      r.string(*found);
    } else {
      if (is_tag) found.reset();
      r.skip();
    }
  }
  return found;
}

}  // namespace dl::bench
