# Helpers that keep each module's CMakeLists.txt to a few lines.

# Flags every kagi target gets.
function(kagi_target_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(KAGI_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety)
  endif()
  if(KAGI_SANITIZE STREQUAL "address")
    target_compile_options(${target} PUBLIC -fsanitize=address,undefined -fno-omit-frame-pointer
                                            -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  elseif(KAGI_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PUBLIC -fsanitize=thread -fno-omit-frame-pointer)
    # GCC warns that TSan does not model the standalone fences in Boost.Asio's handler
    # invocation (std_fenced_block); they are in a header we do not own, and the data those
    # handlers touch is still checked.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PUBLIC -Wno-tsan)
    endif()
    target_link_options(${target} PUBLIC -fsanitize=thread)
  endif()
endfunction()

# kagi_module(NAME DEPS dep...): a static library kagi_NAME from every .cpp in this folder
# (and its detail/ subfolder). Headers are included as <kagi/<module>/x.hpp>: from the source
# tree while building, from the install prefix's include/ once installed.
function(kagi_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/detail/*.cpp)
  add_library(kagi_${name} STATIC ${sources})
  # Users link kagi::<name> (or kagi::kagi for all), from the install tree or a subproject.
  add_library(kagi::${name} ALIAS kagi_${name})
  set_target_properties(kagi_${name} PROPERTIES EXPORT_NAME ${name})
  target_compile_features(kagi_${name} PUBLIC cxx_std_20)
  set_property(GLOBAL APPEND PROPERTY KAGI_MODULE_TARGETS kagi_${name})
  target_include_directories(kagi_${name} PUBLIC $<BUILD_INTERFACE:${KAGI_INCLUDE_ROOT}>
                                                $<INSTALL_INTERFACE:include>)
  target_link_libraries(kagi_${name} PUBLIC ${ARG_DEPS})
  set_target_properties(kagi_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  kagi_target_options(kagi_${name})
endfunction()

# kagi_unit_test(NAME SOURCES... DEPS ...): one gtest binary, registered with ctest.
function(kagi_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  kagi_target_options(${name})
  set(labels unit ${ARG_LABELS})
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600)
endfunction()
