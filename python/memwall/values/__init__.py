"""The values of a trace on real tensors, for ``memwall run`` (Note [Run
inputs] in files.py): what the traced step starts from and what eager
PyTorch leaves after N steps (reference.py), on one rank or over N
data-parallel ranks (Note [Data-parallel reference] in reference.py)."""
