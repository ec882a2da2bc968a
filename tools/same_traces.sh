#!/usr/bin/env bash
# Whether two memwall binaries trace the same: `memwall trace` of a fixed set
# of models (scripts of tests/python, torchvision's ResNet-18, MobileNetV2 and
# ConvNeXt-Tiny at a small batch and image, Hugging Face configurations: a
# two-layer GPT-2 with LoRA, a two-layer Qwen2 in bf16, a two-layer Mixtral,
# the built-in gpt2) on CUDA's and on the CPU's kernels, and the values
# `memwall run --keep-values` keeps (the step's starting bytes, eager's
# results and the graph traced on real tensors) for four models. Every file
# must be byte for byte the same (cmp).
#
#   tools/same_traces.sh OLD_BIN NEW_BIN [WORK_DIR]
#
# OLD_BIN `-` reuses the old side's files of an earlier run in WORK_DIR.
#
# Each binary runs the tracer it embeds, with memwall's Python environment
# (scripts/install-deps.sh --torch). The model scripts are read from this
# checkout's tests/python, copied to one path both binaries use (a trace
# records its script's path). Prints one line per case and a summary; exits
# 1 if any file differs or a case fails. Written for issue 46 (the tracer
# became the package python/memwall).
set -uo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 OLD_BIN NEW_BIN [WORK_DIR]" >&2
  exit 2
fi
old=-
[[ $1 != - ]] && old=$(realpath "$1")
new=$(realpath "$2")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${3:-$(mktemp -d /tmp/same-traces.XXXXXX)}
if [[ $old == - && ! -d $work/old ]]; then
  echo "$0: OLD_BIN - needs a WORK_DIR with an earlier run's old files" >&2
  exit 2
fi
mkdir -p "$work/models"
cp "$root"/tests/python/{tiny_cnn,lstm_like,dropout_mlp,freeing_sgd}.py "$work/models/"
m=$work/models

cat >"$m/gpt2_lora.json" <<'JSON'
{"model_type": "gpt2", "vocab_size": 1000, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 4}
JSON
cat >"$m/qwen2.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128}
JSON
cat >"$m/mixtral.json" <<'JSON'
{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
 "num_local_experts": 4, "num_experts_per_tok": 2}
JSON

# name|arguments of `memwall trace` (without --out)
traces=(
  "tiny_cnn|--script $m/tiny_cnn.py:build"
  "tiny_cnn_sgd|--script $m/tiny_cnn.py:build_sgd"
  "tiny_cnn_foreach|--script $m/tiny_cnn.py:build_foreach"
  "tiny_cnn_cpu2|--script $m/tiny_cnn.py:build --kernels cpu --threads 2"
  "lstm_like|--script $m/lstm_like.py:build"
  "dropout_mlp|--script $m/dropout_mlp.py:build"
  "dropout_mlp_cpu|--script $m/dropout_mlp.py:build --kernels cpu --threads 1"
  "freeing_sgd|--script $m/freeing_sgd.py:build"
  "resnet18|--torchvision resnet18 --batch 2 --image 64"
  "resnet18_cpu2|--torchvision resnet18 --batch 2 --image 64 --kernels cpu --threads 2"
  "mobilenet_v2_cpu1|--torchvision mobilenet_v2 --batch 2 --image 64 --kernels cpu --threads 1 --optimizer momentum"
  "convnext_tiny_cpu2|--torchvision convnext_tiny --batch 2 --image 64 --kernels cpu --threads 2 --optimizer sgd"
  "hf_gpt2_lora|--hf-config $m/gpt2_lora.json --seq 32 --batch 2 --dtype fp32 --lora 4 --lora-targets all"
  "hf_qwen2_bf16|--hf-config $m/qwen2.json --seq 64 --batch 4 --dtype bf16"
  "hf_mixtral_bf16|--hf-config $m/mixtral.json --seq 32 --batch 2 --dtype bf16"
  "hf_gpt2|--hf gpt2 --seq 64 --lora 8"
)
# name|arguments of `memwall run` (with --keep-values DIR)
runs=(
  "run_gpt_mini|--builtin gpt-mini"
  "run_linear_toy|--builtin linear-toy"
  "run_tiny_cnn|--script $m/tiny_cnn.py:build"
  "run_hf_qwen2_bf16|--hf-config $m/qwen2.json --seq 32 --batch 2 --dtype bf16"
)

failed=0
same=0
report() {  # name, directory of old's files, directory of new's
  local name=$1 a=$2 b=$3 files differ=0
  files=$( (cd "$a" && find . -type f; cd "$b" && find . -type f) | sort -u)
  if [[ -z $files ]]; then
    echo "$name: no output"; failed=$((failed + 1)); return
  fi
  for f in $files; do
    if ! cmp -s "$a/$f" "$b/$f"; then
      echo "$name: ${f#./} DIFFERS"; differ=1
    fi
  done
  if [[ $broken -eq 1 ]]; then
    failed=$((failed + 1))
  elif [[ $differ -eq 0 ]]; then
    echo "$name: same ($(echo "$files" | wc -l) files, $(cd "$a" && cat $files | wc -c) bytes)"
    same=$((same + 1))
  else
    failed=$((failed + 1))
  fi
}

# One side's files of a case, in DIR: the graph `memwall trace` writes, or
# the values `memwall run` keeps.
produce() {  # verb (trace or run), binary, arguments, DIR
  local verb=$1 bin=$2 args=$3 dir=$4
  # shellcheck disable=SC2086
  case $verb in
    trace) mkdir -p "$dir" && "$bin" trace $args --out "$dir/graph.json" ;;
    run) rm -rf "$dir" && "$bin" run $args --gpu a100-80g --budget 40GiB --steps 2 --keep-values "$dir" ;;
  esac
}

compare() {  # verb, then its cases (name|arguments)
  local verb=$1 entry name args side bin
  shift
  for entry in "$@"; do
    name=${entry%%|*}
    args=${entry#*|}
    broken=0
    for side in old new; do
      bin=$old; [[ $side == new ]] && bin=$new
      [[ $bin == - ]] && continue
      mkdir -p "$work/$side"
      if ! produce "$verb" "$bin" "$args" "$work/$side/$name" >/dev/null 2>"$work/$side/$name.err"; then
        echo "$name: $side failed: $(tail -1 "$work/$side/$name.err")"
        broken=1
      fi
    done
    report "$name" "$work/old/$name" "$work/new/$name"
  done
}

compare trace "${traces[@]}"
compare run "${runs[@]}"
total=$((${#traces[@]} + ${#runs[@]}))
echo "same_traces: $same of $total cases byte for byte the same ($work)"
[[ $failed -eq 0 ]]
