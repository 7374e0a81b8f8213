"""A GPT-2-style Transformer block in plain PyTorch, and a tiny GPT-2 made of them.

The block: pre-LayerNorm causal self-attention (one Linear for q, k and v, split,
heads by view/transpose, `q @ k.transpose(-2, -1) * scale`, a causal mask kept as a
registered `torch.tril` buffer and applied with masked_fill, softmax, dropout, output
projection) and a GELU MLP, each with a residual connection. Sizes come from
GPT2Config. build_block/build_tiny_gpt2 make seeded modules in eval mode;
block_inputs/gpt2_inputs make seeded inputs.
"""

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class GPT2Config:
    """Sizes of the block and of the tiny model."""

    block_size: int = 32  # the longest sequence the causal mask covers
    vocab_size: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.1
    bias: bool = True
    layer_norm_eps: float = 1e-5


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions <= t."""

    def __init__(self, config):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError("n_embd must be a multiple of n_head")
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        size = config.block_size
        mask = torch.tril(torch.ones(size, size)).view(1, 1, size, size)
        self.register_buffer("causal_mask", mask)

    def _heads(self, t, batch, seq):
        # (batch, seq, n_embd) -> (batch, n_head, seq, head_dim)
        return t.view(batch, seq, self.n_head, self.n_embd // self.n_head).transpose(1, 2)

    def forward(self, x):
        batch, seq, width = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        q, k, v = (self._heads(t, batch, seq) for t in (q, k, v))
        scale = 1.0 / math.sqrt(k.size(-1))
        scores = q @ k.transpose(-2, -1) * scale
        scores = scores.masked_fill(self.causal_mask[:, :, :seq, :seq] == 0, float("-inf"))
        weights = self.attn_dropout(F.softmax(scores, dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(batch, seq, width)
        return self.resid_dropout(self.out_proj(y))


class MLP(nn.Module):
    """Linear, GELU (tanh approximation, as GPT-2), Linear, dropout."""

    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.act = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    """x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class TinyGPT2(nn.Module):
    """Token and position embeddings, config.n_layer blocks, final LayerNorm and a
    language-model head tied to the token embedding."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens):
        seq = tokens.size(1)
        if seq > self.config.block_size:
            raise ValueError(f"sequence of {seq} tokens is longer than {self.config.block_size}")
        positions = torch.arange(0, seq, dtype=torch.long, device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(positions))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def _seeded(factory, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory().eval()


def build_block(seed=0, config=None):
    """A Block in eval mode, its weights drawn from `seed`."""
    config = config or GPT2Config()
    return _seeded(lambda: Block(config), seed)


def build_tiny_gpt2(seed=0, config=None):
    """A TinyGPT2 in eval mode, its weights drawn from `seed`."""
    config = config or GPT2Config()
    return _seeded(lambda: TinyGPT2(config), seed)


def block_inputs(batch, seed=0, seq=16, config=None):
    """(x,) with x of shape (batch, seq, n_embd)."""
    config = config or GPT2Config()
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, seq, config.n_embd, generator=generator),)


def gpt2_inputs(batch, seed=0, seq=16, config=None):
    """(tokens,) with tokens of shape (batch, seq), int64 in [0, vocab_size)."""
    config = config or GPT2Config()
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(0, config.vocab_size, (batch, seq), generator=generator),)
