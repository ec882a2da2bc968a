"""Hugging Face configurations for the tracer (--hf NAME / --hf-config FILE):
memwall's built-in names, each the published config.json of its model, and
a user's own config.json, read and checked (Note [Unknown config fields]).
docs/trace.md ("Hugging Face models") explains every rule applied here.
Needs no torch; transformers only to check a user's fields."""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from memwall.errors import fail, first_line

# (key, hub id or config path, model_type, config fields): a resolved model.
Resolved = tuple[str, str, str, dict[str, Any]]

# ---------------------------------------------------------------------------
# Built-in configurations: the published config.json of each model, every
# field that changes a shape, a parameter count or what forward runs
# (token ids, architectures and transformers_version are left out).

_BUILTINS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json
    "llama2-7b": ("meta-llama/Llama-2-7b-hf", "llama", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-05, rope_scaling=None,
        tie_word_embeddings=False, pretraining_tp=1, initializer_range=0.02,
        bos_token_id=1, eos_token_id=2)),
    # https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
    "llama3-8b": ("meta-llama/Meta-Llama-3-8B", "llama", dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=8192, rms_norm_eps=1e-05, rope_theta=500000.0,
        rope_scaling=None, attention_bias=False, attention_dropout=0.0, mlp_bias=False,
        tie_word_embeddings=False, pretraining_tp=1, initializer_range=0.02,
        bos_token_id=128000, eos_token_id=128001)),
    # https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
    "llama3.1-70b": ("meta-llama/Llama-3.1-70B", "llama", dict(
        vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-05, rope_theta=500000.0,
        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        attention_bias=False, attention_dropout=0.0, mlp_bias=False,
        tie_word_embeddings=False, pretraining_tp=1, initializer_range=0.02,
        bos_token_id=128000, eos_token_id=128001)),
    # https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
    "mistral-7b": ("mistralai/Mistral-7B-v0.1", "mistral", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=32768, rms_norm_eps=1e-05, rope_theta=10000.0,
        sliding_window=4096, tie_word_embeddings=False, initializer_range=0.02,
        bos_token_id=1, eos_token_id=2)),
    # https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json
    "qwen2.5-7b": ("Qwen/Qwen2.5-7B", "qwen2", dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-06, rope_theta=1000000.0,
        use_sliding_window=False, sliding_window=131072, max_window_layers=28,
        attention_dropout=0.0, tie_word_embeddings=False, initializer_range=0.02,
        bos_token_id=151643, eos_token_id=151643)),
    # https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", "mixtral", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=32768, rms_norm_eps=1e-05, rope_theta=1000000.0,
        sliding_window=None, num_local_experts=8, num_experts_per_tok=2,
        router_aux_loss_coef=0.02, output_router_logits=False, attention_dropout=0.0,
        tie_word_embeddings=False, initializer_range=0.02, bos_token_id=1, eos_token_id=2)),
    # https://huggingface.co/google/gemma-2-9b/blob/main/config.json
    "gemma2-9b": ("google/gemma-2-9b", "gemma2", dict(
        vocab_size=256000, hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256,
        hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=8192, rms_norm_eps=1e-06, rope_theta=10000.0,
        query_pre_attn_scalar=256, sliding_window=4096, final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0, attention_bias=False, attention_dropout=0.0,
        initializer_range=0.02, bos_token_id=2, eos_token_id=1, pad_token_id=0)),
    # https://huggingface.co/openai-community/gpt2/blob/main/config.json
    "gpt2": ("openai-community/gpt2", "gpt2", dict(
        vocab_size=50257, n_positions=1024, n_ctx=1024, n_embd=768, n_layer=12, n_head=12,
        activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
        layer_norm_epsilon=1e-05, initializer_range=0.02, bos_token_id=50256,
        eos_token_id=50256)),
    # https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json
    "bert-base": ("google-bert/bert-base-uncased", "bert", dict(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
        layer_norm_eps=1e-12, initializer_range=0.02, pad_token_id=0,
        position_embedding_type="absolute")),
    # https://huggingface.co/google-t5/t5-base/blob/main/config.json
    "t5-base": ("google-t5/t5-base", "t5", dict(
        vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12,
        relative_attention_num_buckets=32, dropout_rate=0.1, layer_norm_epsilon=1e-06,
        feed_forward_proj="relu", initializer_factor=1.0, n_positions=512,
        is_encoder_decoder=True, decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)),
}

# memwall's names of the built-in configurations.
BUILTINS: list[str] = list(_BUILTINS)
_ALIASES = {hub.lower(): key for key, (hub, _, _) in _BUILTINS.items()}


def resolve(name: str | None, config_file: str | None) -> Resolved:
    """(key, hf_model, model_type, config fields) of a built-in name or hub
    id, or of the user's config.json."""
    if name is not None:
        key = name if name in _BUILTINS else _ALIASES.get(name.lower())
        if key is None:
            fail(f"unknown Hugging Face model '{name}' (known: {', '.join(BUILTINS)}, "
                 "or their hub ids; --hf-config FILE takes any config.json)")
        hub, model_type, cfg = _BUILTINS[key]
        return key, hub, model_type, dict(cfg)
    try:
        with open(config_file) as f:
            cfg = json.load(f)
    except OSError as e:
        fail(f"--hf-config {config_file}: cannot read it ({e.strerror})")
    except ValueError as e:
        fail(f"--hf-config {config_file}: not valid JSON ({first_line(e)})")
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model_type"), str):
        fail(f"--hf-config {config_file}: no \"model_type\" (a transformers config.json "
             "names its architecture there)")
    model_type = cfg.pop("model_type")
    # Fields of the file that are not the model's: they would only warn.
    for k in ("architectures", "transformers_version", "_name_or_path", "torch_dtype", "dtype"):
        cfg.pop(k, None)
    key = os.path.splitext(os.path.basename(config_file))[0]
    if key == "config":  # .../Llama-2-7b-hf/config.json: name it after its folder
        key = os.path.basename(os.path.dirname(os.path.abspath(config_file))) or key
    _note_unknown_fields(config_file, model_type, cfg)
    return key, config_file, model_type, cfg


# Note [Unknown config fields]
# transformers takes any keyword into a configuration: a field it does not
# know (a typo such as "hidden_sizee") is kept as an attribute that no
# model reads, and the model is built with the default it meant to change
# (issue 45: accepted silently). A field of the file is unknown when the
# configuration class neither takes it (its __init__'s parameters, its
# attribute_map's aliases, the fields of a default instance) nor converts
# it (rope_theta goes into rope_parameters) but keeps it as it was; each is
# named on stderr with the known field closest by edit distance. A note, not
# an error: a newer transformers' field is one an older one does not know.

def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def unknown_fields(model_type: str, cfg: dict[str, Any]) -> list[tuple[str, str | None]]:
    """[(field, closest known field or None)] of `cfg` that transformers'
    configuration class for `model_type` keeps without using."""
    import inspect
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    transformers.logging.set_verbosity_error()
    if model_type not in CONFIG_MAPPING:
        return []  # build_model says so
    cls = CONFIG_MAPPING[model_type]
    try:
        kept = cls(**cfg).to_dict()
        known = set(cls().to_dict()) | set(getattr(cls, "attribute_map", {}))
    except Exception:
        return []  # a bad value: build_model says which
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            known |= set(inspect.signature(init).parameters) - {"self", "kwargs"}
    unknown = []
    for field in cfg:
        if field in known or field not in kept:
            continue
        closest = min(known, key=lambda k: (_edit_distance(field, k), k))
        near = _edit_distance(field, closest) <= max(1, len(field) // 3)
        unknown.append((field, closest if near else None))
    return unknown


def _note_unknown_fields(config_file: str, model_type: str, cfg: dict[str, Any]) -> None:
    """Note [Unknown config fields]: one line per field on stderr."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    for field, closest in unknown_fields(model_type, cfg):
        cls = CONFIG_MAPPING[model_type].__name__
        hint = f" (did you mean '{closest}'?)" if closest else ""
        sys.stderr.write(f"memwall: note: --hf-config {config_file}: '{field}' is not a field of "
                         f"transformers' {cls}{hint}; it is kept and no model reads it\n")
