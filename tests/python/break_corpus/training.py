"""Break corpus: compiled training steps — forward, loss, loss.backward(),
optimizer.step(), zero_grad(), with .item() logging, gradient clipping, BatchNorm
running statistics and dropout under a fixed seed. The model and optimizer persist
across calls, so several steps are compared: losses, parameters, gradients,
buffers and optimizer state."""

import torch
import torch.nn.functional as F

from break_corpus._scenario import randn, scenario, seeded


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def _sgd_setup():
    model = _mlp()
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _data(n=8):
    x = torch.randn(n, 4)
    return x, x.sum(1, keepdim=True) * 0.5


@scenario(lambda: seeded(_sgd_setup) + _data(), persistent=True, calls=4, atol=1e-5)
def sgd_step_with_loss_item(model, opt, x, y):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {loss.item():.5f}")
    return loss.detach()


def _adam_setup():
    model = _mlp()
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


@scenario(lambda: seeded(_adam_setup), persistent=True, calls=4, atol=1e-5)
def adam_steps_on_fresh_seeded_batches(model, opt):
    losses = []
    for _ in range(2):
        x, y = _data()
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        losses.append(round(loss.item(), 5))
        opt.step()
    print("losses", losses)
    return losses


@scenario(lambda: seeded(_sgd_setup) + _data(), persistent=True, calls=3, atol=1e-5)
def gradient_clipping_with_norm_item(model, opt, x, y):
    loss = F.mse_loss(model(x), y) * 10
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    if norm.item() > 1.0:
        print("clipped a large gradient")
    opt.step()
    return loss.item(), norm


class BNNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.drop = torch.nn.Dropout(0.3)
        self.out = torch.nn.Linear(6, 2)

    def forward(self, x):
        h = self.drop(self.bn(self.lin(x)).relu())
        return self.out(h)


def _bn_setup():
    model = BNNet()
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


@scenario(lambda: seeded(_bn_setup) + (torch.randn(6, 4), torch.randint(0, 2, (6,))),
          persistent=True, calls=3, atol=1e-5)
def batchnorm_dropout_step_with_print(model, opt, x, target):
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, target)
    opt.zero_grad()
    print("mean running var", round(model.bn.running_var.mean().item(), 5))
    loss.backward()
    opt.step()
    return loss.detach(), model.bn.num_batches_tracked.clone()


@scenario(lambda: seeded(_sgd_setup) + _data(), persistent=True, calls=3, atol=1e-5)
def gradient_accumulation_with_data_dependent_skip(model, opt, x, y):
    x = x * 1.5
    opt.zero_grad()
    total = 0.0
    for chunk_x, chunk_y in zip(x.split(4), y.split(4)):
        loss = F.mse_loss(model(chunk_x), chunk_y) / 2
        if loss > 100:
            continue
        loss.backward()
        total += loss.item()
    opt.step()
    return total


@scenario(lambda: seeded(_sgd_setup) + _data(), persistent=True, calls=3, atol=1e-5)
def eval_step_in_no_grad_after_train_step(model, opt, x, y):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        model.eval()
        val = F.mse_loss(model(x * 0.5), y * 0.5)
        model.train()
    print(f"train {loss.item():.4f} val {val.item():.4f}")
    return val


@scenario(lambda: (randn(3, requires_grad=True),))
def backward_inside_function_then_read_grad(w):
    loss = (w * w).sum()
    loss.backward()
    print("grad norm", round(w.grad.norm().item(), 4))
    with torch.no_grad():
        w -= 0.1 * w.grad
    return w.detach() * 2


def _lr_setup():
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    return model, opt, torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)


@scenario(lambda: seeded(_lr_setup) + _data(), persistent=True, calls=3, atol=1e-5)
def scheduler_step_and_lr_print(model, opt, sched, x, y):
    loss = F.l1_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    print("lr now", opt.param_groups[0]["lr"])
    return loss.item()


@scenario(lambda: (randn(3),))
def manual_seed_inside_then_random_after_break(x):
    y = x.sigmoid()
    torch.manual_seed(7)
    noise = torch.randn(3)
    y = y + noise
    print("first noise sum", round(noise.sum().item(), 4))
    mask = torch.rand(3) > 0.5
    return y * mask, torch.randn(2)


@scenario(lambda: (seeded(_mlp), randn(5, 4)), persistent=True, atol=1e-5)
def manual_sgd_update_without_optimizer(model, x):
    loss = model(x).pow(2).mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    print(f"manual step, loss {loss.item():.5f}")
    with torch.no_grad():
        for p, g in zip(model.parameters(), grads):
            p.sub_(0.1 * g)
    return loss.detach()
