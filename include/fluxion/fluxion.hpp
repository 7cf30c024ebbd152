// fluxion/fluxion.hpp — everything: `#include <fluxion/fluxion.hpp>` and `namespace fx = fluxion;`.
#pragma once
#include "fluxion/autodiff.hpp"
#include "fluxion/device.hpp"
#include "fluxion/dtype.hpp"
#include "fluxion/error.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/ops.hpp"
#include "fluxion/tensor.hpp"
