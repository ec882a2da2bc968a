# A GPT-2-small-shaped model in plain torch, written to match memwall's zoo
# builder gpt2-small (src/models/gpt2.cc) so that the traced graph and the
# zoo graph can be compared (tests/importers/cross_validation_test.cc):
# learned token and position embeddings, 12 pre-LN blocks with a fused QKV
# projection (with bias), plain (not flash) causal attention with dropout on
# the probabilities, GELU MLP of width 4h, dropout 0.1 on the embeddings and
# both residual branches, final LayerNorm and an LM head tied to the token
# embedding; cross-entropy over all b*s positions; Adam in fp32.
#
#   memwall trace --script tests/python/gpt2_small.py:build --out gpt2.json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, POSITIONS, LAYERS, HIDDEN, HEADS, DROPOUT = 50257, 1024, 12, 768, 12, 0.1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc_proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // HEADS
        q, k, v = self.qkv(self.ln_1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, HEADS, d).transpose(1, 2) for t in (q, k, v))
        # Scale and mask before the softmax: the scores are transient, the
        # softmax output (and its dropout) is what backward keeps.
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d)) + mask
        probs = F.dropout(F.softmax(scores, dim=-1), DROPOUT, self.training)
        a = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        x = x + F.dropout(self.proj(a), DROPOUT, self.training)
        m = self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x + F.dropout(m, DROPOUT, self.training)


class Gpt2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(POSITIONS, HIDDEN)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, ids, positions):
        s = ids.shape[1]
        x = F.dropout(self.wte(ids) + self.wpe(positions), DROPOUT, self.training)
        # One additive causal mask shared by every layer (no gradient).
        mask = torch.full((s, s), float("-inf")).triu(1)
        for block in self.h:
            x = block(x, mask)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied LM head


def build(batch=8, seq=1024):
    model = Gpt2()
    ids = torch.randint(0, VOCAB, (batch, seq))
    positions = torch.arange(seq)
    labels = torch.randint(0, VOCAB, (batch, seq))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.view(-1, VOCAB), target.view(-1))

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    return model, ((ids, positions), labels), loss_fn, optimizer
