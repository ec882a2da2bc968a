"""Hugging Face models for the tracer (--hf NAME / --hf-config FILE): a
transformers model built from its configuration (hf_configs.py) on the meta
device (no weights, no network), its batch, an optional LoRA (peft's
LoraConfig semantics, written here: peft is not a dependency) and the
optimizer, fp32 or mixed precision. docs/trace.md ("Hugging Face models")
explains every rule applied here."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

from memwall.errors import fail, first_line
from memwall.mixed_precision import MixedPrecision
from memwall.sources import Build, Built
from memwall.sources.optimizers import make_optimizer

_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16,
                                   "fp16": torch.float16}


def _model_class(model_type: str, config: Any) -> Any:
    import transformers
    if model_type == "bert":
        return transformers.BertForPreTraining  # memwall's zoo bert-base: MLM + NSP
    if getattr(config, "is_encoder_decoder", False):
        return transformers.AutoModelForSeq2SeqLM
    return transformers.AutoModelForCausalLM


def _max_positions(model_type: str, config: Any) -> int | None:
    # T5's relative position buckets take any length: no limit to check.
    if model_type == "t5":
        return None
    for field in ("max_position_embeddings", "n_positions"):
        value = getattr(config, field, None)
        if isinstance(value, int):
            return value
    return None


def build_model(source: str, model_type: str, cfg: dict[str, Any], dtype: str,
                seq: int) -> torch.nn.Module:
    """The model built from its configuration (called on the meta device)."""
    import transformers
    transformers.logging.set_verbosity_error()  # notices about defaults, not errors
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    if model_type not in CONFIG_MAPPING:  # for_model's error lists every known type
        fail(f"{source}: unknown model_type '{model_type}' (not one of transformers "
             f"{transformers.__version__}'s configurations)")
    try:
        config = transformers.AutoConfig.for_model(model_type, **cfg)
    except Exception as e:
        # transformers' validators say why on the lines after the first
        why = " ".join(str(e).split())[:300]
        fail(f"{source}: bad configuration: {type(e).__name__}: {why}")
    config.use_cache = False  # training: no KV cache
    limit = _max_positions(model_type, config)
    if limit is not None and seq > limit:
        fail(f"{source}: --seq {seq} is longer than the model's {limit} positions")
    cls = _model_class(model_type, config)
    # The Auto classes build with from_config, the model classes with
    # _from_config (what from_pretrained calls, minus the weights).
    make = cls.from_config if cls.__name__.startswith("Auto") else cls._from_config
    try:
        model = make(config, dtype=_DTYPES[dtype])
    except Exception as e:
        fail(f"{source}: transformers cannot build a {cls.__name__} for model_type "
             f"'{model_type}': {type(e).__name__}: {first_line(e)}")
    # As from_pretrained(dtype=...) leaves it: a model may keep some modules
    # in fp32 (T5's _keep_in_fp32_modules, its feed-forward output "wo").
    return model


def make_batch(model_type: str, config: Any, batch: int, seq: int) -> dict[str, Any]:
    """(inputs as keyword arguments, target None): the loss is the model's
    own (labels given), so the trace has what transformers runs."""
    vocab = config.vocab_size
    ids = torch.randint(0, vocab, (batch, seq))
    if model_type == "bert":
        # Like memwall's zoo bert-base: MLM labels at every position, NSP labels.
        return dict(input_ids=ids, token_type_ids=torch.zeros(batch, seq, dtype=torch.long),
                    labels=torch.randint(0, vocab, (batch, seq)),
                    next_sentence_label=torch.randint(0, 2, (batch,)))
    if getattr(config, "is_encoder_decoder", False):
        # The decoder's inputs are the labels shifted right, length seq.
        return dict(input_ids=ids, labels=torch.randint(0, vocab, (batch, seq)),
                    use_cache=False)
    return dict(input_ids=ids, labels=ids, use_cache=False)


def hf_loss(output: Any) -> torch.Tensor:
    """The loss the model computed from its labels."""
    return output.loss


hf_loss.whole_output = True  # type: ignore[attr-defined]  # step.loss_of: the whole output


# ---------------------------------------------------------------------------
# LoRA (peft's LoraConfig semantics: r, lora_alpha, target_modules,
# lora_dropout 0, no bias, adapters on every match, the base frozen)

_LLAMA_LIKE: dict[str, str] = {s: fr"\.{s}_proj$"
                               for s in ("q", "k", "v", "o", "gate", "up", "down")}
_TARGETS: dict[str, dict[str, str]] = {
    "llama": _LLAMA_LIKE, "mistral": _LLAMA_LIKE, "qwen2": _LLAMA_LIKE, "gemma2": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    # Mixtral's experts are two 3-D parameters per layer (gate_up_proj,
    # down_proj), not Linear modules: peft's target_modules cannot reach them
    # either, so only the attention projections are targets.
    "mixtral": {s: fr"\.{s}_proj$" for s in ("q", "k", "v", "o")},
    # GPT-2's q, k and v are one fused Conv1D: any of them selects it.
    "gpt2": {"q": r"\.attn\.c_attn$", "k": r"\.attn\.c_attn$", "v": r"\.attn\.c_attn$",
             "o": r"\.attn\.c_proj$", "up": r"\.mlp\.c_fc$", "down": r"\.mlp\.c_proj$"},
    "bert": {"q": r"\.attention\.self\.query$", "k": r"\.attention\.self\.key$",
             "v": r"\.attention\.self\.value$", "o": r"\.attention\.output\.dense$",
             "up": r"\.intermediate\.dense$", "down": r"\.layer\.\d+\.output\.dense$"},
    "t5": {"q": r"\.(SelfAttention|EncDecAttention)\.q$",
           "k": r"\.(SelfAttention|EncDecAttention)\.k$",
           "v": r"\.(SelfAttention|EncDecAttention)\.v$",
           "o": r"\.(SelfAttention|EncDecAttention)\.o$",
           "up": r"\.DenseReluDense\.wi(_0|_1)?$", "down": r"\.DenseReluDense\.wo$"},
}


def _linear_shape(module: torch.nn.Module) -> tuple[int, int] | None:
    """(in, out) of an nn.Linear or a GPT-2 Conv1D, else None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D" and hasattr(module, "nf"):
        return module.weight.shape[0], module.nf  # weight [in, out]
    return None


class LoraLayer(torch.nn.Module):
    """y = base(x) + lora_B(lora_A(dropout(x))) * alpha / r, the base frozen."""

    def __init__(self, base: torch.nn.Module, r: int, alpha: float, dropout: float) -> None:
        super().__init__()
        fan_in, fan_out = _linear_shape(base)
        dtype = base.weight.dtype
        self.base_layer = base
        self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
        self.lora_A = torch.nn.Linear(fan_in, r, bias=False, dtype=dtype)
        self.lora_B = torch.nn.Linear(r, fan_out, bias=False, dtype=dtype)
        torch.nn.init.zeros_(self.lora_B.weight)  # peft's start: the adapter adds nothing
        self.scaling = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling


def apply_lora(model: torch.nn.Module, model_type: str, r: int, alpha: float, targets: str,
               dropout: float = 0.0) -> list[str]:
    """Wraps the targeted layers and freezes everything else; returns the
    names of the wrapped modules."""
    if r <= 0:
        fail("--lora takes a positive rank")
    names = [t.strip() for t in targets.split(",") if t.strip()]
    if not names:
        fail("--lora-targets is empty")
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if names == ["all-linear"]:
        # peft's all-linear: every Linear/Conv1D except the output layer.
        def chosen(n: str, m: torch.nn.Module) -> bool:
            return m is not output
    else:
        table = _TARGETS.get(model_type)
        if table is None:
            fail(f"LoRA target names are known for {', '.join(sorted(_TARGETS))}; "
                 f"use --lora-targets all-linear for model_type '{model_type}'")
        unknown = [n for n in names if n not in table]
        if model_type == "mixtral" and unknown and unknown[0] in _LLAMA_LIKE:
            fail(f"LoRA target '{unknown[0]}': Mixtral's experts are 3-D parameters "
                 "(gate_up_proj, down_proj), not Linear layers; targets: q, k, v, o, all-linear")
        if unknown:
            fail(f"unknown LoRA target '{unknown[0]}' for {model_type} (known: "
                 f"{', '.join(table)}, or all-linear)")
        pattern = re.compile("|".join(f"(?:{table[n]})" for n in names))
        def chosen(n: str, m: torch.nn.Module) -> bool:
            return pattern.search("." + n) is not None
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = []
    for name, module in list(model.named_modules()):
        if not name or _linear_shape(module) is None or not chosen(name, module):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoraLayer(module, r, alpha, dropout))
        wrapped.append(name)
    if not wrapped:
        fail(f"--lora-targets {targets} matches no layer of this {model_type} model")
    return wrapped


# ---------------------------------------------------------------------------
# Mixed precision (Micikevicius et al. 2018; ZeRO's model states): 16-bit
# parameters, activations and gradients; the optimizer keeps an fp32 master
# copy of each parameter beside its fp32 states.


def mixed_precision(params: list[torch.nn.Parameter], kind: str) -> MixedPrecision:
    """memwall.MixedPrecision (Note [Mixed-precision steps]) with
    optimizers.make_optimizer's hyperparameters for `kind` (sgd, momentum,
    adam, adamw)."""
    if kind not in ("sgd", "momentum", "adam", "adamw"):
        fail(f"unknown optimizer '{kind}' (known: sgd, momentum, adam, adamw)")
    plain_sgd = kind in ("sgd", "momentum")
    return MixedPrecision(params, "sgd" if plain_sgd else kind, lr=0.1 if plain_sgd else 1e-3,
                          weight_decay=1e-2 if kind == "adamw" else 0.0,
                          momentum=0.9 if kind == "momentum" else 0.0)


# ---------------------------------------------------------------------------
# The build for tracer.trace.run_one


@dataclass
class Lora:
    """--lora RANK, --lora-alpha ALPHA, --lora-targets TARGETS."""
    rank: int
    alpha: float
    targets: str


def builder(source: str, model_type: str, cfg: dict[str, Any], batch: int, seq: int, dtype: str,
            optimizer: str, lora: Lora | None = None,
            info: dict[str, Any] | None = None) -> Build:
    """A function returning (model, batch, loss_fn, optimizer) for run_one:
    the model `source` (hf_configs.resolve's result), `batch` sequences of
    `seq` tokens, in `dtype` (fp32, or bf16/fp16 mixed precision), trained
    by `optimizer` (fp32: torch's own, optimizers.make_optimizer). Fills
    `info` with what the graph's meta records beyond run_one's."""
    if dtype not in _DTYPES:
        fail(f"unknown --dtype '{dtype}' (known: fp32, bf16, fp16)")
    if seq <= 0:
        fail("--seq must be positive")

    def build() -> Built:
        model = build_model(source, model_type, cfg, dtype, seq)
        if lora is not None:
            r, alpha, targets = lora.rank, lora.alpha, lora.targets
            alpha = int(alpha) if float(alpha).is_integer() else alpha
            wrapped = apply_lora(model, model_type, r, alpha, targets)
            if info is not None:
                info.update(lora_rank=r, lora_alpha=alpha, lora_targets=targets,
                            lora_modules=len(wrapped))
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt: torch.optim.Optimizer
        if dtype == "fp32":
            opt = make_optimizer(optimizer, trainable)
        else:
            opt = mixed_precision(trainable, optimizer)
        if info is not None:
            info["trainable_param_count"] = sum(p.numel() for p in {id(p): p for p in
                                                                     trainable}.values())
            info["attn_implementation"] = model.config._attn_implementation
            experts = getattr(model.config, "_experts_implementation", None)
            if getattr(model.config, "num_local_experts", None) and experts:
                info["experts_implementation"] = experts
        return Built(model, (make_batch(model_type, model.config, batch, seq), None), hf_loss,
                     opt)

    return build
