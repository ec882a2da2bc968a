# A Llama-2-7B-shaped decoder in plain torch (32 layers, hidden 4096, 32
# heads, SwiGLU 11008, vocab 32000, RMSNorm, rotary embeddings, untied LM
# head, no biases, no dropout): 6,738,415,616 parameters, as memwall's zoo
# model llama2-7b and Meta's release. Used by bench/trace.sh to time tracing
# a 7B model on the meta device (no weights are allocated).
#
#   memwall trace --script tests/python/llama7b.py:build --out llama.json
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, LAYERS, HIDDEN, HEADS, FFN, EPS = 32000, 32, 4096, 32, 11008, 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(HIDDEN)
        self.wq = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wk = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wv = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wo = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.ffn_norm = RMSNorm(HIDDEN)
        self.w1 = nn.Linear(HIDDEN, FFN, bias=False)
        self.w3 = nn.Linear(HIDDEN, FFN, bias=False)
        self.w2 = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        d = h // HEADS
        a = self.attention_norm(x)
        q, k, v = (w(a).view(b, s, HEADS, d).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-1, -2)) * d ** -0.5 + mask
        a = torch.matmul(F.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, h)
        x = x + self.wo(a)
        m = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(m)) * self.w3(m))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.output = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        s = ids.shape[1]
        d = HIDDEN // HEADS
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(s).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        mask = torch.full((s, s), float("-inf")).triu(1)
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


def build(batch=1, seq=4096):
    model = Llama()
    ids = torch.randint(0, VOCAB, (batch, seq))
    labels = torch.randint(0, VOCAB, (batch, seq))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.view(-1, VOCAB), target.view(-1))

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=False)
    return model, (ids, labels), loss_fn, optimizer
