"""dynvm: compiles PyTorch programs from their bytecode."""
from dynvm._C import __version__
