"""One table of the test models: a name, how to build the model (seeded, eval mode)
and how to make its inputs for a batch size and a seed. torchvision is imported only
when one of its models is asked for."""

import dataclasses
import importlib.util
import typing

from models import gpt2_block, text_classifier

TORCHVISION_NAMES = (
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "efficientnet_b0",
    "vit_b_16",
    "densenet121",
    "squeezenet1_1",
)
OWN_NAMES = ("gpt2_block", "gpt2_tiny", "text_classifier")
ALL_NAMES = OWN_NAMES + TORCHVISION_NAMES


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    build: typing.Callable  # () -> nn.Module in eval mode
    make_inputs: typing.Callable  # (batch, seed) -> tuple of arguments


def torchvision_available():
    return importlib.util.find_spec("torchvision") is not None


def spec(name):
    """The ModelSpec called `name`; raises ImportError for a torchvision model
    without torchvision."""
    if name == "gpt2_block":
        return ModelSpec(name, gpt2_block.build_block, gpt2_block.block_inputs)
    if name == "gpt2_tiny":
        return ModelSpec(name, gpt2_block.build_tiny_gpt2, gpt2_block.gpt2_inputs)
    if name == "text_classifier":
        return ModelSpec(name, text_classifier.build, text_classifier.make_inputs)
    if name in TORCHVISION_NAMES:
        from models import torchvision_models

        return ModelSpec(name, lambda: torchvision_models.build(name),
                         torchvision_models.make_inputs)
    raise ValueError(f"unknown model {name!r}")
