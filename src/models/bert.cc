// BERT (Devlin et al. 2019) pre-training as Hugging Face's
// BertForPreTraining: word + position (512) + token-type (2) embeddings,
// LayerNorm and dropout; post-LN encoder layers with separate query/key/value
// linears (with bias), GELU MLP of width 4h, dropout 0.1; pooler (dense +
// tanh on the [CLS] token); MLM head (dense + GELU + LayerNorm, decoder tied
// to the word embeddings with its own bias); NSP head (2 classes). Loss = MLM
// cross-entropy + NSP cross-entropy.
//
// Simplifications: the MLM loss covers all b*s positions (real pre-training
// labels ~15% of them, but the decoder and the loss kernel process every
// row); no padding, so no attention mask; the [CLS] row is copied (b*h
// elements) where PyTorch takes a view.
#include <string>

#include "architectures.h"
#include "attention.h"
#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

struct BertConfig {
  const char* name;
  int64_t layers, hidden, heads;
};

// HF config.json of bert-base-uncased and bert-large-uncased.
constexpr BertConfig kBertConfigs[] = {
    {"bert-base", 12, 768, 12},
    {"bert-large", 24, 1024, 16},
};
constexpr int64_t kBertVocab = 30522;
constexpr int64_t kBertPositions = 512;
constexpr int64_t kTokenTypes = 2;
constexpr double kBertDropout = 0.1;  // hidden_dropout_prob, attention_probs_dropout_prob

// tanh; its backward (tanh_backward) reads the output.
Tensor tanh_layer(Builder& b, std::string_view name, const Tensor& x) {
  return elementwise(b, name, "tanh", x, 4, 3, Saves::kOutput);
}

// hidden_states[:, 0]: the [CLS] row [b, h] of x [b, s, h]. SelectBackward
// writes the gradient into zeros of x's shape.
Tensor first_token(Builder& b, std::string_view name, const Tensor& x) {
  const std::string n(name);
  const std::string fq = b.qualified(name);
  Tensor y = b.emit1({.name = n, .type = "select", .in = {x}},
                     {n, {x.shape.at(0), x.shape.at(2)}, x.dtype, kAct});
  b.propagate_requires_grad({x}, {y});
  b.on_backward([&b, fq, x, y] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    Tensor dx = b.emit1(
        {.name = fq + ".bwd", .type = "select_backward", .phase = Phase::kBackward, .in = {g}},
        {fq + ".grad_in", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq);
  });
  return y;
}

}  // namespace

Graph build_bert(std::string_view variant, const ModelOptions& opts) {
  const BertConfig* cfg = nullptr;
  for (const BertConfig& c : kBertConfigs) {
    if (variant == c.name) cfg = &c;
  }
  if (cfg == nullptr) fail("model: unknown BERT variant '{}'", variant);
  if (opts.seq > kBertPositions) fail("model {}: sequence longer than {}", variant, kBertPositions);
  const int64_t batch = opts.batch, s = opts.seq, h = cfg->hidden;

  Builder b(std::string(variant), opts);
  Tensor ids = b.input("input_ids", {batch, s}, DType::kI64);
  Tensor token_types = b.input("token_type_ids", {batch, s}, DType::kI64);
  Tensor positions = b.input("position_ids", {s}, DType::kI64);
  Tensor mlm_labels = b.input("labels", {batch, s}, DType::kI64);
  Tensor nsp_labels = b.input("next_sentence_label", {batch}, DType::kI64);

  Tensor words = b.param("embeddings.word_embeddings.weight", {kBertVocab, h});
  Tensor x;
  {
    auto emb = b.scope("embeddings");
    Tensor pos_table = b.param("position_embeddings.weight", {kBertPositions, h});
    Tensor type_table = b.param("token_type_embeddings.weight", {kTokenTypes, h});
    x = embedding(b, "word_embeddings", ids, words);
    x = add(b, "sum_token_types", x,
            embedding(b, "token_type_embeddings", token_types, type_table));
    x = add_broadcast(b, "sum_positions", x,
                      embedding(b, "position_embeddings", positions, pos_table));
    x = layer_norm(b, "LayerNorm", x);
    x = dropout(b, "dropout", x, kBertDropout);
  }

  for (int64_t i = 0; i < cfg->layers; ++i) {
    auto layer = b.scope(fmt::format("encoder.layer.{}", i));
    const int64_t d = h / cfg->heads;
    const std::vector<int64_t> heads_shape = {batch, cfg->heads, s, d};
    Tensor q = linear_layer(b, "attention.self.query", x, h, true);
    Tensor k = linear_layer(b, "attention.self.key", x, h, true);
    Tensor v = linear_layer(b, "attention.self.value", x, h, true);
    Tensor a = attention(b, "attention.self", b.view(q, heads_shape), b.view(k, heads_shape),
                         b.view(v, heads_shape),
                         {.heads = cfg->heads,
                          .kv_heads = cfg->heads,
                          .causal = false,
                          .dropout = kBertDropout,
                          .flash = opts.flash});
    // Post-LN: LayerNorm(dropout(dense(a)) + input).
    a = linear_layer(b, "attention.output.dense", a, h, true);
    a = dropout(b, "attention.output.dropout", a, kBertDropout);
    a = add(b, "attention.output.residual", a, x);
    a = layer_norm(b, "attention.output.LayerNorm", a);

    Tensor m = linear_layer(b, "intermediate.dense", a, 4 * h, true);
    m = gelu(b, "intermediate.gelu", m);
    m = linear_layer(b, "output.dense", m, h, true);
    m = dropout(b, "output.dropout", m, kBertDropout);
    m = add(b, "output.residual", m, a);
    x = layer_norm(b, "output.LayerNorm", m);
  }

  Tensor pooled = first_token(b, "pooler.first_token", x);
  pooled = linear_layer(b, "pooler.dense", pooled, h, true);
  pooled = tanh_layer(b, "pooler.tanh", pooled);

  Tensor t = linear_layer(b, "cls.predictions.transform.dense", x, h, true);
  t = gelu(b, "cls.predictions.transform.gelu", t);
  t = layer_norm(b, "cls.predictions.transform.LayerNorm", t);
  Tensor decoder_bias = b.param("cls.predictions.bias", {kBertVocab});
  Tensor mlm_logits = linear(b, "cls.predictions.decoder", t, words, decoder_bias);
  Tensor nsp_logits = linear_layer(b, "cls.seq_relationship", pooled, 2, true);

  Tensor mlm_loss = cross_entropy(b, "mlm_loss", b.view(mlm_logits, {batch * s, kBertVocab}),
                                  b.view(mlm_labels, {batch * s}));
  Tensor nsp_loss = cross_entropy(b, "nsp_loss", nsp_logits, nsp_labels);
  return b.finish(add_losses(b, "loss", mlm_loss, nsp_loss));
}

}  // namespace memwall::models
