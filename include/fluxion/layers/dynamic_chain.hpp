// fluxion/layers/dynamic_chain.hpp — layers chosen at run time.
//
// AnyLayer holds any layer (a value with `Tensor operator()(const Tensor&) const` whose type fmap
// walks) behind one type, with value semantics: copying an AnyLayer copies the layer. fmap, gpu,
// state, gradients, the optimisers, trainmode/testmode and printing all reach the tensors inside.
// DynamicChain is a Chain of AnyLayers that can grow:
//
//   fx::DynamicChain m;
//   for (int i = 0; i < depth; ++i) m.push_back(fx::Dense(16, 16, fx::relu));
//   m.push_back(fx::Dense(16, 1));
//   auto& d = m[0].as<fx::Dense>();        // the layer itself; ValueError if it is another type
//
// State names are `layers.<i>.<field>`, as for Chain.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/mode.hpp"
#include "fluxion/layers/show.hpp"

namespace fluxion {

class AnyLayer {
public:
    using TensorVisitor = std::function<void(const std::string& path, Tensor& t)>;

    template <class L>
        requires(!std::same_as<std::decay_t<L>, AnyLayer>)
    AnyLayer(L&& layer)  // NOLINT: implicit, so push_back(fx::Dense(...)) reads naturally
        : impl_(std::make_unique<Model<detail::layer_t<L>>>(detail::layer_t<L>(std::forward<L>(layer)))) {}
    AnyLayer(const AnyLayer& other) : impl_(other.impl_->clone()) {}
    AnyLayer(AnyLayer&&) noexcept = default;
    AnyLayer& operator=(const AnyLayer& other) {
        if (this != &other) impl_ = other.impl_->clone();
        return *this;
    }
    AnyLayer& operator=(AnyLayer&&) noexcept = default;

    Tensor operator()(const Tensor& x) const { return impl_->call(x); }

    template <class L> bool is() const { return typeid(L) == impl_->type(); }
    template <class L> L& as() { return static_cast<Model<L>&>(checked<L>()).layer; }
    template <class L> const L& as() const { return static_cast<const Model<L>&>(checked<L>()).layer; }

    // f(path, tensor) for each tensor inside (only the trainable ones if asked), in declaration order.
    void visit(bool only_trainable, const TensorVisitor& f) const { impl_->visit(only_trainable, f); }
    void set_mode(Mode mode) { impl_->set_mode(mode); }
    void show(detail::Shower& s) const { impl_->show(s); }

private:
    struct Concept {
        virtual ~Concept() = default;
        virtual std::unique_ptr<Concept> clone() const = 0;
        virtual Tensor call(const Tensor& x) const = 0;
        virtual void visit(bool only_trainable, const TensorVisitor& f) = 0;
        virtual void set_mode(Mode mode) = 0;
        virtual void show(detail::Shower& s) const = 0;
        virtual const std::type_info& type() const = 0;
    };

    template <class L> struct Model final : Concept {
        L layer;
        explicit Model(L l) : layer(std::move(l)) {}
        std::unique_ptr<Concept> clone() const override { return std::make_unique<Model>(layer); }
        Tensor call(const Tensor& x) const override { return layer(x); }
        void visit(bool only_trainable, const TensorVisitor& f) override {
            if (only_trainable) visit_trainable(layer, f);
            else visit_tensors(layer, f);
        }
        void set_mode(Mode mode) override { detail::set_mode(layer, mode); }
        void show(detail::Shower& s) const override { s.layer(layer); }
        const std::type_info& type() const override { return typeid(L); }
    };

    template <class L> Concept& checked() const {
        if (!is<L>())
            throw ValueError(std::string("AnyLayer::as: the layer is a ") + impl_->type().name() + ", not a " +
                             typeid(L).name());
        return *impl_;
    }

    // Never null except after being moved from.
    std::unique_ptr<Concept> impl_;
};

class DynamicChain {
public:
    std::vector<AnyLayer> layers;

    DynamicChain() = default;
    template <class... Ls>
        requires(sizeof...(Ls) > 0 && !(sizeof...(Ls) == 1 && (std::same_as<std::decay_t<Ls>, DynamicChain> && ...)))
    explicit DynamicChain(Ls&&... ls) {
        (layers.emplace_back(std::forward<Ls>(ls)), ...);
    }

    template <class L> DynamicChain& push_back(L&& layer) {
        layers.emplace_back(std::forward<L>(layer));
        return *this;
    }
    std::size_t size() const { return layers.size(); }
    AnyLayer& operator[](std::size_t i) { return layers.at(i); }
    const AnyLayer& operator[](std::size_t i) const { return layers.at(i); }

    Tensor operator()(const Tensor& x) const {
        Tensor y = x;
        for (const auto& l : layers) y = l(y);
        return y;
    }

    void show(detail::Shower& s) const {
        s.open("DynamicChain");
        for (const auto& l : layers) s.layer(l);
        s.close();
    }
};

}  // namespace fluxion

// The tensors inside an AnyLayer are its fields; the path of each is relative to the layer.
template <>
struct fluxion::functor<fluxion::AnyLayer> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        x.visit(false, [&](const std::string& path, Tensor& t) { f(path.c_str(), t); });
    }
};
template <>
struct fluxion::trainable<fluxion::AnyLayer> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) {
        x.visit(true, [&](const std::string& path, Tensor& t) { f(path.c_str(), t); });
    }
};
FLUXION_FUNCTOR(fluxion::DynamicChain, layers);
