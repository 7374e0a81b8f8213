"""The torchvision image models the model tests compile: resnet18, resnet50,
mobilenet_v2, efficientnet_b0, vit_b_16, densenet121 and squeezenet1_1, each built
with weights=None from a fixed seed and put in eval mode, and seeded 224x224 inputs.
Needs torchvision (0.14 here); importing this module imports it."""

import torch
import torchvision

MODEL_NAMES = (
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "efficientnet_b0",
    "vit_b_16",
    "densenet121",
    "squeezenet1_1",
)


def build(name, seed=0, **overrides):
    """torchvision.models.<name>(weights=None, **overrides), weights drawn from `seed`,
    in eval mode (a ViT's zero-initialised head is drawn at random too)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = getattr(torchvision.models, name)(weights=None, **overrides)
        if name.startswith("vit_"):
            # torchvision starts the classification head at zero: every output would be
            # 0 and comparing outputs would test nothing.
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model.eval()


def build_all(seed=0):
    """{name: model} for every name in MODEL_NAMES."""
    return {name: build(name, seed) for name in MODEL_NAMES}


def make_inputs(batch, seed=0, size=224):
    """(images,): float32 of shape (batch, 3, size, size)."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 3, size, size, generator=generator),)
