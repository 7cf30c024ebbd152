// pipelines.cpp — shader modules, descriptor set layouts and the pipeline cache.
#include "vulkan/pipelines.hpp"

#include <map>
#include <tuple>
#include <vector>

#include "fluxion/error.hpp"
#include "vulkan/check.hpp"
#include "vulkan/shaders.hpp"

namespace fluxion::vulkan {

namespace {

using Key = std::tuple<int, std::string, std::vector<std::uint32_t>>;  // device, variant, constants

VkPipelineLayout layout_for(Context& ctx, int bindings) {
    static std::map<std::pair<int, int>, VkPipelineLayout>* layouts = new std::map<std::pair<int, int>, VkPipelineLayout>;
    auto& slot = (*layouts)[{ctx.index, bindings}];
    if (slot) return slot;
    std::vector<VkDescriptorSetLayoutBinding> b(static_cast<std::size_t>(bindings));
    for (int i = 0; i < bindings; ++i) {
        b[std::size_t(i)].binding = std::uint32_t(i);
        b[std::size_t(i)].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[std::size_t(i)].descriptorCount = 1;
        b[std::size_t(i)].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    set.bindingCount = std::uint32_t(bindings);
    set.pBindings = b.data();
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    FLUXION_VK_CHECK(vkCreateDescriptorSetLayout(ctx.device, &set, nullptr, &set_layout));
    VkPipelineLayoutCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    info.setLayoutCount = 1;
    info.pSetLayouts = &set_layout;
    FLUXION_VK_CHECK(vkCreatePipelineLayout(ctx.device, &info, nullptr, &slot));
    return slot;
}

}  // namespace

const Pipeline& pipeline(Context& ctx, const std::string& variant, int bindings,
                         const std::vector<std::uint32_t>& values, const char* op) {
    static auto* cache = new std::map<Key, Pipeline>;
    Key key{ctx.index, variant, values};
    if (auto it = cache->find(key); it != cache->end()) return it->second;

    const auto code = spirv_module(variant);
    if (code.empty())
        throw DTypeError(std::string(op) + " on " + ctx.label() + ": no kernel for these element types (" + variant + ")");
    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = code.size() * 4;
    module_info.pCode = code.data();
    VkShaderModule module = VK_NULL_HANDLE;
    FLUXION_VK_CHECK(vkCreateShaderModule(ctx.device, &module_info, nullptr, &module));

    std::vector<VkSpecializationMapEntry> entries(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) entries[i] = {std::uint32_t(i), std::uint32_t(4 * i), 4};
    VkSpecializationInfo spec{};
    spec.mapEntryCount = std::uint32_t(entries.size());
    spec.pMapEntries = entries.data();
    spec.dataSize = values.size() * 4;
    spec.pData = values.data();

    Pipeline p;
    p.layout = layout_for(ctx, bindings);
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = values.empty() ? nullptr : &spec;
    info.layout = p.layout;
    const VkResult r = vkCreateComputePipelines(ctx.device, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline);
    vkDestroyShaderModule(ctx.device, module, nullptr);
    FLUXION_VK_CHECK(r);
    return cache->emplace(std::move(key), p).first->second;
}

}  // namespace fluxion::vulkan
