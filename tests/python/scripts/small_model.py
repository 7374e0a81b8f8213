"""A small model run twice under `dynvm run`: a few fused kernels to compile (or reuse)."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32))


def predict(x):
    return model(x).softmax(-1)


with torch.no_grad():
    for _ in range(2):
        out = predict(torch.randn(4, 16))
print(tuple(out.shape))
