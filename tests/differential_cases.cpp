// differential_cases.cpp — the generators of differential_cases.hpp, one per op family.
#include "differential_cases.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace fx_test {

namespace {

using fx::Shape;
using fx::Tensor;
using Xs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Xs&)>;

struct Rng {
    std::mt19937_64 gen;
    std::int64_t between(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
    }
    bool chance(double p) { return std::bernoulli_distribution(p)(gen); }
    template <class T> const T& pick(const std::vector<T>& v) { return v[between(0, std::int64_t(v.size()) - 1)]; }
};

std::string join(const std::vector<std::int64_t>& v, const char* sep = ", ") {
    std::ostringstream s;
    for (std::size_t i = 0; i < v.size(); ++i) s << (i ? sep : "") << v[i];
    return s.str();
}
std::string pair(std::int64_t a, std::int64_t b) {
    std::ostringstream s;
    s << "(" << a << ", " << b << ")";
    return s.str();
}
std::string num(double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
}

// An input as the op sees it: how fluxion and PyTorch make that view of the tensor as made.
struct Arg {
    Fn get;
    std::string py;
};

// A dimension, now and then zero when the family accepts empty tensors.
std::int64_t dim(Rng& r, bool zero_ok, std::int64_t lo = 1, std::int64_t hi = 4) {
    return zero_ok && r.chance(0.06) ? 0 : r.between(lo, hi);
}
// Now and then the last axis is long, past the widths of the kernels' vector loops and their tails.
Shape random_shape(Rng& r, int rank, bool zero_ok) {
    Shape s(rank);
    for (auto& d : s) d = dim(r, zero_ok);
    if (rank > 0 && r.chance(0.15)) s.back() = r.between(5, 70);
    return s;
}

class Builder {
public:
    Builder(Rng& r, DiffConfig& c, bool views_ok, bool nonfinite_ok)
        : r_(r), c_(c), views_ok_(views_ok), nonfinite_ok_(nonfinite_ok) {}

    // Adds an input that the op sees with shape `s`: the tensor itself, or a view of a larger,
    // permuted or smaller one (broadcast views only where `broadcast_ok`: they repeat values, so
    // they make ties, where fluxion and PyTorch differ by design, see ops.hpp).
    Arg input(const Shape& s, Values v = Values::normal, bool broadcast_ok = true) {
        int i = int(c_.shapes.size());
        std::string x = "x" + std::to_string(i);
        int rank = int(s.size());
        std::vector<int> kinds = {0};
        if (views_ok_ && rank >= 2) kinds.push_back(1);
        if (views_ok_ && rank >= 1) kinds.push_back(2);
        bool broadcastable = std::any_of(s.begin(), s.end(), [](std::int64_t d) { return d != 1; });
        if (views_ok_ && broadcast_ok && broadcastable) kinds.push_back(3);
        int kind = r_.chance(0.5) ? 0 : r_.pick(kinds);
        if (v == Values::normal && nonfinite_ok_ && r_.chance(0.1)) v = Values::nonfinite;
        c_.values.push_back(v);
        if (kind == 1) {  // a permutation of a tensor made with the axes in another order
            std::vector<int> perm(rank);
            std::iota(perm.begin(), perm.end(), 0);
            do std::shuffle(perm.begin(), perm.end(), r_.gen);
            while (std::is_sorted(perm.begin(), perm.end()));
            Shape base(rank);
            for (int k = 0; k < rank; ++k) base[perm[k]] = s[k];
            c_.shapes.push_back(base);
            std::vector<std::int64_t> p(perm.begin(), perm.end());
            c_.views.push_back("permute(" + join(p) + ")");
            return {[i, perm](const Xs& xs) { return xs[i].permute(perm); }, x + ".permute(" + join(p) + ")"};
        }
        if (kind == 2) {  // every other row along one axis, from the second
            int a = int(r_.between(0, rank - 1));
            Shape base = s;
            std::int64_t stop = 2 * s[a] + 1;
            base[a] = stop;
            c_.shapes.push_back(base);
            std::string index = x + "[";
            for (int k = 0; k < a; ++k) index += ":, ";
            index += "1:" + std::to_string(stop) + ":2]";
            c_.views.push_back("slice(" + std::to_string(a) + ", 1, " + std::to_string(stop) + ", 2)");
            return {[i, a, stop](const Xs& xs) { return xs[i].slice(a, 1, stop, 2); }, index};
        }
        if (kind == 3) {  // a size-1 axis broadcast to the size the op sees
            std::vector<int> axes;
            for (int k = 0; k < rank; ++k)
                if (s[k] != 1) axes.push_back(k);
            Shape base = s;
            base[r_.pick(axes)] = 1;
            c_.shapes.push_back(base);
            c_.views.push_back("expand(" + join(s) + ")");
            return {[i, s](const Xs& xs) { return xs[i].expand(s); }, x + ".expand(" + join(s) + ")"};
        }
        c_.shapes.push_back(s);
        c_.views.push_back("contiguous");
        return {[i](const Xs& xs) { return xs[i]; }, x};
    }

    // No nan or ±inf in this configuration's inputs (each caller says why).
    void finite_only() { nonfinite_ok_ = false; }

private:
    Rng& r_;
    DiffConfig& c_;
    bool views_ok_, nonfinite_ok_;
};

// ---- the families ----

void unary(Rng& r, DiffConfig& c, Builder& b) {
    struct U {
        const char* name;
        Values values;
        Tensor (*f)(const Tensor&);
        const char* py;
    };
    static const std::vector<U> ops = {
        {"exp", Values::normal, fx::exp, "torch.exp"},
        {"log", Values::positive, fx::log, "torch.log"},
        {"sqrt", Values::positive, fx::sqrt, "torch.sqrt"},
        {"abs", Values::away_from_zero, fx::abs, "torch.abs"},
        {"square", Values::normal, fx::square, "torch.square"},
        {"sin", Values::normal, fx::sin, "torch.sin"},
        {"cos", Values::normal, fx::cos, "torch.cos"},
        {"relu", Values::away_from_zero, fx::relu, "torch.relu"},
        {"gelu", Values::normal, fx::gelu, "lambda x: F.gelu(x, approximate='tanh')"},
        {"gelu_erf", Values::normal, fx::gelu_erf, "F.gelu"},
        {"sigmoid", Values::normal, fx::sigmoid, "torch.sigmoid"},
        {"tanh", Values::normal, fx::tanh, "torch.tanh"},
        {"softplus", Values::normal, fx::softplus, "F.softplus"},
        {"swish", Values::normal, fx::swish, "F.silu"},
        // Away from zero, so finite: PyTorch 1.13's gradients at NaN and ±inf differ between its
        // vector and scalar loops.
        {"relu6", Values::away_from_zero, fx::relu6, "F.relu6"},
        {"selu", Values::away_from_zero, fx::selu, "F.selu"},
        {"softsign", Values::away_from_zero, fx::softsign, "F.softsign"},
        {"logsigmoid", Values::away_from_zero, fx::logsigmoid, "F.logsigmoid"},
        {"mish", Values::away_from_zero, fx::mish, "F.mish"},
        {"tanhshrink", Values::away_from_zero, fx::tanhshrink, "F.tanhshrink"},
        {"gelu_sigmoid", Values::away_from_zero, fx::gelu_sigmoid, "lambda x: F.gelu(x, approximate='tanh')"},
        {"quick_gelu", Values::away_from_zero, fx::quick_gelu, "lambda x: x * torch.sigmoid(1.702 * x)"},
        {"logcosh", Values::away_from_zero, fx::logcosh, "lambda x: torch.log(torch.cosh(x))"},
        {"lisht", Values::away_from_zero, fx::lisht, "lambda x: x * torch.tanh(x)"},
    };
    Shape s = random_shape(r, int(r.between(0, 4)), true);
    int which = int(r.between(0, std::int64_t(ops.size()) + 2));
    if (which < int(ops.size())) {
        const U& u = ops[which];
        Arg x = b.input(s, u.values);
        c.f = [x, f = u.f](const Xs& xs) { return f(x.get(xs)); };
        c.torch = "(" + std::string(u.py) + ")(" + x.py + ")";
        return;
    }
    Arg x = b.input(s, Values::away_from_zero);
    double p = double(r.between(1, 9)) / 4;
    if (which == int(ops.size())) {
        c.f = [x, p](const Xs& xs) { return fx::leakyrelu(x.get(xs), p / 10); };
        c.torch = "F.leaky_relu(" + x.py + ", " + num(p / 10) + ")";
    } else if (which == int(ops.size()) + 1) {
        c.f = [x, p](const Xs& xs) { return fx::elu(x.get(xs), p); };
        c.torch = "F.elu(" + x.py + ", " + num(p) + ")";
    } else {
        c.f = [x, p](const Xs& xs) { return fx::clamp(x.get(xs), -p / 4, p / 3); };
        c.torch = "torch.clamp(" + x.py + ", " + num(-p / 4) + ", " + num(p / 3) + ")";
    }
}

void binary(Rng& r, DiffConfig& c, Builder& b) {
    static const std::vector<std::string> ops = {"+", "-", "*", "/", "pow", "maximum", "minimum"};
    const std::string& op = r.pick(ops);
    Shape out = random_shape(r, int(r.between(0, 4)), true);
    auto operand = [&](Values v) {  // a trailing part of the output's shape, some axes 1
        Shape s(out.end() - r.between(0, std::int64_t(out.size())), out.end());
        for (auto& d : s)
            if (r.chance(0.3)) d = 1;
        return b.input(s, v);
    };
    bool positive = op == "/" || op == "pow";
    Arg x = operand(op == "pow" ? Values::positive : Values::normal),
        y = operand(positive ? Values::positive : Values::normal);
    if (r.chance(0.5)) std::swap(x, y);
    if (op == "pow") {
        c.f = [x, y](const Xs& xs) { return fx::pow(x.get(xs), y.get(xs)); };
        c.torch = "torch.pow(" + x.py + ", " + y.py + ")";
    } else if (op == "maximum" || op == "minimum") {
        bool mx = op == "maximum";
        c.f = [x, y, mx](const Xs& xs) {
            return mx ? fx::maximum(x.get(xs), y.get(xs)) : fx::minimum(x.get(xs), y.get(xs));
        };
        c.torch = "torch." + op + "(" + x.py + ", " + y.py + ")";
    } else {
        char o = op[0];
        c.sum_of_products = o == '+' || o == '*';
        c.f = [x, y, o](const Xs& xs) {
            Tensor a = x.get(xs), v = y.get(xs);
            return o == '+' ? a + v : o == '-' ? a - v : o == '*' ? a * v : a / v;
        };
        c.torch = "(" + x.py + " " + op + " " + y.py + ")";
    }
}

void reduction(Rng& r, DiffConfig& c, Builder& b) {
    static const std::vector<std::string> ops = {"sum", "mean", "max", "min", "logsumexp"};
    const std::string& op = r.pick(ops);
    bool extremum = op == "max" || op == "min";
    int rank = int(r.between(0, 4));
    bool whole = op != "logsumexp" && r.chance(0.2);
    int axis = rank == 0 ? int(r.between(-1, 0)) : int(r.between(-rank, rank - 1));
    bool keep = r.chance(0.5);
    // max, min and logsumexp of nothing have no value (both refuse); sum and mean of nothing are 0 and nan.
    Shape s = random_shape(r, rank, !extremum && op != "logsumexp");
    Arg x = b.input(s, Values::normal, !extremum);
    c.sum_of_products = op == "sum" || op == "mean";
    if (whole) {
        c.f = [x, op](const Xs& xs) {
            Tensor v = x.get(xs);
            return op == "sum" ? fx::sum(v) : op == "mean" ? fx::mean(v) : op == "max" ? fx::max(v) : fx::min(v);
        };
        c.torch = "torch." + op + "(" + x.py + ")";
        return;
    }
    double scale = r.pick(std::vector<double>{1, 30});
    c.f = [x, op, axis, keep, scale](const Xs& xs) {
        Tensor v = x.get(xs);
        if (op == "sum") return fx::sum(v, axis, keep);
        if (op == "mean") return fx::mean(v, axis, keep);
        if (op == "max") return fx::max(v, axis, keep);
        if (op == "min") return fx::min(v, axis, keep);
        return fx::logsumexp(v * scale, axis, keep);
    };
    std::string args = std::to_string(axis) + ", keepdim=" + (keep ? "True" : "False");
    if (op == "logsumexp") c.torch = "torch.logsumexp(" + x.py + " * " + num(scale) + ", " + args + ")";
    else if (extremum) c.torch = "torch." + op + "(" + x.py + ", " + args + ").values";
    else c.torch = "torch." + op + "(" + x.py + ", " + args + ")";
}

void softmax(Rng& r, DiffConfig& c, Builder& b) {
    int rank = int(r.between(1, 3));
    Shape s = random_shape(r, rank, true);
    int axis = int(r.between(-rank, rank - 1));
    double scale = r.pick(std::vector<double>{1, 10, 100, 1e4});
    double offset = r.pick(std::vector<double>{0, 0, -1e4, 1e4});  // logits near ±1e4 lose digits if done naively
    bool log = r.chance(0.5);
    // Broadcast along the softmax axis, the input's gradient is a sum that cancels exactly, so both
    // answers are rounding noise times the scale (up to 1e4): no broadcast views.
    Arg x = b.input(s, Values::normal, false);
    c.f = [x, axis, scale, offset, log](const Xs& xs) {
        Tensor v = x.get(xs) * scale + offset;
        return log ? fx::logsoftmax(v, axis) : fx::softmax(v, axis);
    };
    c.torch = std::string(log ? "torch.log_softmax(" : "torch.softmax(") + x.py + " * " + num(scale) + " + " +
              num(offset) + ", " + std::to_string(axis) + ")";
    // The gradient at z: log-softmax's w - s sum(w), softmax's s (w - sum(s w)), sums along the axis
    // (K its length).
    std::string s_of_z = "torch.softmax(z, " + std::to_string(axis) + ")",
                sum = ".sum(" + std::to_string(axis) + ", keepdim=True)";
    c.terms_at = x.py + " * " + num(scale) + " + " + num(offset);
    c.gradient_terms = "z.shape[" + std::to_string(axis) + "] * " +
                       (log ? "(w.abs() + " + s_of_z + " * w.abs()" + sum + ")"
                            : s_of_z + " * (w.abs() + (" + s_of_z + " * w.abs())" + sum + ")");
}

void matmul(Rng& r, DiffConfig& c, Builder& b) {
    std::int64_t hi = r.chance(0.2) ? 40 : 4;  // sometimes past the kernel's tiles
    std::int64_t m = dim(r, true, 1, hi), k = dim(r, true, 1, hi), n = dim(r, true, 1, hi);
    int form = int(r.between(0, 4));
    Shape a, w;
    if (form == 0) a = {k}, w = {k};
    if (form == 1) a = {m, k}, w = {k};
    if (form == 2) a = {k}, w = {k, n};
    if (form >= 3) {  // batched, the batch axes broadcast
        Shape batch = random_shape(r, int(r.between(1, 2)), false);
        Shape ba = batch, bw = batch;
        for (std::size_t i = 0; i < batch.size(); ++i) {
            if (r.chance(0.3)) ba[i] = 1;
            if (r.chance(0.3)) bw[i] = 1;
        }
        if (r.chance(0.3)) bw.erase(bw.begin());
        a = ba, w = bw;
        a.insert(a.end(), {m, k});
        w.insert(w.end(), {k, n});
    }
    Arg x = b.input(a), y = b.input(w);
    c.f = [x, y](const Xs& xs) { return fx::matmul(x.get(xs), y.get(xs)); };
    c.sum_of_products = true;
    c.torch = "torch.matmul(" + x.py + ", " + y.py + ")";
}

// Spatial sizes of at least `need` (the output is then at least one cell).
std::int64_t spatial(Rng& r, std::int64_t need) { return std::max<std::int64_t>(1, need) + r.between(0, 4); }

void conv(Rng& r, DiffConfig& c, Builder& b) {
    std::int64_t g = r.between(1, 3), ci = r.between(1, 2), co = r.between(1, 2), n = r.between(1, 2);
    if (r.chance(0.2)) ci = r.between(3, 9), co = r.between(3, 9);  // sometimes wider, as models are
    std::int64_t k[2], s[2], p[2], d[2], hw[2];
    for (int i = 0; i < 2; ++i) {
        k[i] = r.between(1, 3), s[i] = r.between(1, 3), d[i] = r.between(1, 2), p[i] = r.between(0, 2);
        hw[i] = spatial(r, d[i] * (k[i] - 1) + 1 - 2 * p[i]);
    }
    Arg x = b.input({n, g * ci, hw[0], hw[1]}), w = b.input({g * co, ci, k[0], k[1]});
    fx::Conv2dOptions o{{s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]}, g};
    c.f = [x, w, o](const Xs& xs) { return fx::conv2d(x.get(xs), w.get(xs), o); };
    c.sum_of_products = true;
    // PyTorch 1.13's slow_conv2d refuses the gradient of a non-contiguous weight ("grad_weight must
    // be contiguous"), a limit of its own: its copy of the weight is made contiguous, fluxion's is not.
    c.torch = "F.conv2d(" + x.py + ", " + w.py + ".contiguous(), stride=" + pair(s[0], s[1]) +
              ", padding=" + pair(p[0], p[1]) + ", dilation=" + pair(d[0], d[1]) + ", groups=" + std::to_string(g) +
              ")";
}

void conv_transpose(Rng& r, DiffConfig& c, Builder& b) {
    std::int64_t g = r.between(1, 3), ci = r.between(1, 2), co = r.between(1, 2), n = r.between(1, 2);
    std::int64_t k[2], s[2], p[2], d[2], op[2], hw[2];
    for (int i = 0; i < 2; ++i) {
        k[i] = r.between(1, 3), s[i] = r.between(1, 3), d[i] = r.between(1, 2);
        op[i] = r.between(0, std::max(s[i], d[i]) - 1);  // PyTorch's rule: below the stride or the dilation
        hw[i] = r.between(1, 4);
        // padding may take back at most what the kernel and output_padding add
        std::int64_t full = (hw[i] - 1) * s[i] + d[i] * (k[i] - 1) + op[i] + 1;
        p[i] = std::min<std::int64_t>(r.between(0, 2), std::min((full - 1) / 2, d[i] * (k[i] - 1)));
    }
    Arg x = b.input({n, g * ci, hw[0], hw[1]}), w = b.input({g * ci, co, k[0], k[1]});
    fx::Conv2dOptions o{{s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]}, g};
    std::vector<std::int64_t> opad = {op[0], op[1]};
    c.f = [x, w, o, opad](const Xs& xs) { return fx::conv_transpose2d(x.get(xs), w.get(xs), o, opad); };
    c.sum_of_products = true;
    c.torch = "F.conv_transpose2d(" + x.py + ", " + w.py + ", stride=" + pair(s[0], s[1]) +
              ", padding=" + pair(p[0], p[1]) + ", output_padding=" + pair(op[0], op[1]) +
              ", groups=" + std::to_string(g) + ", dilation=" + pair(d[0], d[1]) + ")";
}

void pool(Rng& r, DiffConfig& c, Builder& b) {
    bool max = r.chance(0.5);
    // A window holding several NaNs gives the gradient to its first in fluxion (src/cpu/pool.cpp),
    // to its last in PyTorch: a tie, as in ops.hpp's notes, so max pooling sees finite values.
    if (max) b.finite_only();
    std::int64_t k[2], s[2], p[2], hw[2];
    for (int i = 0; i < 2; ++i) {
        k[i] = r.between(1, 3), s[i] = r.between(1, 3), p[i] = r.between(0, k[i] / 2);  // PyTorch's bound
        hw[i] = spatial(r, k[i] - 2 * p[i]);
    }
    Arg x = b.input({r.between(1, 2), r.between(1, 3), hw[0], hw[1]}, Values::normal, !max);
    fx::Pool2dOptions o{{k[0], k[1]}, {s[0], s[1]}, {p[0], p[1]}};
    c.f = [x, o, max](const Xs& xs) { return max ? fx::maxpool2d(x.get(xs), o) : fx::meanpool2d(x.get(xs), o); };
    c.sum_of_products = !max;
    c.torch = std::string(max ? "F.max_pool2d(" : "F.avg_pool2d(") + x.py + ", " + pair(k[0], k[1]) +
              ", stride=" + pair(s[0], s[1]) + ", padding=" + pair(p[0], p[1]) + ")";
}

void loss(Rng& r, DiffConfig& c, Builder& b) {
    static const std::vector<std::string> ops = {"mse", "mae", "huber", "logitce", "logitbce"};
    const std::string& op = r.pick(ops);
    // At a NaN difference PyTorch's huber_loss kernel gives the gradient NaN, its abs and clamp (of
    // which fluxion's is made) give 0; PyTorch is not consistent there, so huber sees finite values.
    if (op == "huber") b.finite_only();
    fx::Agg agg = r.pick(std::vector<fx::Agg>{fx::Agg::mean, fx::Agg::sum, fx::Agg::none});
    std::string reduction = agg == fx::Agg::mean ? "'mean'" : agg == fx::Agg::sum ? "'sum'" : "'none'";
    Shape s = {r.between(1, 4), r.between(1, 5)};
    bool targets_unit = op == "logitce" || op == "logitbce";
    Arg x = b.input(s), y = b.input(s, targets_unit ? Values::unit : Values::normal);
    double delta = double(r.between(1, 8)) / 4;
    fx::LossOptions o{.agg = agg, .delta = delta};
    c.f = [x, y, o, op](const Xs& xs) {
        Tensor a = x.get(xs), t = y.get(xs);
        if (op == "mse") return fx::mse(a, t, o);
        if (op == "mae") return fx::mae(a, t, o);
        if (op == "huber") return fx::huber_loss(a, t, o);
        if (op == "logitce") return fx::logitcrossentropy(a, t, o);
        return fx::logitbinarycrossentropy(a, t, o);
    };
    std::string xy = x.py + ", " + y.py;
    if (op == "mse") c.torch = "F.mse_loss(" + xy + ", reduction=" + reduction + ")";
    if (op == "mae") c.torch = "F.l1_loss(" + xy + ", reduction=" + reduction + ")";
    if (op == "huber") c.torch = "F.huber_loss(" + xy + ", reduction=" + reduction + ", delta=" + num(delta) + ")";
    if (op == "logitce")
        c.torch = "F.cross_entropy(" + xy + ", reduction=" + reduction + ")";  // probabilities as targets
    if (op == "logitbce") c.torch = "F.binary_cross_entropy_with_logits(" + xy + ", reduction=" + reduction + ")";
}

// Joining and indexing: gradients that split (concat, stack, where) or accumulate (repeated indices).
void indexing(Rng& r, DiffConfig& c, Builder& b) {
    int form = int(r.between(0, 3));
    Shape s = random_shape(r, int(r.between(1, 3)), true);
    int rank = int(s.size()), axis = int(r.between(-rank, rank - 1));
    if (form <= 1) {
        Shape t = s;
        if (form == 0) t[std::size_t(axis < 0 ? axis + rank : axis)] = dim(r, true);
        Arg x = b.input(s), y = b.input(t);
        bool cat = form == 0;
        c.f = [x, y, axis, cat](const Xs& xs) {
            return cat ? fx::concat({x.get(xs), y.get(xs)}, axis) : fx::stack({x.get(xs), y.get(xs)}, axis);
        };
        c.torch = std::string(cat ? "torch.cat([" : "torch.stack([") + x.py + ", " + y.py + "], " +
                  std::to_string(axis) + ")";
    } else if (form == 2) {
        std::int64_t size = s[std::size_t(axis < 0 ? axis + rank : axis)];
        std::vector<std::int64_t> index(std::size_t(size == 0 ? 0 : r.between(0, 5)));
        for (auto& i : index) i = r.between(0, size - 1);
        Arg x = b.input(s);
        c.f = [x, axis, index](const Xs& xs) {
            Tensor v = x.get(xs);
            return fx::index_select(v, axis, fx::tensor(index, {std::int64_t(index.size())}));
        };
        c.torch = "torch.index_select(" + x.py + ", " + std::to_string(axis) + ", torch.tensor([" + join(index) +
                  "], dtype=torch.int64))";
    } else {
        Arg p = b.input(s), q = b.input(s), x = b.input(s), y = b.input(s);
        c.f = [p, q, x, y](const Xs& xs) { return fx::where(p.get(xs) > q.get(xs), x.get(xs), y.get(xs)); };
        c.torch = "torch.where(" + p.py + " > " + q.py + ", " + x.py + ", " + y.py + ")";
    }
}

// Views taken inside the tape, one after another, on a contiguous input.
void views(Rng& r, DiffConfig& c, Builder& b) {
    Shape s = random_shape(r, 3, true);
    Arg x = b.input(s);
    int form = int(r.between(0, 3));
    c.sum_of_products = true;
    if (form == 0) {  // permute, then a reshape that must copy
        c.f = [x](const Xs& xs) { return x.get(xs).permute({2, 0, 1}).reshape({-1}) * 2.0; };
        c.torch = x.py + ".permute(2, 0, 1).reshape(-1) * 2.0";
    } else if (form == 1) {  // a strided slice of a permutation, flattened
        std::int64_t step = r.between(1, 3), stop = s[1];
        c.f = [x, step, stop](const Xs& xs) {
            return x.get(xs).permute({1, 2, 0}).slice(0, 0, stop, step).flatten(1) * 3.0;
        };
        c.torch =
            x.py + ".permute(1, 2, 0)[0:" + std::to_string(stop) + ":" + std::to_string(step) + "].flatten(1) * 3.0";
    } else if (form == 2) {  // select, then broadcast against the input itself
        std::int64_t index = s[0] == 0 ? 0 : r.between(0, s[0] - 1);
        if (s[0] == 0) {
            c.f = [x](const Xs& xs) { return x.get(xs) * 1.5; };
            c.torch = x.py + " * 1.5";
            return;
        }
        c.f = [x, index](const Xs& xs) {
            Tensor v = x.get(xs);
            return v * v.select(0, index).unsqueeze(0);
        };
        c.torch = x.py + " * " + x.py + "[" + std::to_string(index) + "].unsqueeze(0)";
    } else {  // transpose, then matmul with itself
        c.f = [x](const Xs& xs) {
            Tensor v = x.get(xs);
            return fx::matmul(fx::transpose(v), v);
        };
        c.torch = "torch.matmul(" + x.py + ".transpose(-2, -1), " + x.py + ")";
    }
}

// Short chains of ops, as models use them.
void composition(Rng& r, DiffConfig& c, Builder& b) {
    int form = int(r.between(0, 2));
    if (form == 0) {  // a dense layer, tanh, softmax
        std::int64_t n = r.between(1, 4), in = r.between(1, 5), out = r.between(1, 5);
        Arg x = b.input({n, in}), w = b.input({out, in}), bias = b.input({out});
        c.f = [x, w, bias](const Xs& xs) {
            return fx::softmax(fx::tanh(fx::linear(x.get(xs), w.get(xs), bias.get(xs))));
        };
        c.torch = "torch.softmax(torch.tanh(F.linear(" + x.py + ", " + w.py + ", " + bias.py + ")), -1)";
    } else if (form == 1) {  // conv, bias, swish, mean pooling
        std::int64_t ci = r.between(1, 3), co = r.between(1, 3), h = r.between(3, 6), w0 = r.between(3, 6);
        Arg x = b.input({r.between(1, 2), ci, h, w0}), w = b.input({co, ci, 3, 3}), bias = b.input({co});
        c.f = [x, w, bias, co](const Xs& xs) {
            Tensor y = fx::conv2d(x.get(xs), w.get(xs), {.padding = {1, 1}}) + bias.get(xs).reshape({1, co, 1, 1});
            return fx::meanpool2d(fx::swish(y), {.window = {2, 2}});
        };
        c.torch = "F.avg_pool2d(F.silu(F.conv2d(" + x.py + ", " + w.py + ", padding=1) + " + bias.py +
                  ".reshape(1, -1, 1, 1)), 2)";
    } else {  // a loss over a log-softmax of a product
        std::int64_t n = r.between(1, 4), k = r.between(1, 4), classes = r.between(2, 5);
        Arg x = b.input({n, k}), w = b.input({k, classes}), y = b.input({n, classes}, Values::unit);
        c.f = [x, w, y](const Xs& xs) {
            return fx::mean(fx::sum(y.get(xs) * fx::logsoftmax(fx::matmul(x.get(xs), w.get(xs))), 1) * -1.0);
        };
        c.torch = "torch.mean(torch.sum(" + y.py + " * torch.log_softmax(torch.matmul(" + x.py + ", " + w.py +
                  "), -1), 1) * -1.0)";
    }
}

}  // namespace

std::string DiffConfig::repro() const {
    std::ostringstream s;
    s << family << " " << fx::name(dtype) << ": " << torch << " with";
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        static const char* kinds[] = {"normal", "positive", "away from zero", "in (0.05, 0.95)", "with nan/inf"};
        s << (i ? "," : "") << " x" << i << " " << fx::to_string(shapes[i]) << " " << kinds[int(values[i])] << " as "
          << views[i];
    }
    return s.str();
}

DiffConfig differential_config(std::uint64_t seed, std::uint64_t index) {
    Rng r{std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + index)};
    using Gen = void (*)(Rng&, DiffConfig&, Builder&);
    static const std::vector<std::pair<const char*, Gen>> families = {
        {"unary", unary},
        {"binary", binary},
        {"reduction", reduction},
        {"softmax", softmax},
        {"matmul", matmul},
        {"conv2d", conv},
        {"conv_transpose2d", conv_transpose},
        {"pool", pool},
        {"loss", loss},
        {"indexing", indexing},
        {"views", views},
        {"composition", composition},
    };
    const auto& [family, gen] = r.pick(families);
    DiffConfig c;
    c.family = family;
    c.dtype = r.chance(0.5) ? fx::DType::f64 : fx::DType::f32;
    bool views_ok = c.family != "views";
    // nan and ±inf where the op is elementwise or a reduction: they must propagate as in PyTorch
    bool nonfinite_ok = c.family == "unary" || c.family == "binary" || c.family == "reduction" ||
                        c.family == "softmax" || c.family == "indexing" || c.family == "pool" || c.family == "loss";
    Builder b(r, c, views_ok, nonfinite_ok);
    gen(r, c, b);
    return c;
}

}  // namespace fx_test
