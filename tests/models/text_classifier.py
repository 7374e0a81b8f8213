"""A small text classifier in plain PyTorch: token embedding plus learned positions,
a residual 1-D convolution, a hand-written Transformer encoder layer that ignores
padding, masked mean pooling and a Linear head. Inputs are int64 token ids with
padding (id 0) at the end of some rows. build() makes a seeded model in eval mode;
make_inputs() makes seeded tokens.
"""

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class TextClassifierConfig:
    vocab_size: int = 500
    max_len: int = 64
    embed_dim: int = 32
    n_heads: int = 4
    ff_dim: int = 64
    kernel_size: int = 3
    n_classes: int = 5
    padding_idx: int = 0
    dropout: float = 0.1


class EncoderLayer(nn.Module):
    """Post-LayerNorm Transformer encoder layer with a key padding mask."""

    def __init__(self, config):
        super().__init__()
        self.n_heads = config.n_heads
        self.q = nn.Linear(config.embed_dim, config.embed_dim)
        self.k = nn.Linear(config.embed_dim, config.embed_dim)
        self.v = nn.Linear(config.embed_dim, config.embed_dim)
        self.o = nn.Linear(config.embed_dim, config.embed_dim)
        self.norm1 = nn.LayerNorm(config.embed_dim)
        self.ff = nn.Sequential(
            nn.Linear(config.embed_dim, config.ff_dim),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.ff_dim, config.embed_dim),
        )
        self.norm2 = nn.LayerNorm(config.embed_dim)
        self.dropout = nn.Dropout(config.dropout)

    def _split(self, t):
        batch, seq, dim = t.shape
        return t.reshape(batch, seq, self.n_heads, dim // self.n_heads).permute(0, 2, 1, 3)

    def forward(self, x, keep):
        # keep: (batch, seq) bool, True for real tokens.
        batch, seq, dim = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dim // self.n_heads)
        scores = scores.masked_fill(~keep[:, None, None, :], torch.finfo(scores.dtype).min)
        attended = torch.matmul(scores.softmax(dim=-1), v)
        attended = attended.permute(0, 2, 1, 3).reshape(batch, seq, dim)
        x = self.norm1(x + self.dropout(self.o(attended)))
        return self.norm2(x + self.dropout(self.ff(x)))


class TextClassifier(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.embed_dim,
                                  padding_idx=config.padding_idx)
        self.positions = nn.Parameter(torch.randn(config.max_len, config.embed_dim) * 0.02)
        self.conv = nn.Conv1d(config.embed_dim, config.embed_dim, config.kernel_size,
                              padding=config.kernel_size // 2)
        self.encoder = EncoderLayer(config)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.embed_dim, config.n_classes)

    def forward(self, tokens):
        keep = tokens != self.config.padding_idx
        x = self.embed(tokens) + self.positions[: tokens.shape[1]]
        x = x + F.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        x = self.encoder(x, keep)
        weights = keep.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.head(self.dropout(pooled))


def build(seed=0, config=None):
    """A TextClassifier in eval mode, its weights drawn from `seed`."""
    config = config or TextClassifierConfig()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TextClassifier(config).eval()


def make_inputs(batch, seed=0, seq=24, config=None):
    """(tokens,): int64 ids of shape (batch, seq); row i ends with 3*i padding ids
    (never the whole row)."""
    config = config or TextClassifierConfig()
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, config.vocab_size, (batch, seq), generator=generator)
    for row in range(batch):
        pad = min(3 * row, seq - 1)
        if pad:
            tokens[row, seq - pad:] = config.padding_idx
    return (tokens,)
