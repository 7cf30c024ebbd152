# The shader variants built into the plugin: fluxion_vulkan_variant(<variant> <source> <slot> <type>...)
# (shaders.cmake). A kernel looks its variant up by name; a missing one is an unsupported type.
set(_all_types f32 f64 i32 i64 u8 bool)

foreach(t ${_all_types})
  fluxion_vulkan_variant(fill_${t} fill.comp S0 ${t})
  fluxion_vulkan_variant(copy_strided_${t} copy_strided.comp S0 ${t} S1 ${t})
  foreach(to ${_all_types})
    fluxion_vulkan_variant(cast_${t}_${to} cast.comp S0 ${t} S1 ${to})
  endforeach()
endforeach()
