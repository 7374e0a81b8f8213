"""Break corpus: calls the VM cannot trace into — numpy, math on tensor values, the
random and time modules, json, copy.deepcopy, hashlib/zlib/struct (C extensions) —
with tensor work on both sides of the call."""

import copy
import hashlib
import io
import json
import math
import random
import struct
import time
import zlib

import numpy as np
import torch

from break_corpus._scenario import positive, randn, scenario


@scenario(lambda: (randn(3, 3),), other=lambda: (randn(2, 5),))
def numpy_function_on_tensor_data(x):
    y = x * 2
    arr = np.linalg.norm(y.numpy(), axis=1)
    z = torch.as_tensor(arr, dtype=torch.float32)
    return y / z.unsqueeze(1)


@scenario(lambda: (positive(4),))
def math_on_item_values(x):
    s = x.sum()
    root = math.sqrt(s.item())
    angle = math.atan2(x[0].item(), x[1].item())
    return x * root + angle


@scenario(lambda: (randn(5),))
def random_module_draws(x):
    y = x.abs()
    k = random.randint(0, 4)
    w = random.random()
    return y[k] * w + y.sum(), k


@scenario(lambda: (randn(3),))
def random_shuffle_of_tensor_list(x):
    parts = [x * i for i in range(4)]
    random.shuffle(parts)
    return torch.stack(parts).cumsum(0)


@scenario(lambda: (randn(4),))
def time_measurement_mid_function(x):
    y = x.exp()
    start = time.perf_counter()
    y = y.log1p()
    elapsed = time.perf_counter() - start
    z = y * 2
    return z, elapsed >= 0.0


@scenario(lambda: (randn(2, 2),))
def json_dumps_of_tensor_values(x):
    y = (x * 100).round() / 100
    text = json.dumps({"values": [round(v, 2) for v in y.flatten().tolist()], "n": 4},
                      sort_keys=True)
    back = json.loads(text)
    return torch.tensor(back["values"]).reshape(2, 2) + x, text


@scenario(lambda: ({"w": randn(3), "meta": {"steps": [1, 2]}},))
def copy_deepcopy_of_state(state):
    state["w"] = state["w"] * 2
    snapshot = copy.deepcopy(state)
    snapshot["meta"]["steps"].append(3)
    state["w"].add_(1)
    return snapshot["w"] + state["w"], snapshot


@scenario(lambda: (randn(4),))
def hashlib_digest_of_tensor_bytes(x):
    y = (x * 100).round().to(torch.int32)
    digest = hashlib.sha256(y.numpy().tobytes()).hexdigest()[:8]
    return y.float() / 100, digest


@scenario(lambda: (randn(3),))
def zlib_and_struct_on_tensor_values(x):
    y = x.tanh()
    packed = struct.pack("3f", *y.tolist())
    crc = zlib.crc32(packed)
    return y * (crc % 7), crc


@scenario(lambda: (randn(2, 3),))
def numpy_random_with_global_seed(x):
    x = x.sigmoid()
    noise = torch.from_numpy(np.random.standard_normal((2, 3)).astype(np.float32))
    return x + noise * 0.1


@scenario(lambda: (randn(3), random.Random(int(torch.randint(0, 1000, (1,))))))
def random_instance_argument_draws(x, rng):
    y = x * rng.random()
    k = rng.randrange(3)
    return y[k] + y, k


@scenario(lambda: (randn(3),
                   torch.Generator().manual_seed(int(torch.randint(0, 1000, (1,))))))
def torch_generator_argument_draws(x, gen):
    y = x + torch.rand(3, generator=gen)
    print("first draw done")
    return y * torch.randn(3, generator=gen)


@scenario(lambda: (randn(2), io.StringIO()))
def stringio_argument_written_around_break(x, buf):
    y = x.exp()
    buf.write(f"first {y.shape[0]}\n")
    print("in the middle")
    buf.write(f"second {round(y.sum().item(), 3)}\n")
    return y * 2
