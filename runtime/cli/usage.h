// The help texts of the dynvm executable, one per command.
#pragma once

namespace dynvm::cli {

// Whose usage a help request or a usage error is about.
enum class HelpTopic { kGeneral, kRun, kDis };

// The usage text for `topic`, ending in a newline. The string is static.
const char* usage_text(HelpTopic topic);

}  // namespace dynvm::cli
