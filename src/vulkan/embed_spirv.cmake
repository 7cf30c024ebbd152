# cmake -DSPV=<module.spv> -DOUT=<file.cpp> -DNAME=<variant> -P embed_spirv.cmake
# Writes the SPIR-V module as a C++ array of 32-bit words the plugin links in (see shaders.hpp).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" chars)
math(EXPR rem "${chars} % 8")
if(NOT rem EQUAL 0)
  message(FATAL_ERROR "${SPV} is not a whole number of 32-bit words")
endif()
# SPIR-V words are little-endian in the file: byte-swap each 8-digit group into a C literal.
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
       "0x\\4\\3\\2\\1u," words "${hex}")
file(WRITE ${OUT} "// Generated from ${SPV} by embed_spirv.cmake; do not edit.\n#include <cstdint>\n"
     "namespace fluxion::vulkan::spirv {\nextern const std::uint32_t ${NAME}[] = {${words}};\n"
     "extern const std::uint32_t ${NAME}_words = sizeof(${NAME}) / 4;\n}\n")
