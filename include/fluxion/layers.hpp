// fluxion/layers.hpp — every layer: `#include <fluxion/layers.hpp>`.
//
// Layers are plain values holding tensors (docs/ARCHITECTURE.md, "Layers and training"): fmap,
// gpu/cpu, state, gradients and the optimisers walk them; printing shows their parameter counts;
// each accepts one sample or a batch (see layers/layer.hpp for the layout rule) and throws
// fx::ShapeError naming itself, the shape it got and the shape it expects.
#pragma once
#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/attention.hpp"
#include "fluxion/layers/chain.hpp"
#include "fluxion/layers/combinators.hpp"
#include "fluxion/layers/conv.hpp"
#include "fluxion/layers/dense.hpp"
#include "fluxion/layers/dropout.hpp"
#include "fluxion/layers/dynamic_chain.hpp"
#include "fluxion/layers/embedding.hpp"
#include "fluxion/layers/flatten.hpp"
#include "fluxion/layers/init.hpp"
#include "fluxion/layers/layer.hpp"
#include "fluxion/layers/mode.hpp"
#include "fluxion/layers/normalise.hpp"
#include "fluxion/layers/pooling.hpp"
#include "fluxion/layers/recurrent.hpp"
#include "fluxion/layers/rrelu.hpp"
#include "fluxion/layers/scale.hpp"
#include "fluxion/layers/show.hpp"
#include "fluxion/layers/upsample.hpp"
