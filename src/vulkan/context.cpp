// context.cpp — creating the instance (with the validation layer on request), choosing the physical
// devices fluxion can use, and creating each logical device on first use.
#include "vulkan/context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "fluxion/error.hpp"
#include "vulkan/check.hpp"

namespace fluxion::vulkan {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::atomic<std::uint64_t> g_messages{0};
std::uint64_t g_messages_checked = 0;
std::mutex g_first_mutex;
std::string g_first_message;

// Mesa's drivers also log each error result they return, as a general message (lavapipe:
// "VK_ERROR_OUT_OF_DEVICE_MEMORY"). Out of memory is an answer fluxion expects and turns into
// fx::OutOfMemory, after which the device goes on working, so the driver's note of it is printed
// but not counted as a problem (the validation layer's own messages always are).
bool drivers_out_of_memory_note(VkDebugUtilsMessageTypeFlagsEXT types, const char* text) {
    if (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) return false;
    for (const char* result : {"VK_ERROR_OUT_OF_DEVICE_MEMORY", "VK_ERROR_OUT_OF_HOST_MEMORY"})
        if (std::strncmp(text, result, std::strlen(result)) == 0) return true;
    return false;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT types,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
    const char* text = data && data->pMessage ? data->pMessage : "(no message)";
    if (drivers_out_of_memory_note(types, text)) {
        std::fprintf(stderr, "[ fluxion Vulkan: the driver notes %s (fluxion raises fx::OutOfMemory)\n", text);
        return VK_FALSE;
    }
    std::fprintf(stderr, "[ fluxion Vulkan validation (%s): %s\n",
                 severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning", text);
    {
        std::lock_guard lock(g_first_mutex);
        if (g_first_message.empty()) g_first_message = text;
    }
    ++g_messages;
    return VK_FALSE;
}

bool env_on(const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
}

bool has_layer(const char* name) {
    std::uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> layers(n);
    vkEnumerateInstanceLayerProperties(&n, layers.data());
    return std::any_of(layers.begin(), layers.end(), [&](const auto& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool has_device_extension(VkPhysicalDevice d, const char* name) {
    std::uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateDeviceExtensionProperties(d, nullptr, &n, ext.data());
    return std::any_of(ext.begin(), ext.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

std::string driver_files() {
    const char* files = std::getenv("VK_DRIVER_FILES");
    if (!files) files = std::getenv("VK_ICD_FILENAMES");
    return files ? std::string(" (VK_DRIVER_FILES=") + files + ")" : std::string();
}

Probe make_probe() {
    Probe p;
    const bool validation = env_on("FLUXION_VULKAN_VALIDATION");
    if (validation && !has_layer(kValidationLayer)) {
        p.reason = "FLUXION_VULKAN_VALIDATION is set but the Vulkan validation layer is not installed "
                   "(apt-get install vulkan-validationlayers)";
        return p;
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "fluxion";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    const char* layers[] = {kValidationLayer};
    const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = enables;
    VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = on_message;
    if (validation) {
        info.enabledLayerCount = 1;
        info.ppEnabledLayerNames = layers;
        info.enabledExtensionCount = 1;
        info.ppEnabledExtensionNames = extensions;
        // The messenger chained here also reports on vkCreateInstance and vkDestroyInstance.
        features.pNext = &messenger;
        info.pNext = &features;
    }
    VkResult r = vkCreateInstance(&info, nullptr, &p.instance);
    if (r != VK_SUCCESS) {
        p.reason = std::string("vkCreateInstance failed with ") + result_name(r) +
                   (r == VK_ERROR_INCOMPATIBLE_DRIVER ? ": the Vulkan loader found no driver" : "") + driver_files();
        p.instance = VK_NULL_HANDLE;
        return p;
    }
    p.validation = validation;
    if (validation) {
        auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(p.instance, "vkCreateDebugUtilsMessengerEXT"));
        VkDebugUtilsMessengerEXT handle = VK_NULL_HANDLE;
        if (!create || create(p.instance, &messenger, nullptr, &handle) != VK_SUCCESS) {
            p.reason = "the Vulkan validation layer is installed but its debug messenger cannot be created";
            return p;
        }
    }
    std::uint32_t n = 0;
    r = vkEnumeratePhysicalDevices(p.instance, &n, nullptr);
    std::vector<VkPhysicalDevice> all(n);
    if (r == VK_SUCCESS && n) r = vkEnumeratePhysicalDevices(p.instance, &n, all.data());
    if (r != VK_SUCCESS || n == 0) {
        p.reason = std::string("the Vulkan loader found no device") +
                   (r != VK_SUCCESS ? std::string(" (vkEnumeratePhysicalDevices: ") + result_name(r) + ")" : "") +
                   driver_files();
        return p;
    }
    std::string skipped;
    for (VkPhysicalDevice d : all) {
        VkPhysicalDeviceProperties props{};
        vkGetPhysicalDeviceProperties(d, &props);
        std::uint32_t families = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(d, &families, nullptr);
        std::vector<VkQueueFamilyProperties> fam(families);
        vkGetPhysicalDeviceQueueFamilyProperties(d, &families, fam.data());
        const bool compute = std::any_of(fam.begin(), fam.end(), [](const auto& f) { return f.queueFlags & VK_QUEUE_COMPUTE_BIT; });
        VkPhysicalDeviceTimelineSemaphoreFeatures timeline{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
        VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        features2.pNext = &timeline;
        if (props.apiVersion >= VK_API_VERSION_1_2) vkGetPhysicalDeviceFeatures2(d, &features2);
        const char* missing = props.apiVersion < VK_API_VERSION_1_2 ? "Vulkan 1.2"
                              : !timeline.timelineSemaphore         ? "timeline semaphores"
                              : !compute                            ? "a compute queue"
                              : !has_device_extension(d, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)
                                  ? VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME
                                  : nullptr;
        if (missing)
            skipped += std::string(skipped.empty() ? "" : "; ") + props.deviceName + " lacks " + missing;
        else
            p.devices.push_back(d);
    }
    if (p.devices.empty()) p.reason = "no Vulkan device is usable: " + skipped;
    return p;
}

std::uint32_t memory_type(const VkPhysicalDeviceMemoryProperties& mem, VkMemoryPropertyFlags want, const std::string& label) {
    for (std::uint32_t i = 0; i < mem.memoryTypeCount; ++i)
        if ((mem.memoryTypes[i].propertyFlags & want) == want) return i;
    throw DeviceError(label + " has no memory type with property flags " + std::to_string(want));
}

void create_device(Context& c) {
    const Probe& p = probe();
    c.physical = p.devices[std::size_t(c.index)];
    vkGetPhysicalDeviceProperties(c.physical, &c.properties);
    // Tests lower the limit to reach the error for tensors larger than it (the real limit is 4 GiB on many drivers).
    if (const char* range = std::getenv("FLUXION_VULKAN_DEBUG_MAX_BUFFER_RANGE"))
        c.properties.limits.maxStorageBufferRange =
            std::min<std::uint32_t>(c.properties.limits.maxStorageBufferRange, std::uint32_t(std::strtoul(range, nullptr, 10)));
    vkGetPhysicalDeviceMemoryProperties(c.physical, &c.memory);
    VkPhysicalDeviceFeatures supported{};
    vkGetPhysicalDeviceFeatures(c.physical, &supported);
    c.float64 = supported.shaderFloat64;
    c.int64 = supported.shaderInt64;
    VkPhysicalDevice16BitStorageFeatures storage16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features2.pNext = &storage16;
    vkGetPhysicalDeviceFeatures2(c.physical, &features2);
    // Tests hide the feature to run the packed variants that devices without it use.
    c.storage16 = storage16.storageBuffer16BitAccess && !std::getenv("FLUXION_VULKAN_DEBUG_NO_16BIT_STORAGE");
    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props2.pNext = &subgroup;
    vkGetPhysicalDeviceProperties2(c.physical, &props2);
    c.subgroup_size = std::max(1u, subgroup.subgroupSize);
    c.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    // Up to 256 invocations, a whole number of subgroups, within the device's limits.
    const auto& lim = c.properties.limits;
    std::uint32_t wg = std::min({256u, lim.maxComputeWorkGroupInvocations, lim.maxComputeWorkGroupSize[0]});
    if (wg >= c.subgroup_size) wg -= wg % c.subgroup_size;
    c.workgroup_size = std::max(1u, wg);

    std::uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> fam(families);
    vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &families, fam.data());
    // A compute queue; one without graphics if there is one (often a dedicated engine).
    c.queue_family = families;
    for (std::uint32_t i = 0; i < families; ++i)
        if ((fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            (c.queue_family == families || !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            c.queue_family = i;
    // A family of transfer-only queues: a copy engine that runs beside the kernels.
    std::uint32_t transfer = families;
    for (std::uint32_t i = 0; i < families; ++i)
        if ((fam[i].queueFlags & VK_QUEUE_TRANSFER_BIT) &&
            !(fam[i].queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
            transfer = i;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queues[2]{{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO},
                                      {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}};
    queues[0].queueFamilyIndex = c.queue_family;
    queues[0].queueCount = 1;
    queues[0].pQueuePriorities = &priority;
    queues[1] = queues[0];
    queues[1].queueFamilyIndex = transfer;
    VkPhysicalDeviceFeatures enabled{};
    enabled.shaderFloat64 = supported.shaderFloat64;
    enabled.shaderInt64 = supported.shaderInt64;
    // Only what the device reports: enabling a missing feature would fail vkCreateDevice.
    VkPhysicalDevice16BitStorageFeatures enabled16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    enabled16.storageBuffer16BitAccess = c.storage16;
    VkPhysicalDeviceTimelineSemaphoreFeatures timeline{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES};
    timeline.timelineSemaphore = VK_TRUE;  // the probe kept only devices that have it
    enabled16.pNext = &timeline;
    const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = &enabled16;
    info.queueCreateInfoCount = transfer < families ? 2 : 1;
    info.pQueueCreateInfos = queues;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
    info.pEnabledFeatures = &enabled;
    FLUXION_VK_CHECK(vkCreateDevice(c.physical, &info, nullptr, &c.device));
    vkGetDeviceQueue(c.device, c.queue_family, 0, &c.queue);
    c.families = {c.queue_family};
    if (transfer < families) {
        c.transfer_family = transfer;
        vkGetDeviceQueue(c.device, transfer, 0, &c.transfer_queue);
        c.families.push_back(transfer);
    } else if (env_on("FLUXION_VULKAN_DEBUG_TRANSFER_ON_COMPUTE")) {
        c.transfer_family = c.queue_family;
        c.transfer_queue = c.queue;
    }
    c.push_descriptor_set =
        reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(vkGetDeviceProcAddr(c.device, "vkCmdPushDescriptorSetKHR"));
    if (!c.push_descriptor_set) throw DeviceError(c.label() + ": vkCmdPushDescriptorSetKHR is missing");
    c.device_memory_type = memory_type(c.memory, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, c.label());
    c.host_memory_type =
        memory_type(c.memory, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, c.label());
}

}  // namespace

const Probe& probe() {
    // Never destroyed: plugins are not unloaded, and tearing Vulkan down during exit races with
    // other static destructors (the validation layer's among them).
    static const Probe* p = new Probe(make_probe());
    return *p;
}

void PluginMutex::lock() {
    if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
        ++depth_;
        return;
    }
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    depth_ = 1;
}

void PluginMutex::unlock() {
    if (--depth_ > 0) return;
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mutex_.unlock();
}

PluginMutex& plugin_mutex() {
    static auto* m = new PluginMutex;
    return *m;
}

Unlocked::Unlocked() : depth_(plugin_mutex().depth_) {
    PluginMutex& m = plugin_mutex();
    m.depth_ = 0;
    m.owner_.store(std::thread::id(), std::memory_order_relaxed);
    m.mutex_.unlock();
}

Unlocked::~Unlocked() {
    PluginMutex& m = plugin_mutex();
    m.mutex_.lock();
    m.owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    m.depth_ = depth_;
}

std::string Context::label() const {
    return "Vulkan:" + std::to_string(index) + " (" + properties.deviceName + ")";
}

Context& context(int device) {
    const Probe& p = probe();
    if (device < 0 || std::size_t(device) >= p.devices.size())
        throw DeviceError("Vulkan:" + std::to_string(device) + " does not exist: " +
                          (p.devices.empty() ? p.reason : std::to_string(p.devices.size()) + " Vulkan device(s) here"));
    static auto* contexts = new std::vector<std::unique_ptr<Context>>(p.devices.size());
    auto& slot = (*contexts)[std::size_t(device)];
    if (!slot) {
        auto c = std::make_unique<Context>();
        c->index = device;
        create_device(*c);
        slot = std::move(c);
    }
    return *slot;
}

void check_validation(const char* where) {
    if (!probe().validation) return;
    const std::uint64_t now = g_messages.load();
    if (now == g_messages_checked) return;
    const std::uint64_t fresh = now - g_messages_checked;
    g_messages_checked = now;
    std::lock_guard lock(g_first_mutex);
    const std::string first = std::exchange(g_first_message, std::string());
    throw DeviceError(std::string("Vulkan validation reported ") + std::to_string(fresh) + " message(s) before " + where +
                      "; the first: " + first);
}

std::uint64_t validation_message_count() { return g_messages.load(); }

}  // namespace fluxion::vulkan
