# Checks memwall's built-in Hugging Face configurations
# (python/memwall/sources/hf_configs.py) and LoRA against the published
# figures: every model's parameter count (built on the meta device, no
# weights, no network) and peft's print_trainable_parameters() for
# Llama-2-7B's adapters. Prints one line per check; exit 1 on a mismatch.
#
#   python tests/python/hf_counts.py        (about a minute on meta)
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from memwall.sources.hf import Lora, builder  # noqa: E402
from memwall.sources.hf_configs import resolve  # noqa: E402
from memwall.tracer.graph_writer import unique_params  # noqa: E402
from memwall.tracer.meta_device import MetaDeviceMode  # noqa: E402

# Published parameter counts. The seven recent checkpoints: the Hugging
# Face Hub's safetensors metadata of each repository (the count the Hub
# shows on the model page and returns from
# https://huggingface.co/api/models/<hub id>?expand=safetensors, e.g.
# meta-llama/Llama-2-7b-hf, meta-llama/Meta-Llama-3-8B,
# meta-llama/Llama-3.1-70B, mistralai/Mistral-7B-v0.1, Qwen/Qwen2.5-7B,
# mistralai/Mixtral-8x7B-v0.1, google/gemma-2-9b). GPT-2, BERT-base and
# T5-base: transformers' num_parameters() of openai-community/gpt2
# (124,439,808, tied head), google-bert/bert-base-uncased as
# BertForPreTraining (110,106,428; BertModel alone 109,482,240) and
# google-t5/t5-base (222,903,552, the shared embedding once), the counts
# memwall's zoo cites in tests/models/transformer_test.cc for the first two.
PARAMS = {
    "llama2-7b": 6_738_415_616, "llama3-8b": 8_030_261_248, "llama3.1-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096, "qwen2.5-7b": 7_615_616_512, "mixtral-8x7b": 46_702_792_704,
    "gemma2-9b": 9_241_705_984, "gpt2": 124_439_808, "bert-base": 110_106_428,
    "t5-base": 222_903_552,
}
# peft's print_trainable_parameters() for Llama-2-7B (tests/models/
# lora_test.cc derives them and cites the printed q,v r=8 line).
LORA = [(8, "q,v", 4_194_304), (64, "q,v", 33_554_432),
        (8, "q,k,v,o,gate,up,down", 19_988_480), (64, "q,k,v,o,gate,up,down", 159_907_840),
        (8, "all-linear", 19_988_480)]


def counts(name, lora=None):
    key, _, model_type, cfg = resolve(name, None)
    info = {}
    build = builder(key, model_type, cfg, 1, 128, "bf16", "adamw", lora, info)
    with MetaDeviceMode(building=True):
        model, _, _, _ = build()
    total = sum(p.numel() for p in unique_params(model))
    return total, info["trainable_param_count"]


def main():
    bad = 0
    for name, want in PARAMS.items():
        got, _ = counts(name)
        bad += got != want
        print(f"{name:14s} {got:>16,d} {'ok' if got == want else f'MISMATCH (want {want:,d})'}")
    for r, targets, want in LORA:
        _, got = counts("llama2-7b", Lora(r, 8, targets))
        bad += got != want
        print(f"llama2-7b lora r={r} {targets}: {got:,d} "
              f"{'ok' if got == want else f'MISMATCH (want {want:,d})'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
