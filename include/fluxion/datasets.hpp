// fluxion/datasets.hpp — real data sets on disk: the IDX format (MNIST's) and the MNIST-style image
// sets that use it.
//
//   auto [X, Y] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);  // {60000,1,28,28} f32, {60000} i64
//   auto [B, L] = fx::datasets::fashion_mnist(Split::Train, Pixels::bytes);  // u8 images: 47 MB, not 188
//   auto [Xt, Yt] = fx::datasets::mnist("/data/mnist", fx::datasets::Split::Test);
//   fx::Tensor raw = fx::datasets::read_idx("train-labels-idx1-ubyte.gz");  // u8 {60000}
//
// Files may be plain or gzip-compressed. Missing, corrupt or truncated files throw fx::IOError
// naming the file and what is wrong with it.
#pragma once
#include <filesystem>
#include <tuple>

#include "fluxion/tensor.hpp"

namespace fluxion::datasets {

enum class Split { Train, Test };
// How images come: f32 scaled to [0, 1], or the file's u8 bytes (a quarter of the memory; convert
// each batch, e.g. fx::cast(x, fx::DType::f32) / 255, as torchvision's ToTensor does per sample).
enum class Pixels { scaled, bytes };

// One IDX file, plain or .gz, as a CPU tensor of the shape its header gives. Element types: u8 as
// u8; i8 and i16 widened to i32; i32, f32 and f64 as themselves.
Tensor read_idx(const std::filesystem::path& path);

// An MNIST-format data set in `dir`: {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte,
// each plain or with .gz. Images come as {N, 1, H, W} (f32 scaled to [0, 1], or u8), labels as {N} i64.
std::tuple<Tensor, Tensor> mnist(const std::filesystem::path& dir, Split split, Pixels pixels = Pixels::scaled);

// Fashion-MNIST (Zalando; 10 classes of clothing, 60000 training and 10000 test images of 28x28),
// as mnist() returns it. Read from the folder in the environment variable FLUXION_DATA when set, else
// from where Debian's package dataset-fashion-mnist installs it (/usr/share/datasets/fashion-mnist).
std::tuple<Tensor, Tensor> fashion_mnist(Split split, Pixels pixels = Pixels::scaled);

}  // namespace fluxion::datasets
