# memwall's Hugging Face models for the PyTorch tracer (memwall_trace.py
# --hf / --hf-config): a transformers model built from its configuration on
# the meta device (no weights, no network), its batch, an optional LoRA
# (peft's LoraConfig semantics, written here: peft is not a dependency) and
# the optimizer, fp32 or mixed precision. docs/trace.md ("Hugging Face
# models") explains every rule applied here.
import json
import os
import sys

import torch


class HfError(Exception):
    """Bad input: memwall_trace.py reports it as its one error line."""


def fail(message):
    raise HfError(message)


def _first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__

# ---------------------------------------------------------------------------
# Built-in configurations: the published config.json of each model, every
# field that changes a shape, a parameter count or what forward runs
# (token ids, architectures and transformers_version are left out).

_BUILTINS = {
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

BUILTINS = list(_BUILTINS)
_ALIASES = {hub.lower(): key for key, (hub, _, _) in _BUILTINS.items()}


def resolve(name, config_file):
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
        fail(f"--hf-config {config_file}: not valid JSON ({_first_line(e)})")
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

def _edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def unknown_fields(model_type, cfg):
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


def _note_unknown_fields(config_file, model_type, cfg):
    """Note [Unknown config fields]: one line per field on stderr."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    for field, closest in unknown_fields(model_type, cfg):
        cls = CONFIG_MAPPING[model_type].__name__
        hint = f" (did you mean '{closest}'?)" if closest else ""
        sys.stderr.write(f"memwall: note: --hf-config {config_file}: '{field}' is not a field of "
                         f"transformers' {cls}{hint}; it is kept and no model reads it\n")


# ---------------------------------------------------------------------------
# Building

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _model_class(model_type, config):
    import transformers
    if model_type == "bert":
        return transformers.BertForPreTraining  # memwall's zoo bert-base: MLM + NSP
    if getattr(config, "is_encoder_decoder", False):
        return transformers.AutoModelForSeq2SeqLM
    return transformers.AutoModelForCausalLM


def _max_positions(model_type, config):
    # T5's relative position buckets take any length: no limit to check.
    if model_type == "t5":
        return None
    for field in ("max_position_embeddings", "n_positions"):
        value = getattr(config, field, None)
        if isinstance(value, int):
            return value
    return None


def build_model(source, model_type, cfg, dtype, seq):
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
             f"'{model_type}': {type(e).__name__}: {_first_line(e)}")
    # As from_pretrained(dtype=...) leaves it: a model may keep some modules
    # in fp32 (T5's _keep_in_fp32_modules, its feed-forward output "wo").
    return model


def make_batch(model_type, config, batch, seq):
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


def hf_loss(output):
    """The loss the model computed from its labels."""
    return output.loss


hf_loss.whole_output = True  # memwall_trace._loss_of: pass the output, not its logits


# ---------------------------------------------------------------------------
# LoRA (peft's LoraConfig semantics: r, lora_alpha, target_modules,
# lora_dropout 0, no bias, adapters on every match, the base frozen)

_LLAMA_LIKE = {s: fr"\.{s}_proj$" for s in ("q", "k", "v", "o", "gate", "up", "down")}
_TARGETS = {
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


def _linear_shape(module):
    """(in, out) of an nn.Linear or a GPT-2 Conv1D, else None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D" and hasattr(module, "nf"):
        return module.weight.shape[0], module.nf  # weight [in, out]
    return None


class LoraLayer(torch.nn.Module):
    """y = base(x) + lora_B(lora_A(dropout(x))) * alpha / r, the base frozen."""

    def __init__(self, base, r, alpha, dropout):
        super().__init__()
        fan_in, fan_out = _linear_shape(base)
        dtype = base.weight.dtype
        self.base_layer = base
        self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
        self.lora_A = torch.nn.Linear(fan_in, r, bias=False, dtype=dtype)
        self.lora_B = torch.nn.Linear(r, fan_out, bias=False, dtype=dtype)
        torch.nn.init.zeros_(self.lora_B.weight)  # peft's start: the adapter adds nothing
        self.scaling = alpha / r

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling


def apply_lora(model, model_type, r, alpha, targets, dropout=0.0):
    """Wraps the targeted layers and freezes everything else; returns the
    names of the wrapped modules."""
    import re
    if r <= 0:
        fail("--lora takes a positive rank")
    names = [t.strip() for t in targets.split(",") if t.strip()]
    if not names:
        fail("--lora-targets is empty")
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if names == ["all-linear"]:
        # peft's all-linear: every Linear/Conv1D except the output layer.
        chosen = lambda n, m: m is not output  # noqa: E731
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
        chosen = lambda n, m: pattern.search("." + n) is not None  # noqa: E731
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


class MixedPrecision(torch.optim.Optimizer):
    """Per parameter: upcast the 16-bit gradient, update the fp32 master with
    torch's own single-tensor Adam/AdamW/SGD (torch.optim.adam.adam,
    torch.optim.sgd.sgd, foreach=False), copy the master back into the
    16-bit parameter. One parameter's ops are consecutive, read one gradient
    and update that parameter and its states: memwall plan recognises the
    run as the parameter's step (docs/planner.md, "Traced graphs"). State
    "master" is an optim_state like the moments."""

    def __init__(self, params, kind):
        if kind not in ("sgd", "momentum", "adam", "adamw"):
            fail(f"unknown optimizer '{kind}' (known: sgd, momentum, adam, adamw)")
        # The same hyperparameters as memwall_trace.make_optimizer.
        lr = 0.1 if kind in ("sgd", "momentum") else 1e-3
        defaults = dict(lr=lr, weight_decay=1e-2 if kind == "adamw" else 0.0)
        super().__init__(params, defaults)
        self.kind = kind

    def _state(self, p):
        state = self.state[p]
        if not state:
            # A parameter the model keeps in fp32 is its own master.
            if p.dtype != torch.float32:
                state["master"] = p.detach().clone(memory_format=torch.preserve_format).float()
            if self.kind in ("adam", "adamw"):
                # torch.optim.Adam's: a 0-d fp32 step counter and two moments.
                master = state.get("master", p)
                state["step"] = torch.zeros((), dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(master, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(master,
                                                       memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure=None):
        from torch.optim.adam import adam
        from torch.optim.sgd import sgd
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._state(p)
                master = state.get("master", p)
                grad = p.grad.float()  # the gradient itself when it is fp32
                if self.kind in ("adam", "adamw"):
                    adam([master], [grad], [state["exp_avg"]], [state["exp_avg_sq"]], [],
                         [state["step"]], foreach=False, capturable=False,
                         differentiable=False, fused=None, grad_scale=None, found_inf=None,
                         has_complex=False, decoupled_weight_decay=self.kind == "adamw",
                         amsgrad=False, beta1=0.9, beta2=0.999, lr=group["lr"],
                         weight_decay=group["weight_decay"], eps=1e-8, maximize=False)
                else:
                    momentum = 0.9 if self.kind == "momentum" else 0.0
                    buffers = [state.get("momentum_buffer")]
                    sgd([master], [grad], buffers, foreach=False, fused=None,
                        weight_decay=0.0, momentum=momentum, lr=group["lr"], dampening=0.0,
                        nesterov=False, maximize=False)
                    if momentum:
                        state["momentum_buffer"] = buffers[0]
                del grad
                if master is not p:
                    p.copy_(master)


# ---------------------------------------------------------------------------
# The build for memwall_trace.run_one


def builder(source, model_type, cfg, batch, seq, dtype, optimizer, make_optimizer, lora=None,
            info=None):
    """A function returning (model, batch, loss_fn, optimizer) for run_one;
    `make_optimizer(name, params)` makes the fp32 optimizers (memwall_trace's,
    torch's own); fills `info` with what the graph's meta records beyond
    run_one's."""
    if dtype not in _DTYPES:
        fail(f"unknown --dtype '{dtype}' (known: fp32, bf16, fp16)")
    if seq <= 0:
        fail("--seq must be positive")

    def build():
        model = build_model(source, model_type, cfg, dtype, seq)
        if lora is not None:
            r, alpha, targets = lora
            alpha = int(alpha) if float(alpha).is_integer() else alpha
            wrapped = apply_lora(model, model_type, r, alpha, targets)
            if info is not None:
                info.update(lora_rank=r, lora_alpha=alpha, lora_targets=targets,
                            lora_modules=len(wrapped))
        trainable = [p for p in model.parameters() if p.requires_grad]
        if dtype == "fp32":
            opt = make_optimizer(optimizer, trainable)
        else:
            opt = MixedPrecision(trainable, optimizer)
        if info is not None:
            info["trainable_param_count"] = sum(p.numel() for p in {id(p): p for p in
                                                                     trainable}.values())
            info["attn_implementation"] = model.config._attn_implementation
            experts = getattr(model.config, "_experts_implementation", None)
            if getattr(model.config, "num_local_experts", None) and experts:
                info["experts_implementation"] = experts
        return model, (make_batch(model_type, model.config, batch, seq), None), hf_loss, opt

    return build
