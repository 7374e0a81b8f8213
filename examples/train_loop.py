"""A small training loop: an MLP learning a synthetic regression task with SGD.

Run it with `python3 examples/train_loop.py` or `dynvm run examples/train_loop.py`:
both print the same lines. train() has graph breaks on purpose (it prints the loss
with .item() every few steps and stops early on a loss threshold), so under dynvm its
frame is compiled in pieces around them. Everything depends only on the seed.
"""
import argparse

import torch
import torch.nn.functional as F


def make_data(n=256, seed=0):
    """Synthetic data: y = sin(x0) + 0.5 * x1 * x2 - x3, plus a little noise."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=generator)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] - x[:, 3]
    y = y + 0.05 * torch.randn(n, generator=generator)
    return x, y.unsqueeze(1)


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 1),
    )


def train(model, optimizer, x, y, steps=60, batch_size=32, log_every=10, target_loss=0.0):
    """Mini-batch training; returns the list of logged losses."""
    logged = []
    n = x.shape[0]
    for step in range(steps):
        start = (step * batch_size) % n
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        prediction = model(xb)
        loss = F.mse_loss(prediction, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps - 1:
            value = loss.item()
            logged.append(value)
            print(f"step {step:3d}  loss {value:.4f}")
        if loss < target_loss:
            print(f"reached the target loss at step {step}")
            break
    return logged


@torch.no_grad()
def evaluate(model, x, y):
    return F.mse_loss(model(x), y).item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    args = parser.parse_args(argv)

    x, y = make_data()
    model = make_model()
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    print(f"training a {sum(p.numel() for p in model.parameters())}-parameter MLP "
          f"with {args.optimizer} for {args.steps} steps")
    before = evaluate(model, x, y)
    logged = train(model, optimizer, x, y, steps=args.steps, target_loss=0.01)
    after = evaluate(model, x, y)
    print(f"full-data loss: {before:.4f} -> {after:.4f}")
    print(f"logged {len(logged)} losses, improved: {after < before}")


if __name__ == "__main__":
    main()
