# Warnings applied to every wheelforge target through wf_target_warnings().
set(WF_WARNING_FLAGS
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)

# GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string at -O2/-O3
# (GCC bug 105329); they say nothing about our code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND WF_WARNING_FLAGS -Wno-restrict)
endif()

# In a unity build (CMAKE_UNITY_BUILD, CONTRIBUTING.md) GCC takes the batch's sources for
# headers and reports every type of their anonymous namespaces that a template captures
# (-Wsubobject-linkage): true of a header, meaningless for a source compiled once.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND WF_WARNING_FLAGS -Wno-subobject-linkage)
endif()

function(wf_target_warnings target)
  target_compile_options(${target} PRIVATE ${WF_WARNING_FLAGS})
  if(WF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# wf_module(NAME DEPS ... PRIVATE_DEPS ...): the library wf_NAME built from every .cpp in the
# calling directory (src/NAME/).
function(wf_module name)
  cmake_parse_arguments(M "" "" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT sources)
    # A header-only module.
    add_library(wf_${name} INTERFACE)
    target_include_directories(wf_${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(wf_${name} INTERFACE ${M_DEPS})
    return()
  endif()
  add_library(wf_${name} STATIC ${sources})
  target_include_directories(wf_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                         PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(wf_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  wf_target_warnings(wf_${name})
endfunction()
