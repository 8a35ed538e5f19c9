# Exercise registration: one function turns the files of an exercise into test binaries.
#
# For exercise <id> (the file stem, e.g. 02_flash_attention) in day folder <day>:
#   <day>/<id>.h                              the contract: launcher signature, layouts, limits
#   <day>/<id>.cu                             the learner's skeleton          -> bin/ex_<id>
#   solutions/<day>/<id>.cu                   the reference solution         -> bin/sol_<id>
#   solutions/wrong/<day>/<id>__<bug>.patch   deliberately wrong variants    -> bin/wrong_<id>__<bug>
#                                             (a prose preamble + a unified diff against the
#                                             solution; tools/apply_patch.py writes the patched
#                                             source to <build>/wrong/<day>/<id>__<bug>.cu)
#   <day>/tests/test_<id>.cpp                 the test, compiled ONCE into an object library and
#                                             linked against each implementation above
#
# CTest names are <day-label>/<id>/<kind>; labels are the day (day01, ...) and the kind:
#   exercise       the learner's code, expected to pass once solved          (make test)
#   solution       must pass                                                 (make check)
#   wrong          must FAIL its test; counts as passed when it does         (make check)
#   skeleton       the untouched skeleton must fail its test cleanly         (make check-skeletons)
# Expected failures are inverted inside the shared test main (COURSE_EXPECT_FAILURE=1), so a crash
# or a timeout never counts as a "correct rejection": only failed assertions do.
#
# Per-exercise options go in <day>/exercises.cmake:
#   course_exercise_options(<id> MIN_SM 80 TIMEOUT 300)
#   course_exercise_options(<id> MIN_SM 90 ARCH_SPECIFIC 90a)   built for that one target only
#     (sm_90a: wgmma, setmaxnreg), as <num>a-real; other GPUs skip with the reason.
#   course_exercise_options(<id> USES <other id> ...)   every implementation of <id> links the
#     SOLUTION library of each <other id> (libsol_<other id>): given code, e.g. the local kernel of
#     a distributed exercise. Without one of those libraries the exercise is skipped with the reason.
#   course_exercise_options(<id> USES_OPTIONAL <other id> ...)   the same where this build compiles
#     libsol_<other id> (e.g. an sm_90a-only exercise in a build that targets sm_90), which then
#     also defines COURSE_HAVE_<OTHER ID> (upper case: COURSE_HAVE_10_HOPPER_WGMMA) for the
#     implementations' sources; where it does not, nothing is linked and nothing is skipped.
#   course_exercise_options(<id> CPU_ONLY)   host C++ only (a serving engine's bookkeeping): the
#     .cu files are compiled as C++ by the host compiler, the test links the CPU main, and every
#     entry (skeleton, solution, wrong variants) runs wherever the course builds, CI included.
#   course_exercise_options(<id> NCCL)   needs NCCL (nccl.h, libnccl: NCCL_ROOT, the CUDA toolkit
#     or the system); without it every test of the exercise is registered as Skipped.
#   course_exercise_options(<id> GPU_COUNTS 2 4 MULTI_GPU_ONLY <bug> ...)   multi-GPU entries:
#     for each n, <day>/<id>/solution_<n>gpu and wrong/<bug>_<n>gpu run the test binary with the
#     Catch2 tag [<n>gpu] (hidden cases) and COURSE_REQUIRED_GPUS=n, so they are Skipped where
#     fewer GPUs exist; they hold one CTest resource lock, never running beside each other. A bug
#     in MULTI_GPU_ONLY shows only with several ranks: it has no one-GPU wrong/<bug> entry.

# Wrong variants are patches applied at build time by a stdlib-only script (no patch(1) needed).
find_package(Python3 COMPONENTS Interpreter REQUIRED)

set(COURSE_DEFAULT_TEST_TIMEOUT 180 CACHE STRING "CTest timeout (seconds) of one test binary")
set(COURSE_BIN_DIR "${CMAKE_BINARY_DIR}/bin")

# Wrong variants exist to be RUN on a GPU (each must fail its test). A build configured where no
# GPU is visible (CI, a laptop) cannot run them, so by default it only applies their patches
# (a patch that no longer applies still fails the build) and registers their tests as Skipped:
# compiling dozens of kernel copies for three architectures would triple CI's build time and
# check nothing the solution's own build does not. -DCOURSE_BUILD_WRONG_VARIANTS=ON overrides.
if(COURSE_NO_GPU_AT_CONFIGURE)
  set(_course_wrong_default OFF)
else()
  set(_course_wrong_default ON)
endif()
option(COURSE_BUILD_WRONG_VARIANTS "Compile the wrong variants (they need a GPU to be checked)"
       ${_course_wrong_default})

# The architectures of this build that are at least min_sm ("75;80;90" and 80 -> "80;90"), so an
# exercise that needs sm_80 instructions (mma.sync with bf16, cp.async) is never compiled for an
# older target. `native` is resolved to the GPUs CMake detected.
function(_course_archs_at_least min_sm out)
  set(archs "${CMAKE_CUDA_ARCHITECTURES}")
  if(archs STREQUAL "native" AND CMAKE_CUDA_ARCHITECTURES_NATIVE)
    set(archs "${CMAKE_CUDA_ARCHITECTURES_NATIVE}")
  endif()
  if(archs MATCHES "^(native|all|all-major)$")
    set(${out} "${archs}" PARENT_SCOPE)  # unknown at configure time: leave it to the runtime skip
    return()
  endif()
  set(kept "")
  foreach(a IN LISTS archs)
    string(REGEX MATCH "^[0-9]+" num "${a}")
    if(num AND num GREATER_EQUAL min_sm)
      list(APPEND kept "${a}")
    endif()
  endforeach()
  set(${out} "${kept}" PARENT_SCOPE)
endfunction()

# Links the solution libraries an exercise USES (each must exist) and those it USES_OPTIONAL
# (where they exist, with COURSE_HAVE_<ID> defined for the implementation's own sources).
function(_course_link_uses target uses uses_optional)
  foreach(u IN LISTS uses)
    target_link_libraries(${target} PUBLIC libsol_${u})
  endforeach()
  foreach(u IN LISTS uses_optional)
    if(TARGET libsol_${u})
      string(TOUPPER "${u}" u_upper)
      target_link_libraries(${target} PUBLIC libsol_${u})
      target_compile_definitions(${target} PRIVATE COURSE_HAVE_${u_upper}=1)
    endif()
  endforeach()
endfunction()

function(course_exercise_options id)
  cmake_parse_arguments(ARG "NCCL;CPU_ONLY" "MIN_SM;TIMEOUT;ARCH_SPECIFIC"
                        "USES;USES_OPTIONAL;GPU_COUNTS;MULTI_GPU_ONLY" ${ARGN})
  set_property(GLOBAL PROPERTY COURSE_NCCL_${id} ${ARG_NCCL})
  set_property(GLOBAL PROPERTY COURSE_CPU_ONLY_${id} ${ARG_CPU_ONLY})
  set_property(GLOBAL PROPERTY COURSE_USES_${id} "${ARG_USES}")
  set_property(GLOBAL PROPERTY COURSE_USES_OPTIONAL_${id} "${ARG_USES_OPTIONAL}")
  set_property(GLOBAL PROPERTY COURSE_GPU_COUNTS_${id} "${ARG_GPU_COUNTS}")
  set_property(GLOBAL PROPERTY COURSE_MULTI_GPU_ONLY_${id} "${ARG_MULTI_GPU_ONLY}")
  if(ARG_MIN_SM)
    set_property(GLOBAL PROPERTY COURSE_MIN_SM_${id} ${ARG_MIN_SM})
  endif()
  if(ARG_TIMEOUT)
    set_property(GLOBAL PROPERTY COURSE_TIMEOUT_${id} ${ARG_TIMEOUT})
  endif()
  if(ARG_ARCH_SPECIFIC)
    set_property(GLOBAL PROPERTY COURSE_ARCH_SPECIFIC_${id} ${ARG_ARCH_SPECIFIC})
  endif()
endfunction()

# Registers one CTest entry with the properties every course test shares.
function(_course_add_test name command kind day_label timeout expect_failure)
  add_test(NAME ${name} COMMAND ${command})
  set(_env "")
  if(expect_failure)
    set(_env "COURSE_EXPECT_FAILURE=1")
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${day_label};${kind}"
    TIMEOUT ${timeout}
    ENVIRONMENT "${_env}")
  # A GPU entry is Skipped where no GPU is; a CPU entry (the [index] checks) never is: it needs
  # none, so a skip there would hide a broken CPU path.
  if(NOT kind STREQUAL "cpu")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()

# A multi-GPU entry: the hidden Catch2 cases tagged [<n>gpu], Skipped (exit 77, common/main_gpu.cpp)
# where fewer than n GPUs exist. NVLink multicast stays off (NCCL_NVLS_ENABLE=0): ring exchanges
# never need it, and on shared hosts it must not be used. A test case there may wait out a
# communication deadline and then NCCL's abort, so the watchdog allows 90 s per case.
function(_course_add_multi_gpu_test name exe gpus kind day_label timeout expect_failure)
  _course_add_test(${name} "${exe};[${gpus}gpu]" ${kind} ${day_label} ${timeout} ${expect_failure})
  set(_env "COURSE_REQUIRED_GPUS=${gpus};NCCL_NVLS_ENABLE=0;COURSE_TEST_TIMEOUT=90")
  if(expect_failure)
    list(APPEND _env "COURSE_EXPECT_FAILURE=1")
  endif()
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${_env}" RESOURCE_LOCK course_multi_gpu)
endfunction()

# NCCL for the exercises that ask for it (course_exercise_options(<id> NCCL)): nccl.h and
# libnccl from NCCL_ROOT / NCCL_HOME, the CUDA toolkit (where an install ships them) or the
# system (libnccl-dev). Defines the target course_nccl once; `out` is TRUE when it exists.
function(_course_find_nccl out)
  # Searched once per configure run (a global property, not the cache), so that a learner who
  # installs NCCL or sets NCCL_ROOT after a failed search gets a new search on the next configure
  # (find_path / find_library retry a NOTFOUND result by themselves).
  get_property(_searched GLOBAL PROPERTY COURSE_NCCL_SEARCHED)
  if(NOT TARGET course_nccl AND NOT _searched)
    set_property(GLOBAL PROPERTY COURSE_NCCL_SEARCHED TRUE)
    find_path(COURSE_NCCL_INCLUDE_DIR nccl.h
      HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    find_library(COURSE_NCCL_LIBRARY NAMES nccl libnccl.so.2
      HINTS ${NCCL_ROOT} ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES lib lib64)
  endif()
  if(NOT TARGET course_nccl AND COURSE_NCCL_INCLUDE_DIR AND COURSE_NCCL_LIBRARY)
    add_library(course_nccl INTERFACE IMPORTED GLOBAL)
    target_include_directories(course_nccl INTERFACE "${COURSE_NCCL_INCLUDE_DIR}")
    target_link_libraries(course_nccl INTERFACE "${COURSE_NCCL_LIBRARY}")
    message(STATUS "course: NCCL ${COURSE_NCCL_LIBRARY} (headers ${COURSE_NCCL_INCLUDE_DIR})")
  endif()
  if(TARGET course_nccl)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# One static library per implementation, so tests and the bench link the same object code.
function(_course_impl_library target source day_dir)
  add_library(${target} STATIC ${source})
  target_include_directories(${target} PUBLIC ${day_dir})
  target_link_libraries(${target} PUBLIC course_common_cuda)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# The source of a wrong variant: the patch applied to its solution, in the build tree. A patch
# that no longer applies fails this step with a message naming the patch, the hunk and the first
# line that differs.
function(_course_patched_source patch day solution out)
  get_filename_component(stem "${patch}" NAME_WE)
  set(applied "${CMAKE_BINARY_DIR}/wrong/${day}/${stem}.cu")
  add_custom_command(
    OUTPUT "${applied}"
    COMMAND ${Python3_EXECUTABLE} "${PROJECT_SOURCE_DIR}/tools/apply_patch.py" "${patch}" "${applied}"
            --root "${PROJECT_SOURCE_DIR}"
    DEPENDS "${patch}" "${solution}" "${PROJECT_SOURCE_DIR}/tools/apply_patch.py"
    COMMENT "Applying solutions/wrong/${day}/${stem}.patch"
    VERBATIM)
  set(${out} "${applied}" PARENT_SCOPE)
endfunction()

# A CPU_ONLY exercise: host C++ in .cu files (so every exercise has the same file layout), built
# with or without a CUDA toolkit and run everywhere. Kinds and names as for a GPU exercise.
function(_course_add_cpu_exercise day id skeleton solution test_src wrongs)
  set(day_dir "${PROJECT_SOURCE_DIR}/${day}")
  string(SUBSTRING "${day}" 0 5 day_label)
  get_property(timeout GLOBAL PROPERTY COURSE_TIMEOUT_${id})
  get_property(uses GLOBAL PROPERTY COURSE_USES_${id})
  get_property(uses_optional GLOBAL PROPERTY COURSE_USES_OPTIONAL_${id})
  if(NOT timeout)
    set(timeout ${COURSE_DEFAULT_TEST_TIMEOUT})
  endif()
  add_library(testobj_${id} OBJECT "${test_src}")
  target_include_directories(testobj_${id} PRIVATE ${day_dir})
  target_link_libraries(testobj_${id} PRIVATE course_common course_catch2)
  set(impls "skeleton|${skeleton}|ex_${id}" "solution|${solution}|sol_${id}")
  foreach(w IN LISTS wrongs)
    get_filename_component(stem "${w}" NAME_WE)
    _course_patched_source("${w}" ${day} "${solution}" applied)
    list(APPEND impls "wrong|${applied}|wrong_${stem}")
  endforeach()
  foreach(entry IN LISTS impls)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 kind)
    list(GET parts 1 src)
    list(GET parts 2 exe)
    set_source_files_properties("${src}" PROPERTIES LANGUAGE CXX)
    add_library(lib${exe} STATIC "${src}")
    target_include_directories(lib${exe} PUBLIC ${day_dir})
    target_link_libraries(lib${exe} PUBLIC course_common)
    set_target_properties(lib${exe} PROPERTIES POSITION_INDEPENDENT_CODE ON LINKER_LANGUAGE CXX)
    _course_link_uses(lib${exe} "${uses}" "${uses_optional}")
    if(kind STREQUAL "skeleton")
      target_compile_options(lib${exe} PRIVATE -Wno-unused-parameter)
    endif()
    add_executable(${exe} $<TARGET_OBJECTS:testobj_${id}>)
    target_link_libraries(${exe} PRIVATE lib${exe} course_main_cpu course_common course_catch2)
    set_target_properties(${exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${COURSE_BIN_DIR}")
    if(kind STREQUAL "skeleton")
      add_dependencies(course_exercises ${exe})
      _course_add_test(${day_label}/${id}/exercise ${exe} exercise ${day_label} ${timeout} FALSE)
      _course_add_test(${day_label}/${id}/skeleton_fails ${exe} skeleton ${day_label} ${timeout} TRUE)
    elseif(kind STREQUAL "solution")
      _course_add_test(${day_label}/${id}/solution ${exe} solution ${day_label} ${timeout} FALSE)
    else()
      string(REPLACE "wrong_${id}__" "" bug "${exe}")
      _course_add_test(${day_label}/${id}/wrong/${bug} ${exe} wrong ${day_label} ${timeout} TRUE)
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY COURSE_EXERCISES "${id}")
  set_property(GLOBAL PROPERTY COURSE_DAY_OF_${id} "${day}")
endfunction()

function(course_add_exercise day id)
  set(day_dir "${PROJECT_SOURCE_DIR}/${day}")
  string(SUBSTRING "${day}" 0 5 day_label)          # day01-basics -> day01
  set(skeleton "${day_dir}/${id}.cu")
  set(solution "${PROJECT_SOURCE_DIR}/solutions/${day}/${id}.cu")
  set(test_src "${day_dir}/tests/test_${id}.cpp")
  file(GLOB wrongs CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/solutions/wrong/${day}/${id}__*.patch")
  list(SORT wrongs)
  foreach(required IN ITEMS "${day_dir}/${id}.h" "${solution}" "${test_src}")
    if(NOT EXISTS "${required}")
      message(FATAL_ERROR "course: exercise ${day}/${id} is missing ${required}")
    endif()
  endforeach()

  get_property(cpu_only GLOBAL PROPERTY COURSE_CPU_ONLY_${id})
  if(cpu_only)
    _course_add_cpu_exercise(${day} ${id} "${skeleton}" "${solution}" "${test_src}" "${wrongs}")
    return()
  endif()
  get_property(min_sm GLOBAL PROPERTY COURSE_MIN_SM_${id})
  get_property(timeout GLOBAL PROPERTY COURSE_TIMEOUT_${id})
  get_property(arch_specific GLOBAL PROPERTY COURSE_ARCH_SPECIFIC_${id})
  get_property(needs_nccl GLOBAL PROPERTY COURSE_NCCL_${id})
  get_property(uses GLOBAL PROPERTY COURSE_USES_${id})
  get_property(uses_optional GLOBAL PROPERTY COURSE_USES_OPTIONAL_${id})
  get_property(gpu_counts GLOBAL PROPERTY COURSE_GPU_COUNTS_${id})
  get_property(multi_gpu_only GLOBAL PROPERTY COURSE_MULTI_GPU_ONLY_${id})
  if(NOT min_sm)
    set(min_sm 0)
  endif()
  if(NOT timeout)
    set(timeout ${COURSE_DEFAULT_TEST_TIMEOUT})
  endif()

  set(skip_reason "")
  set(archs "${CMAKE_CUDA_ARCHITECTURES}")
  if(COURSE_HAVE_CUDA AND min_sm GREATER 0)
    _course_archs_at_least(${min_sm} archs)
    if(archs STREQUAL "")
      set(skip_reason "needs sm_${min_sm} or newer; this build targets CUDA_ARCH=${CMAKE_CUDA_ARCHITECTURES} only")
    endif()
  endif()
  # An architecture-specific target (90a) runs only on its own architecture: built when the
  # build's list has that architecture (or is left to `native`), as <num>a-real alone.
  set(max_sm 0)
  if(COURSE_HAVE_CUDA AND arch_specific AND skip_reason STREQUAL "")
    string(REGEX MATCH "^[0-9]+" max_sm "${arch_specific}")
    set(found FALSE)
    foreach(a IN LISTS archs)
      string(REGEX MATCH "^[0-9]+" num "${a}")
      if(num STREQUAL max_sm OR a MATCHES "^(native|all|all-major)$")
        set(found TRUE)
      endif()
    endforeach()
    if(found)
      set(archs "${arch_specific}-real")
    else()
      set(skip_reason "needs sm_${max_sm} (built for ${arch_specific} only); this build targets CUDA_ARCH=${CMAKE_CUDA_ARCHITECTURES}")
    endif()
  endif()

  # Given code from another exercise's solution, and NCCL, where the exercise asks for them.
  foreach(u IN LISTS uses)
    if(COURSE_HAVE_CUDA AND skip_reason STREQUAL "" AND NOT TARGET libsol_${u})
      set(skip_reason "needs the solution library of exercise ${u}, which this build does not compile")
    endif()
  endforeach()
  if(COURSE_HAVE_CUDA AND skip_reason STREQUAL "" AND needs_nccl)
    _course_find_nccl(have_nccl)
    if(NOT have_nccl)
      set(skip_reason "needs NCCL: nccl.h and libnccl were found neither in the CUDA toolkit nor on the system (install libnccl-dev, or set NCCL_ROOT and reconfigure)")
    endif()
  endif()

  if(NOT COURSE_HAVE_CUDA OR NOT skip_reason STREQUAL "")
    # Nothing GPU-side can be built for this exercise. Register the same test names so CTest
    # shows each one as Skipped with the reason, instead of silently testing less.
    set(skip_cmd $<TARGET_FILE:course_skip_no_cuda> "${day_label}/${id}" ${skip_reason})
    _course_add_test(${day_label}/${id}/exercise "${skip_cmd}" exercise ${day_label} ${timeout} FALSE)
    _course_add_test(${day_label}/${id}/solution "${skip_cmd}" solution ${day_label} ${timeout} FALSE)
    _course_add_test(${day_label}/${id}/skeleton_fails "${skip_cmd}" skeleton ${day_label} ${timeout} FALSE)
    foreach(n IN LISTS gpu_counts)
      _course_add_test(${day_label}/${id}/solution_${n}gpu "${skip_cmd}" solution ${day_label} ${timeout} FALSE)
    endforeach()
    foreach(w IN LISTS wrongs)
      get_filename_component(stem "${w}" NAME_WE)
      string(REPLACE "${id}__" "" bug "${stem}")
      if(NOT bug IN_LIST multi_gpu_only)
        _course_add_test(${day_label}/${id}/wrong/${bug} "${skip_cmd}" wrong ${day_label} ${timeout} FALSE)
      endif()
      foreach(n IN LISTS gpu_counts)
        _course_add_test(${day_label}/${id}/wrong/${bug}_${n}gpu "${skip_cmd}" wrong ${day_label} ${timeout} FALSE)
      endforeach()
    endforeach()
    return()
  endif()

  # The test source is compiled once; the generated file tells the shared main which
  # architecture the exercise needs, so an older GPU skips instead of failing, and whether the
  # test has [index] cases (CPU checks of the index helpers) to run where no GPU is.
  file(READ "${test_src}" _test_text)
  string(FIND "${_test_text}" "[index]" _index_pos)
  set(has_index false)
  if(_index_pos GREATER -1)
    set(has_index true)
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${test_src}")
  set(gen "${CMAKE_BINARY_DIR}/generated/required_sm_${id}.cpp")
  file(CONFIGURE OUTPUT "${gen}" CONTENT
       "// generated by cmake/CourseExercises.cmake\nint course_required_sm() { return ${min_sm}; }\nint course_max_sm() { return ${max_sm}; }\nbool course_has_index_checks() { return ${has_index}; }\n")
  add_library(testobj_${id} OBJECT "${test_src}" "${gen}")
  target_include_directories(testobj_${id} PRIVATE ${day_dir})
  target_link_libraries(testobj_${id} PRIVATE course_common_cuda course_catch2)
  if(needs_nccl)
    target_link_libraries(testobj_${id} PRIVATE course_nccl)
  endif()

  set(impls "skeleton|${skeleton}|ex_${id}|exercise" "solution|${solution}|sol_${id}|solution")
  foreach(w IN LISTS wrongs)
    get_filename_component(stem "${w}" NAME_WE)
    _course_patched_source("${w}" ${day} "${solution}" applied)
    if(COURSE_BUILD_WRONG_VARIANTS)
      list(APPEND impls "wrong|${applied}|wrong_${stem}|wrong")
    else()
      add_custom_target(patch_${stem} ALL DEPENDS "${applied}")
      string(REPLACE "${id}__" "" bug "${stem}")
      set(_names "")
      if(NOT bug IN_LIST multi_gpu_only)
        list(APPEND _names wrong/${bug})
      endif()
      foreach(n IN LISTS gpu_counts)
        list(APPEND _names wrong/${bug}_${n}gpu)
      endforeach()
      foreach(_name IN LISTS _names)
        _course_add_test(${day_label}/${id}/${_name}
          "$<TARGET_FILE:course_skip_no_cuda>;${day_label}/${id}/${_name};this build was configured where no GPU is visible, so wrong variants are only patched, not compiled (-DCOURSE_BUILD_WRONG_VARIANTS=ON compiles them)"
          wrong ${day_label} ${timeout} FALSE)
      endforeach()
    endif()
  endforeach()

  foreach(entry IN LISTS impls)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 kind)
    list(GET parts 1 src)
    list(GET parts 2 exe)
    list(GET parts 3 label)
    _course_impl_library(lib${exe} "${src}" "${day_dir}")
    set_target_properties(lib${exe} PROPERTIES CUDA_ARCHITECTURES "${archs}")
    _course_link_uses(lib${exe} "${uses}" "${uses_optional}")
    if(needs_nccl)
      target_link_libraries(lib${exe} PUBLIC course_nccl)
    endif()
    if(kind STREQUAL "skeleton")
      # Skeletons are unfinished by design: unused parameters are expected, not news.
      target_compile_options(lib${exe} PRIVATE
        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wno-unused-parameter --diag-suppress=177,550>)
    endif()
    add_executable(${exe} $<TARGET_OBJECTS:testobj_${id}>)
    target_link_libraries(${exe} PRIVATE lib${exe} course_main_gpu course_common_cuda course_catch2)
    set_target_properties(${exe} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${COURSE_BIN_DIR}")

    if(kind STREQUAL "skeleton")
      add_dependencies(course_exercises ${exe})
      _course_add_test(${day_label}/${id}/exercise ${exe} exercise ${day_label} ${timeout} FALSE)
      _course_add_test(${day_label}/${id}/skeleton_fails ${exe} skeleton ${day_label} ${timeout} TRUE)
    elseif(kind STREQUAL "solution")
      _course_add_test(${day_label}/${id}/solution ${exe} solution ${day_label} ${timeout} FALSE)
      foreach(n IN LISTS gpu_counts)
        _course_add_multi_gpu_test(${day_label}/${id}/solution_${n}gpu ${exe} ${n} solution ${day_label} ${timeout} FALSE)
      endforeach()
      if(has_index)
        # The index helpers' CPU checks on their own: they need no GPU, so CI runs them too.
        # With another Catch2 option beside the tag, as a learner may type it.
        _course_add_test(${day_label}/${id}/index "${exe};[index];--reporter;compact" cpu ${day_label} ${timeout} FALSE)
      endif()
    else()
      string(REPLACE "wrong_${id}__" "" bug "${exe}")
      if(NOT bug IN_LIST multi_gpu_only)
        _course_add_test(${day_label}/${id}/wrong/${bug} ${exe} wrong ${day_label} ${timeout} TRUE)
      endif()
      foreach(n IN LISTS gpu_counts)
        _course_add_multi_gpu_test(${day_label}/${id}/wrong/${bug}_${n}gpu ${exe} ${n} wrong ${day_label} ${timeout} TRUE)
      endforeach()
    endif()
  endforeach()

  set_property(GLOBAL APPEND PROPERTY COURSE_EXERCISES "${id}")
  set_property(GLOBAL PROPERTY COURSE_DAY_OF_${id} "${day}")
endfunction()

# `make test` without EX builds this: the learner's test binaries only (not every solution and
# wrong variant, which the status list does not need).
if(NOT TARGET course_exercises)
  add_custom_target(course_exercises DEPENDS course_skip_no_cuda)
endif()

# Every <day>/NN_*.cu is an exercise: adding one is adding files, no CMake edit needed.
function(course_add_day day)
  set(day_dir "${PROJECT_SOURCE_DIR}/${day}")
  if(NOT IS_DIRECTORY "${day_dir}")
    return()
  endif()
  if(EXISTS "${day_dir}/exercises.cmake")
    include("${day_dir}/exercises.cmake")
  endif()
  file(GLOB skeletons CONFIGURE_DEPENDS "${day_dir}/[0-9][0-9]_*.cu")
  list(SORT skeletons)
  foreach(sk IN LISTS skeletons)
    get_filename_component(id "${sk}" NAME_WE)
    course_add_exercise(${day} ${id})
  endforeach()
endfunction()
