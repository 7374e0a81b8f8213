"""Quick start: a torchvision ResNet-18 (random weights, eval mode) classifying two
random images. Run it with `dynvm run examples/quickstart.py` or plain python3: both
print the same classes and probabilities, which depend only on the seed (the checksum of
the logits agrees to float32 rounding: fused kernels round differently from ATen)."""
import time

import torch
import torchvision


def main():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    images = torch.randn(2, 3, 224, 224)

    with torch.no_grad():
        start = time.perf_counter()
        logits = model(images)
        elapsed = time.perf_counter() - start
        again = model(images)

    probs = logits.softmax(dim=-1)
    top = probs.topk(3, dim=-1)
    print(f"model: resnet18, {sum(p.numel() for p in model.parameters())} parameters")
    print(f"input: {tuple(images.shape)}, output: {tuple(logits.shape)}")
    for i in range(images.shape[0]):
        classes = ", ".join(
            f"{c}:{p:.4f}" for c, p in zip(top.indices[i].tolist(), top.values[i].tolist()))
        print(f"image {i}: top-3 classes {classes}")
    print(f"logits checksum: {logits.double().sum().item():.6f}")
    print(f"deterministic: {torch.equal(logits, again)}")
    print(f"forward time: {elapsed * 1000:.1f} ms")


if __name__ == "__main__":
    main()
