// User-defined models (Flux's @functor; docs/ARCHITECTURE.md, "Functor: fmap and moving between
// devices"): declare a struct's fields once and fmap, gpu, cpu, gradients, saving and the
// optimisers walk them. A struct that declares nothing does not compile with fmap, rather than
// being silently left where it was.
#include <fluxion/fluxion.hpp>

#include <iostream>
#include <string>

namespace fx = fluxion;

// Both fields are walked; only `actor` is optimised.
struct ActorCritic {
    fx::Tensor actor;
    fx::Tensor critic;
};
FLUXION_FUNCTOR(ActorCritic, actor, critic);
FLUXION_TRAINABLE(ActorCritic, actor);

// Only `actor` is declared, so fmap (and with it gpu, cpu, state, saving) passes over `critic`,
// as Flux's `@functor ActorCriticActorOnly (actor,)`.
struct ActorCriticActorOnly {
    fx::Tensor actor;
    fx::Tensor critic;
};
FLUXION_FUNCTOR(ActorCriticActorOnly, actor);

namespace {

template <class T> void show(const std::string& label, const T& m) {
    std::cout << "  " << label << "\n"
              << "    actor:  " << fx::summary(m.actor) << "\n"
              << "    critic: " << fx::summary(m.critic) << "\n";
}

template <class T> void show_state(const T& m) {
    std::cout << "  fx::state names:";
    for (const auto& [name, t] : fx::state(m)) std::cout << " " << name;
    std::cout << "\n";
}

// Any function of a tensor can be mapped; a cast makes the walk visible on machines without a GPU.
fx::Tensor to_f64(const fx::Tensor& t) { return t.to(fx::DType::f64); }

}  // namespace

int main() {
    const fx::Device gpu = fx::get_device();
    std::cout << "fx::gpu moves to " << gpu.str()
              << (gpu.is_cpu() ? " (no GPU is functional, so fx::gpu leaves tensors where they are)" : "") << "\n\n";

    std::cout << "ActorCritic, FLUXION_FUNCTOR(ActorCritic, actor, critic):\n";
    auto ac = ActorCritic{fx::ones({2, 2}), fx::ones({2})};
    show("as built", ac);
    show("fmap(fx::gpu, ac): both fields go to " + gpu.str(), fx::fmap(fx::gpu, ac));
    show("fmap(to_f64, ac): both fields converted", fx::fmap(to_f64, ac));
    show_state(ac);

    std::cout << "\nActorCriticActorOnly, FLUXION_FUNCTOR(ActorCriticActorOnly, actor):\n";
    auto partial = ActorCriticActorOnly{fx::ones({2, 2}), fx::ones({2})};
    show("fmap(fx::gpu, m): actor goes to " + gpu.str() + ", critic stays on " + partial.critic.device().str(),
         fx::fmap(fx::gpu, partial));
    show("fmap(to_f64, m): actor converted, critic left as it was", fx::fmap(to_f64, partial));
    show_state(partial);

    // FLUXION_TRAINABLE(ActorCritic, actor): one optimiser step changes actor and leaves critic.
    std::cout << "\nFLUXION_TRAINABLE(ActorCritic, actor), one Descent step on sum(actor) + sum(critic):\n";
    auto model = ac | fx::gpu;
    auto opt = fx::setup(fx::Descent{.eta = 0.5}, model);
    auto [loss, grads] = fx::withgradient(
        [](const ActorCritic& m) { return fx::sum(m.actor) + fx::sum(m.critic); }, model);
    fx::update(opt, model, grads);
    const fx::Tensor actor = model.actor | fx::cpu, critic = model.critic | fx::cpu;
    std::cout << "  optimised paths:";
    for (const auto& p : opt.params) std::cout << " " << p.path;
    std::cout << "\n  actor[0, 0]:  1 -> " << actor.at({0, 0}) << "\n"
              << "  critic[0]:    1 -> " << critic.at({0}) << "\n";
}
