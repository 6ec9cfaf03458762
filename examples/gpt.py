"""A small GPT-style decoder and the character tokenizer of the bundled corpus.

The model is the classic pre-norm decoder: token and position embeddings,
blocks of causal self-attention (F.scaled_dot_product_attention) and a GELU
MLP, each behind a LayerNorm and a residual connection, a final LayerNorm and
a head that shares its weight with the token embedding. Nothing in it names
a device: the demo, the tests and the benchmark build it on the CPU and move
it with .to("neuron").
"""

import dataclasses
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.txt")


class CharTokenizer:
    """One token per character of the corpus's alphabet (72 symbols for the
    bundled text), ordered by code point so that ids do not depend on where
    a character first appears."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        try:
            return torch.tensor([self.index[c] for c in text], dtype=torch.long)
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tokenizer's alphabet") from None

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids.tolist())


def load_corpus(path: str = CORPUS):
    """(tokenizer, token ids of the whole corpus) for the text at path."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tok = CharTokenizer(text)
    return tok, tok.encode(text)


def batches(data: torch.Tensor, batch_size: int, block_size: int, steps: int, seed: int = 0):
    """`steps` (input, target) pairs of [batch_size, block_size] windows at
    random offsets, drawn up front from a seeded CPU generator so that every
    device sees exactly the same batches."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(len(data) - block_size - 1, (steps, batch_size), generator=g)
    offsets = torch.arange(block_size + 1)
    windows = data[starts.unsqueeze(-1) + offsets]  # [steps, batch, block + 1]
    return [(w[:, :-1].contiguous(), w[:, 1:].contiguous()) for w in windows]


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 72
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # [b, t, c] -> [b, heads, t, head_dim]: strided views, no copies
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.resid_drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.drop(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied
        self.apply(self._init_weights)
        # GPT-2's scaling of the residual projections by 1/sqrt(2 * layers)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        b, t = idx.shape
        if t > self.cfg.block_size:
            raise ValueError(f"sequence of {t} tokens is longer than block_size {self.cfg.block_size}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        # The loss in float32 under autocast: CUDA's (and neuron's) autocast
        # lists leave cross_entropy in the logits' dtype, so its log_softmax
        # would round every log-probability to bfloat16 (CPU autocast
        # upcasts; this makes both devices compute the same thing).
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))
        return logits, loss

    def configure_optimizer(self, lr: float, weight_decay: float = 0.1, fused: bool = True):
        """AdamW (fused: one kernel per parameter on neuron) with weight
        decay on the matrices and embeddings, not on biases or LayerNorm."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=fused)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 0.8,
                 top_k: int = None, generator: torch.Generator = None):
        """Appends max_new_tokens sampled tokens to idx ([b, t] ids)."""
        for _ in range(max_new_tokens):
            ctx = idx[:, -self.cfg.block_size:]
            logits, _ = self(ctx)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            probs = F.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx
