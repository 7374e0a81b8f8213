"""The exceptions dynvm raises."""


class GraphBreakError(RuntimeError):
    """Raised under fullgraph=True when the VM meets code it cannot capture; the message
    gives the reason and the user's file:line."""
