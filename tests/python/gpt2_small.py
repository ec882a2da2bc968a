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
#
# The model itself is memwall.sources.builtin.gpt
# (python/memwall/sources/builtin.py), part of the package memwall embeds
# and runs, which `memwall bench fidelity` runs small.
from memwall.sources.builtin import gpt

VOCAB, POSITIONS, LAYERS, HIDDEN, HEADS, DROPOUT = 50257, 1024, 12, 768, 12, 0.1


def build(batch=8, seq=1024):
    return gpt(vocab=VOCAB, positions=POSITIONS, layers=LAYERS, hidden=HIDDEN, heads=HEADS,
               batch=batch, seq=seq, dropout=DROPOUT)
