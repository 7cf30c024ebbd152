// test_device.cpp — devices against the TestHost plugins: discovery, selection (variable,
// preference file, priority, cpu-kind devices), Flux's vendor names, printing, capabilities, moves
// of tensors and structures, mixed-device errors. Besides TestHost (priority 0, two devices, device 1
// of vendor AMD here) this binary sees TestHostHigh (priority 10) and TestHostBroken (20, never
// functional), built from the same source (tests/CMakeLists.txt).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>  // getpid

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "fluxion/fluxion.hpp"
#include "vulkan_environment.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const fx::Device host0{"TestHost", 0}, host1{"TestHost", 1}, high0{"TestHostHigh", 0};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What `f` writes to stderr; the capture ends when `f` throws, too.
template <class F> std::string stderr_of(F&& f) {
    testing::internal::CaptureStderr();
    try {
        f();
    } catch (...) {
        testing::internal::GetCapturedStderr();
        throw;
    }
    return testing::internal::GetCapturedStderr();
}

template <class T> std::string printed(const T& value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// The message of the DeviceError `f` throws ("" and a failure if it throws none).
template <class F> std::string device_error(F&& f) {
    try {
        f();
    } catch (const fx::DeviceError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected fx::DeviceError";
    return "";
}

// A fresh selection (not the cached one), its log discarded.
fx::Device selected() {
    fx::Device d;
    stderr_of([&] { d = fx::get_device({.verbose = true}); });
    return d;
}

TEST(Device, PluginsAreListedByPriorityThenFluxsVendorNamesThenTheCpu) {
    const std::vector<std::string> names = fx::supported_devices();
    const std::vector<std::string> want{"TestHostBroken", "TestHostHigh", "TestHost", "AMDGPU", "Metal", "CPU"};
    std::vector<std::string> got;  // a CUDA plugin, where one is built, is among them too
    std::copy_if(names.begin(), names.end(), std::back_inserter(got),
                 [&](const std::string& n) { return std::find(want.begin(), want.end(), n) != want.end(); });
    EXPECT_EQ(got, want);
    EXPECT_TRUE(fx::functional("TestHost"));
    EXPECT_TRUE(fx::functional("testhost")) << "names are matched in any letter case";
    EXPECT_TRUE(fx::functional("CPU"));
    std::string why;
    EXPECT_FALSE(fx::functional("NoSuchBackend", &why));
    EXPECT_TRUE(contains(why, "libfluxion-*.so") && contains(why, FLUXION_TEST_DEVICE_PLUGIN_DIR)) << why;
    EXPECT_FALSE(fx::functional("TestHostBroken", &why));
    EXPECT_EQ(why, "TestHostBroken is built broken, to test the reasons given");
}

TEST(Device, DevicesAreListedWithNamesVendorsKindsAndMemory) {
    auto ds = fx::devices("TestHost");
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_EQ(ds[1].device, host1);
    EXPECT_EQ(ds[1].name, "TestHost device 1");
    EXPECT_EQ(ds[0].vendor, "TestHost");
    EXPECT_EQ(ds[1].vendor, "AMD");
    EXPECT_EQ(ds[0].kind, fx::DeviceKind::virtual_gpu);
    EXPECT_EQ(ds[0].total_memory, std::size_t{1} << 30);
    auto cpu = fx::devices("CPU");
    ASSERT_EQ(cpu.size(), 1u);
    EXPECT_EQ(cpu[0].kind, fx::DeviceKind::cpu);
    EXPECT_TRUE(fx::devices("TestHostBroken").empty());
    EXPECT_TRUE(fx::devices("NoSuchBackend").empty());
}

TEST(Device, GetDeviceByIndexAndClearErrorsNamingTheDeviceAskedFor) {
    EXPECT_EQ(fx::get_device("TestHost", 1), host1);
    EXPECT_TRUE(contains(device_error([] { fx::get_device("TestHost", 5); }), "TestHost device 5 does not exist"));
    const std::string broken = device_error([] { fx::get_device("TestHostBroken", 3); });
    EXPECT_TRUE(contains(broken, "TestHostBroken:3 is not usable: TestHostBroken is built broken")) << broken;
    const std::string unknown = device_error([] { fx::get_device("NoSuchBackend", 2); });
    EXPECT_TRUE(contains(unknown, "NoSuchBackend:2 is unknown")) << unknown;
    EXPECT_TRUE(contains(device_error([] { fx::get_device("CPU", 1); }), "only index 0"));
}

TEST(Device, DefaultIsTheFunctionalBackendOfHighestPriorityAndTheLogSaysWhy) {
    fx::Device d;
    const std::string log = stderr_of([&] { d = fx::get_device({.verbose = true}); });
    EXPECT_EQ(d, high0);
    EXPECT_TRUE(contains(log, "Backend TestHostBroken passed over: TestHostBroken is built broken")) << log;
    EXPECT_TRUE(contains(log, "Using TestHostHigh:0: TestHostHigh is the functional backend of highest priority (10)"))
        << log;
    EXPECT_TRUE(contains(log, "Backend TestHost passed over: its priority, 0, is lower than TestHostHigh's")) << log;
    EXPECT_EQ(fx::get_device(), high0) << "the cached choice is the same";
}

TEST(Device, CpuKindDevicesAreSkippedUnlessNamed) {
    setenv("FLUXION_TESTHOST_KIND", "cpu", 1);  // every TestHost device now says it is a CPU (as lavapipe)
    fx::Device d;
    const std::string log = stderr_of([&] { d = fx::get_device({.verbose = true}); });
    EXPECT_TRUE(d.is_cpu()) << d.str();
    EXPECT_TRUE(contains(log, "Backend TestHostHigh passed over: cpu-kind device skipped")) << log;
    EXPECT_TRUE(contains(log, "FLUXION_GPU_BACKEND=TestHost ")) << log;
    EXPECT_EQ(fx::get_device("TestHost"), host0) << "named, a cpu-kind device is used";
    setenv("FLUXION_GPU_BACKEND", "TestHost", 1);
    EXPECT_EQ(selected(), host0);
    unsetenv("FLUXION_GPU_BACKEND");
    unsetenv("FLUXION_TESTHOST_KIND");
    EXPECT_EQ(selected(), high0);
}

TEST(Device, EnvironmentVariableWinsAndBadOnesFallBackWithAWarning) {
    setenv("FLUXION_GPU_BACKEND", "CPU", 1);
    EXPECT_TRUE(selected().is_cpu());
    setenv("FLUXION_GPU_BACKEND", "TestHost", 1);
    EXPECT_EQ(selected(), host0) << "a lower priority, named";
    for (const char* bad : {"NoSuchBackend", "TestHostBroken", "Metal"}) {
        setenv("FLUXION_GPU_BACKEND", bad, 1);
        fx::Device d;
        const std::string log = stderr_of([&] { d = fx::get_device({.verbose = true}); });
        EXPECT_EQ(d, high0) << bad;
        EXPECT_TRUE(contains(log, "Warning: FLUXION_GPU_BACKEND asks for \"" + std::string(bad))) << log;
    }
    unsetenv("FLUXION_GPU_BACKEND");
}

TEST(Device, FluxsVendorNamesServeThatVendorsDevicesOfAnyBackend) {
    // main() set FLUXION_TESTHOST_VENDOR=AMD: device 1 of each TestHost plugin reports vendor AMD,
    // device 0 does not; TestHostHigh, of the higher priority, serves the name.
    EXPECT_TRUE(fx::functional("AMDGPU"));
    const fx::Device amd = fx::get_device("AMDGPU");
    EXPECT_EQ(amd, (fx::Device{"AMDGPU", 1})) << "AMDGPU:i is device i of the backend serving AMD";
    EXPECT_EQ(printed(amd), "AMDGPU:1 (TestHostHigh: TestHostHigh device 1)");
    const std::string not_amd = device_error([] { fx::get_device("AMDGPU", 0); });
    EXPECT_TRUE(contains(not_amd, "TestHostHigh:0 is not a GPU of vendor AMD; those are AMDGPU:1")) << not_amd;
    auto listed = fx::devices("AMDGPU");
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].device, amd);
    EXPECT_EQ(listed[0].vendor, "AMD");
    Tensor x = fx::arange(0.0, 4.0) | amd;
    EXPECT_EQ(x.device(), amd);
    EXPECT_EQ((fx::square(x) | host1 | fx::cpu).to_vector<float>(), (std::vector<float>{0, 1, 4, 9}));
    std::string why;
    EXPECT_FALSE(fx::functional("Metal", &why));
    EXPECT_TRUE(contains(why, "no functional backend reports a GPU of vendor Apple")) << why;
    EXPECT_TRUE(contains(device_error([] { fx::get_device("Metal"); }), "Metal:0 is not usable"));
    EXPECT_TRUE(fx::devices("Metal").empty());
}

TEST(Device, EverythingAUserIsHandedPrints) {
    EXPECT_EQ(printed(host1), "TestHost:1 (TestHost device 1)");
    EXPECT_TRUE(contains(printed(fx::get_device()), "TestHostHigh:0 (TestHostHigh device 0)"));
    EXPECT_EQ(printed(fx::Device{}).rfind("CPU (", 0), 0u) << printed(fx::Device{});
    EXPECT_EQ(printed(fx::Device{"NoSuchBackend", 2}), "NoSuchBackend:2") << "a device not usable prints its name";
    EXPECT_EQ(printed(fx::devices("TestHost")[1]), "TestHost:1: TestHost device 1 (AMD, virtual GPU, 1.00 GiB, 1.00 GiB free)");
    EXPECT_EQ(printed(fx::DeviceKind::integrated_gpu), "integrated GPU");
    EXPECT_STREQ(fx::name(fx::Op::conv2d_backward_weight), "conv2d_backward_weight");
}

TEST(Device, SupportsSaysWhatADeviceLacksAndWhy) {
    std::string why;
    EXPECT_TRUE(fx::supports(host1, fx::Op::gemm, fx::DType::f32, &why));
    EXPECT_TRUE(why.empty()) << why;
    EXPECT_FALSE(fx::supports(host1, fx::Op::gemm, fx::DType::i32, &why));
    EXPECT_EQ(why, "TestHost:1: gemm has no kernel for i32 (supported: f32, f64, f16, bf16)");
    EXPECT_FALSE(fx::supports(fx::Device{}, fx::Op::softmax, fx::DType::i64, &why));
    EXPECT_EQ(why, "CPU:0: softmax has no kernel for i64 (supported: f32, f64, f16, bf16)");
    EXPECT_TRUE(fx::supports(fx::Device{}, fx::Op::cast, fx::DType::bf16));
    EXPECT_THROW(fx::supports(fx::Device{"TestHostBroken", 0}, fx::Op::fill, fx::DType::f32), fx::DeviceError);
}

// A temporary working directory holding LocalPreferences.toml with `text`, for one test. One per
// process: ctest runs these tests in parallel processes, which must not share the file.
struct PreferenceFolder {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("fluxion_pref_test_" + std::to_string(getpid()));
    std::filesystem::path old = std::filesystem::current_path();
    explicit PreferenceFolder(const std::string& text) {
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        std::filesystem::current_path(dir);
        if (!text.empty()) std::ofstream(dir / "LocalPreferences.toml") << text;
    }
    ~PreferenceFolder() {
        std::filesystem::current_path(old);
        std::filesystem::remove_all(dir);
    }
    std::string text() const {
        std::ifstream in(dir / "LocalPreferences.toml");
        return {std::istreambuf_iterator<char>(in), {}};
    }
};

TEST(Device, PreferenceFileIsWrittenKeepingOtherKeysAndRead) {
    const fx::Device before = fx::get_device();
    ASSERT_EQ(before, high0);
    PreferenceFolder folder("# mine\n[other]\nkey = 1\n[fluxion]\ngpu_backend = \"TestHostHigh\"\nkeep = true\n");
    stderr_of([] { fx::gpu_backend("CPU"); });
    const std::string text = folder.text();
    EXPECT_TRUE(contains(text, "[other]\nkey = 1")) << "other sections are kept: " << text;
    EXPECT_TRUE(contains(text, "[fluxion]\ngpu_backend = \"CPU\"\nkeep = true")) << "and other keys: " << text;
    EXPECT_EQ(fx::get_device(), before) << "the choice made at first use holds until restart";
    EXPECT_TRUE(selected().is_cpu()) << "a fresh selection reads the preference";
    stderr_of([] { fx::gpu_backend("TestHost"); });
    EXPECT_FALSE(contains(folder.text(), "\"CPU\"")) << "replaced, not appended: " << folder.text();
    EXPECT_EQ(selected(), host0);
    stderr_of([] { fx::gpu_backend("AMDGPU"); });
    EXPECT_EQ(selected(), (fx::Device{"AMDGPU", 1})) << "Flux's vendor names are preferences too";
}

TEST(Device, PreferenceFileIsCreatedWithFluxsLayout) {
    PreferenceFolder folder("");
    stderr_of([] { fx::gpu_backend("TestHost"); });
    EXPECT_EQ(folder.text(), "[fluxion]\ngpu_backend = \"TestHost\"\n");
}

TEST(Device, OnlyTheGpuBackendKeyIsThePreference) {
    PreferenceFolder folder("[fluxion]\ngpu_backend_old = \"CPU\"\n[elsewhere]\ngpu_backend = \"CPU\"\n");
    EXPECT_EQ(selected(), high0);
}

// Found by fuzz/fuzz_preferences.cpp: toml++ 3.3 writes such keys without quotes.
TEST(Device, PreferenceFileThatCannotBeRewrittenIsLeftAsItIs) {
    const std::string text = "\"it's\" = 1\n\"a\\tb\" = 2\n[fluxion]\ngpu_backend = \"CPU\"\n";
    PreferenceFolder folder(text);
    try {
        stderr_of([] { fx::gpu_backend("TestHost"); });
        ADD_FAILURE() << "expected fx::IOError";
    } catch (const fx::IOError& e) {
        EXPECT_TRUE(contains(e.what(), "cannot rewrite LocalPreferences.toml")) << e.what();
        EXPECT_TRUE(contains(e.what(), "left as it is")) << e.what();
    }
    EXPECT_EQ(folder.text(), text) << "the readable file is not replaced";
    EXPECT_TRUE(selected().is_cpu()) << "and still reads";
}

TEST(Device, MalformedPreferenceFileIsAClearError) {
    const std::string broken = "[fluxion]\n\ngpu_backend = \"CPU\n";
    PreferenceFolder folder(broken);
    for (const auto& call : std::vector<std::function<void()>>{[] { (void)fx::get_device({.verbose = true}); },
                                                               [] { fx::gpu_backend("CPU"); }}) {
        try {
            stderr_of(call);
            ADD_FAILURE() << "expected fx::IOError";
        } catch (const fx::IOError& e) {
            const std::string m = e.what();
            EXPECT_TRUE(contains(m, "LocalPreferences.toml:3: malformed TOML: ")) << m;
        }
    }
    EXPECT_EQ(folder.text(), broken) << "a malformed file is not overwritten";
    std::ofstream(folder.dir / "LocalPreferences.toml") << "[fluxion]\ngpu_backend = 3\n";
    try {
        selected();
        ADD_FAILURE() << "expected fx::IOError";
    } catch (const fx::IOError& e) {
        EXPECT_TRUE(contains(e.what(), "LocalPreferences.toml:2: [fluxion] gpu_backend must be a string")) << e.what();
    }
}

TEST(Device, TensorsMoveAndComeBackUnchanged) {
    Tensor x = fx::arange(0.0, 6.0).reshape({2, 3});
    Tensor y = x | host0;
    EXPECT_EQ(y.device(), host0);
    EXPECT_NE(y.data_ptr(), x.data_ptr());
    Tensor z = y | host1;  // between two devices of one backend
    EXPECT_EQ(z.device(), host1);
    Tensor back = z | fx::cpu;
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ((x | fx::cpu).data_ptr(), x.data_ptr()) << "moving to where it is already is free";
}

TEST(Device, GpuMovesToTheChosenDeviceAndRecursesThroughStructures) {
    fx::Device chosen = fx::get_device();
    std::tuple<Tensor, std::vector<Tensor>, std::map<std::string, Tensor>> data{
        fx::ones({2}), {fx::zeros({3}), fx::ones({1})}, {{"a", fx::ones({4})}}};
    auto moved = data | fx::gpu;
    EXPECT_EQ(std::get<0>(moved).device(), chosen);
    EXPECT_EQ(std::get<1>(moved)[1].device(), chosen);
    EXPECT_EQ(std::get<2>(moved).at("a").device(), chosen);
    auto back = fx::cpu(moved);
    EXPECT_TRUE(std::get<2>(back).at("a").device().is_cpu());
    EXPECT_EQ(fx::gpu(3.5), 3.5) << "numbers pass through";
}

TEST(Device, OpsRunOnTheDeviceOfTheirArguments) {
    Tensor a = fx::tensor({1, 2, 3}) | host0, b = fx::tensor({10, 20, 30}) | host0;
    Tensor c = a * b + 1.0;
    EXPECT_EQ(c.device(), host0);
    EXPECT_EQ((c | fx::cpu).to_vector<float>(), (std::vector<float>{11, 41, 91}));
}

TEST(Device, MixedDevicesThrowNamingBothAndTheFix) {
    Tensor a = fx::ones({2}) | host0, b = fx::ones({2});
    try {
        (void)(a + b);
        FAIL() << "expected DeviceError";
    } catch (const fx::DeviceError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("add"), std::string::npos) << m;
        EXPECT_NE(m.find("TestHost:0"), std::string::npos) << m;
        EXPECT_NE(m.find("CPU"), std::string::npos) << m;
        EXPECT_NE(m.find("fx::gpu"), std::string::npos) << m;
    }
    EXPECT_THROW(fx::matmul(fx::ones({2, 2}) | host0, fx::ones({2, 2}) | host1), fx::DeviceError);
}

TEST(Device, ScalarAccessOnDevicesNeedsAllowscalar) {
    Tensor x = fx::arange(0.0, 4.0) | host0;
    EXPECT_THROW(x.at({2}), fx::DeviceError);
    EXPECT_EQ(fx::sum(x).item(), 6.0) << "item() is always allowed";
    fx::allowscalar(true);
    EXPECT_EQ(x.at({2}), 2.0);
    fx::allowscalar(false);
}

TEST(Device, GradientsFlowAcrossMoves) {
    Tensor w = fx::tensor({1, 2, 3});
    auto [g] = fx::gradient([](const Tensor& v) { return fx::sum(fx::square(v | host0)); }, w);
    EXPECT_TRUE(g.device().is_cpu());
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

// The synchronize calls device `device` of a TestHost plugin has received (the plugins count them),
// or -1 if the plugin is not loaded.
long synchronize_calls(const char* plugin, int device) {
    void* handle = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
    if (!handle) return -1;
    auto count = reinterpret_cast<long (*)(int)>(dlsym(handle, "testhost_synchronize_calls"));
    const long n = count ? count(device) : -1;
    dlclose(handle);
    return n;
}

TEST(Device, SynchronizeReachesTheDeviceNamedAndRefusesDevicesThatCannotRun) {
    constexpr const char* kTestHost = FLUXION_TEST_PLUGIN_DIR "/libfluxion-testhost.so";
    constexpr const char* kTestHostHigh = FLUXION_TEST_DEVICE_PLUGIN_DIR "/libfluxion-testhost-high.so";
    (void)fx::devices("TestHost"), (void)fx::devices("TestHostHigh");  // both loaded
    const long host0_before = synchronize_calls(kTestHost, 0), host1_before = synchronize_calls(kTestHost, 1),
               high0_before = synchronize_calls(kTestHostHigh, 0), high1_before = synchronize_calls(kTestHostHigh, 1);
    ASSERT_GE(host1_before, 0) << kTestHost << " is not loaded";
    ASSERT_GE(high0_before, 0) << kTestHostHigh << " is not loaded";
    fx::synchronize(host1);
    EXPECT_EQ(synchronize_calls(kTestHost, 1), host1_before + 1) << "TestHost:1 waits on TestHost's device 1";
    fx::synchronize();
    EXPECT_EQ(synchronize_calls(kTestHostHigh, 0), high0_before + 1) << "the default device, TestHostHigh:0";
    fx::synchronize(fx::Device{"AMDGPU", 1});
    EXPECT_EQ(synchronize_calls(kTestHostHigh, 1), high1_before + 1) << "AMDGPU:1 is TestHostHigh's device 1";
    const std::string unknown = device_error([] { fx::synchronize(fx::Device{"NoSuchBackend", 1}); });
    EXPECT_TRUE(contains(unknown, "unknown device NoSuchBackend:1")) << unknown;
    const std::string broken = device_error([] { fx::synchronize(fx::Device{"TestHostBroken", 0}); });
    EXPECT_TRUE(contains(broken, "TestHostBroken:0 is not usable")) << broken;
    const std::string not_amd = device_error([] { fx::synchronize(fx::Device{"AMDGPU", 0}); });
    EXPECT_TRUE(contains(not_amd, "TestHostHigh:0 is not a GPU of vendor AMD")) << not_amd;
    EXPECT_EQ(synchronize_calls(kTestHostHigh, 0), high0_before + 1) << "a refused device reached no backend";
    EXPECT_EQ(synchronize_calls(kTestHost, 0), host0_before) << "nothing named TestHost:0";
}

}  // namespace

int main(int argc, char** argv) {
    // Selection is tested among the TestHost plugins alone: a real GPU (CUDA's devices, a Vulkan
    // driver other than lavapipe, whose devices are cpu-kind and never chosen unnamed) is hidden.
    setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
    const std::string lavapipe = fx_test::lavapipe_manifest();
    setenv("VK_DRIVER_FILES", lavapipe.empty() ? FLUXION_BINARY_DIR "/no-such-driver.json" : lavapipe.c_str(), 1);
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR ":" FLUXION_TEST_DEVICE_PLUGIN_DIR, 1);
    setenv("FLUXION_TESTHOST_VENDOR", "AMD", 1);
    unsetenv("FLUXION_TESTHOST_KIND");
    unsetenv("FLUXION_GPU_BACKEND");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
