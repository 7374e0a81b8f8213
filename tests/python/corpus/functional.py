"""Corpus: torch.nn.functional calls: activations, softmax, normalization, dropout
in eval, padding, interpolation, convolution and pooling, embedding and losses."""

import torch
import torch.nn.functional as F

from corpus._case import case, positive, rand_int, randn


@case((3, 4))
def activations(x):
    return (F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x),
            F.leaky_relu(x, 0.1), F.elu(x), F.hardtanh(x, -0.5, 0.5), F.softplus(x))


@case((2, 5))
def softmax_variants(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), x.softmax(0), torch.softmax(x, -1)


@case((2, 3, 6), (6,), (6,))
def layer_norm_functional(x, w, b):
    return F.layer_norm(x, (6,), w, b), F.layer_norm(x, x.shape[-1:], eps=1e-3)


@case((4, 5))
def dropout_not_training(x):
    return F.dropout(x, p=0.5, training=False), F.dropout(x, 0.2, False) * 2


@case((1, 2, 3, 3))
def pad_modes(x):
    return (F.pad(x, (1, 1)), F.pad(x, (1, 2, 0, 1), value=-1.0),
            F.pad(x, (1, 1, 1, 1), mode="reflect"), F.pad(x, (2, 0, 1, 1), mode="replicate"))


@case((1, 2, 4, 4))
def interpolate_modes(x):
    return (F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(6, 5), mode="bilinear", align_corners=False),
            F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=True))


@case((2, 3, 6, 6), (4, 3, 3, 3), (4,))
def conv2d_functional(x, w, b):
    return F.conv2d(x, w, b, padding=1), F.conv2d(x, w, stride=2), F.conv1d(x[:, :, 0], w[:, :, 0])


@case((2, 3, 8, 8))
def pooling(x):
    return (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=2, padding=1),
            F.adaptive_avg_pool2d(x, 1).flatten(1), F.adaptive_max_pool2d(x, (2, 3)))


@case((3, 4), (5, 4), (5,))
def linear_functional(x, w, b):
    return F.linear(x, w, b), F.linear(x, w)


@case(inputs=lambda: (randn(10, 3), rand_int(0, 10, 2, 4)))
def embedding_functional(table, tokens):
    hot = (tokens[..., None] == torch.arange(10)).long()
    return F.embedding(tokens, table), hot, F.embedding(tokens, table, padding_idx=0)


@case(inputs=lambda: (randn(4, 5), rand_int(0, 5, 4)))
def classification_losses(logits, target):
    return (F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, 1), target),
            F.cross_entropy(logits, target, reduction="none", label_smoothing=0.1))


@case((3, 4), (3, 4))
def regression_losses(x, y):
    return (F.mse_loss(x, y), F.l1_loss(x, y, reduction="sum"), F.smooth_l1_loss(x, y),
            F.binary_cross_entropy_with_logits(x, y.sigmoid()))


@case((3, 4), (3, 4))
def normalize_and_cosine(x, y):
    return F.normalize(x, dim=-1), F.cosine_similarity(x, y, dim=1), F.pairwise_distance(x, y)


@case(inputs=lambda: (randn(2, 3, 4, 4), positive(3), randn(3), positive(3), randn(3)))
def batch_norm_functional_eval(x, var, mean, weight, bias):
    return F.batch_norm(x, mean, var, weight, bias, training=False, eps=1e-5)


@case((2, 4, 3, 3))
def group_norm_and_instance_norm(x):
    return F.group_norm(x, 2), F.instance_norm(x)


@case((2, 8, 2, 2))
def glu_and_pixel_shuffle(x):
    return F.glu(x, dim=1), F.pixel_shuffle(x, 2), torch.tanh(x) * torch.sigmoid(x)


@case((2, 3, 5), (2, 3, 5), (2, 3, 5))
def hand_written_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5
    mask = torch.ones(3, 3).tril().bool()
    weights = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights @ v
