// mode.cpp — whether a layer trains: in automatic mode, when a gradient is being recorded.
#include "core/tape.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

bool training(Mode mode) { return mode == Mode::train || (mode == Mode::automatic && detail::active_tape() != nullptr); }

}  // namespace fluxion
