// Test helper: hand-built forward-only programs (no backward op), shared by
// the remat, swap and planner tests. Their peaks are derived by hand where
// the tests use them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "remat_graphs.h"

namespace memwall::testing {

// A U-Net-like inference pass: two encoder levels whose outputs the decoder
// reads again after a gap (skip connections), a two-op bottleneck.
//   buffers: 0 w param 8, 1 x input 16, 2 e1 64, 3 e2 32, 4 m1 48, 5 m2 48,
//            6 d2 32, 7 d1 16, 8 y 8 (activations)
//   op 0 enc1 (4 GFLOP)  in [x, w]      out [e1]
//   op 1 enc2 (1 GFLOP)  in [e1, w]     out [e2]
//   op 2 mid1            in [e2, w]     out [m1]
//   op 3 mid2            in [m1, w]     out [m2]
//   op 4 dec2            in [m2, e2, w] out [d2]
//   op 5 dec1            in [d2, e1, w] out [d1]
//   op 6 head            in [d1, w]     out [y]
// e1 (uses 0, 1, 5) and e2 (1, 2, 4) are read again after a gap; no other
// buffer is. Keep-all holds, per op: 88, 104, 152, 200, 184, 120, 32
// (w 8 throughout, x until enc1 ends): peak 200 at mid2 (w e1 e2 m1 m2).
inline Graph unet_like() {
  GraphMaker m("unet-like");
  const BufferId w = m.buffer("w", 8, BufferKind::kParam);
  const BufferId x = m.buffer("x", 16, BufferKind::kInput);
  const BufferId e1 = m.buffer("e1", 64);
  const BufferId e2 = m.buffer("e2", 32);
  const BufferId m1 = m.buffer("m1", 48);
  const BufferId m2 = m.buffer("m2", 48);
  const BufferId d2 = m.buffer("d2", 32);
  const BufferId d1 = m.buffer("d1", 16);
  const BufferId y = m.buffer("y", 8);
  m.op("enc1", Phase::kForward, {x, w}, {e1}, 4e9);
  m.op("enc2", Phase::kForward, {e1, w}, {e2}, 1e9);
  m.op("mid1", Phase::kForward, {e2, w}, {m1}, 1e9);
  m.op("mid2", Phase::kForward, {m1, w}, {m2}, 1e9);
  m.op("dec2", Phase::kForward, {m2, e2, w}, {d2}, 1e9);
  m.op("dec1", Phase::kForward, {d2, e1, w}, {d1}, 1e9);
  m.op("head", Phase::kForward, {d1, w}, {y}, 1e9);
  return m.take();
}

// A generator unrolled for `steps` steps (a GAN's unrolled generator, a
// diffusion-style loop): `project` turns the noise z into h0, each step
// reads the previous state and z (as StyleGAN's per-layer noise does), and
// `blend` mixes the last state with h0, which is thus read at both ends.
//   buffers: w param 8, z input 16, h0..h{steps} activation 100 each,
//            img activation 20
//   op 0            project (2 GFLOP)  in [z, w]             out [h0]
//   op t (1..steps) step{t} (1 GFLOP)  in [h{t-1}, z, w]     out [h{t}]
//   op steps + 1    blend (0.1 GFLOP)  in [h{steps}, h0, z]  out [img]
// Keep-all holds w + z = 24 throughout and peaks at 324 while a step
// from 2 on runs (h0, h{t-1}, h{t}). blend alone holds h{steps}, h0, z
// and img: 236 bytes beside w, so no plan fits below 244. Dropping h0
// after step1 and recomputing project (z and w are still there) before
// blend holds 224 through the steps and the recompute, and 244 during
// blend: the only drop there is, and it reaches the bound.
inline Graph unrolled_generator(int steps) {
  GraphMaker m(fmt::format("generator-{}", steps));
  const BufferId w = m.buffer("w", 8, BufferKind::kParam);
  const BufferId z = m.buffer("z", 16, BufferKind::kInput);
  const BufferId h0 = m.buffer("h0", 100);
  m.op("project", Phase::kForward, {z, w}, {h0}, 2e9);
  BufferId h = h0;
  for (int t = 1; t <= steps; ++t) {
    const BufferId next = m.buffer(fmt::format("h{}", t), 100);
    m.op(fmt::format("step{}", t), Phase::kForward, {h, z, w}, {next}, 1e9);
    h = next;
  }
  const BufferId img = m.buffer("img", 20);
  m.op("blend", Phase::kForward, {h, h0, z}, {img}, 1e8);
  return m.take();
}

// An hourglass (a U-Net at one resolution, as in image restoration): x
// through `levels` encoder levels of `ops` ops each, whose last outputs the
// decoder adds back in reverse order after two middle ops, then the output
// adds x (a global residual, so x lives to the end and everything can be
// recomputed from it). Every buffer is 1 MiB; costs vary by op. Keep-all
// peaks in the middle, holding w, x, every level's output and the two
// middle ops' buffers: levels + 3 MiB.
inline Graph hourglass(int levels, int ops) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  GraphMaker m(fmt::format("hourglass-{}x{}", levels, ops));
  const BufferId w = m.buffer("w", 8, BufferKind::kParam);
  const BufferId x = m.buffer("x", kMiB, BufferKind::kInput);
  BufferId h = x;
  std::vector<BufferId> skips;
  const auto layer = [&](const std::string& name, std::vector<BufferId> in, double flops) {
    h = m.buffer(name, kMiB);
    m.op(name, Phase::kForward, std::move(in), {h}, flops);
  };
  for (int l = 0; l < levels; ++l) {
    for (int j = 0; j < ops; ++j)
      layer(fmt::format("enc{}.{}", l, j), {h, w}, 1e9 * (1 + (l + j) % 3));
    skips.push_back(h);
  }
  for (int j = 0; j < 2; ++j) layer(fmt::format("mid.{}", j), {h, w}, 1e9);
  for (int l = levels; l-- > 0;) {
    layer(fmt::format("dec{}.add", l), {h, skips[l]}, 1e7);
    for (int j = 0; j < ops; ++j)
      layer(fmt::format("dec{}.{}", l, j), {h, w}, 1e9 * (1 + (l + j) % 3));
  }
  layer("out", {h, x}, 1e7);
  return m.take();
}

}  // namespace memwall::testing
