"""Never imports torch: `dynvm run` must not load it (nor dynvm's native core) either."""
import sys

print(sorted(name for name in ("torch", "dynvm._C") if name in sys.modules))
