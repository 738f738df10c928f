# Compiler flags shared by every dtsim target, applied through the interface target dtsim_options.
add_library(dtsim_options INTERFACE)
target_compile_options(dtsim_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic>)
if(DTSIM_WERROR)
  target_compile_options(dtsim_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(DTSIM_SANITIZE)
  target_compile_options(dtsim_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(dtsim_options INTERFACE -fsanitize=address,undefined)
endif()
if(DTSIM_FUZZ)
  # Every library is instrumented for coverage and checked by ASan + UBSan; only the fuzz binaries
  # link libFuzzer's main (fuzz/CMakeLists.txt).
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DTSIM_FUZZ needs clang (CMAKE_CXX_COMPILER=clang++-14); scripts/fuzz configures it")
  endif()
  target_compile_options(dtsim_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(dtsim_options INTERFACE -fsanitize=address,undefined)
endif()
target_include_directories(dtsim_options INTERFACE ${PROJECT_SOURCE_DIR})

# dtsim_library(NAME SOURCES... DEPS ...): one static library per folder.
function(dtsim_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC dtsim_options ${ARG_DEPS})
endfunction()
