// Placeholder until the live-code adapter lands (issue 3).
namespace dynvm::frontend {}
