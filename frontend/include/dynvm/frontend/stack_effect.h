// stack_effect: how much an instruction changes the value stack, as dis.stack_effect says.
#pragma once

#include <optional>

#include "dynvm/frontend/opcode.h"
#include "dynvm/frontend/raw_code.h"

namespace dynvm::frontend {

// The net stack effect of opcode number `opcode` (a byte of `version`, or one of 3.12's
// pseudo opcodes) with argument `oparg`, exactly as that version's dis.stack_effect
// computes it: `jump` true for the jump taken, false for not taken, nullopt for the
// larger of the two. nullopt where dis raises ValueError (unknown or specialised
// opcodes). Opcodes without an argument ignore `oparg`.
std::optional<int> stack_effect(PythonVersion version, int opcode, int oparg,
                                std::optional<bool> jump = std::nullopt);

// The same for a base instruction (as the version spells it).
std::optional<int> stack_effect(PythonVersion version, Opcode opcode, int oparg,
                                std::optional<bool> jump = std::nullopt);

}  // namespace dynvm::frontend
