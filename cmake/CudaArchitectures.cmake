# Chooses CMAKE_CUDA_ARCHITECTURES before the CUDA language is enabled.
#
# Order of preference:
#   1. whatever the user passed (-DCMAKE_CUDA_ARCHITECTURES=90, or `make CUDA_ARCH=90`);
#   2. `native` when a GPU is visible, so a learner's build runs on their card without flags;
#   3. otherwise a fixed list, so a machine without a GPU (CI) still compile-checks every
#      arch-gated path: sm_75 is the oldest arch CUDA 13 targets (no cp.async, no bf16 mma),
#      sm_80 adds cp.async and m16n8k16 mma, sm_90 is Hopper.
set(COURSE_FALLBACK_CUDA_ARCHITECTURES "75;80;90" CACHE STRING
    "CUDA architectures compiled when no GPU is visible and none was requested")

# The Makefile passes COURSE_CUDA_ARCH on every configure: the value of `make ... CUDA_ARCH=`,
# empty when the command gave none. A value is used as given; an empty one after a build that
# make had pinned (`make test CUDA_ARCH=90` once) goes back to the automatic choice, so an
# architecture never sticks silently from an earlier command. A value passed to cmake directly
# (-DCMAKE_CUDA_ARCHITECTURES=..) is left alone.
if(DEFINED COURSE_CUDA_ARCH)
  if(NOT COURSE_CUDA_ARCH STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "${COURSE_CUDA_ARCH}" CACHE STRING "CUDA architectures to build for" FORCE)
    set(COURSE_ARCH_PINNED_BY_MAKE ON CACHE INTERNAL "CMAKE_CUDA_ARCHITECTURES came from make CUDA_ARCH=")
  elseif(COURSE_ARCH_PINNED_BY_MAKE)
    unset(CMAKE_CUDA_ARCHITECTURES CACHE)
    unset(CMAKE_CUDA_ARCHITECTURES)
    set(COURSE_ARCH_PINNED_BY_MAKE OFF CACHE INTERNAL "CMAKE_CUDA_ARCHITECTURES came from make CUDA_ARCH=")
  endif()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(_course_gpu_visible FALSE)
  find_program(COURSE_NVIDIA_SMI nvidia-smi)
  if(COURSE_NVIDIA_SMI)
    execute_process(COMMAND ${COURSE_NVIDIA_SMI} -L
                    RESULT_VARIABLE _smi_rc OUTPUT_VARIABLE _smi_out ERROR_QUIET TIMEOUT 20)
    if(_smi_rc EQUAL 0 AND _smi_out MATCHES "GPU [0-9]")
      set(_course_gpu_visible TRUE)
    endif()
  endif()
  if(_course_gpu_visible)
    set(CMAKE_CUDA_ARCHITECTURES native CACHE STRING "CUDA architectures to build for")
    message(STATUS "course: GPU visible, building for CUDA_ARCH=native")
  else()
    set(CMAKE_CUDA_ARCHITECTURES "${COURSE_FALLBACK_CUDA_ARCHITECTURES}" CACHE STRING
        "CUDA architectures to build for")
    # Remembered: nothing this build compiles can be run here (see COURSE_BUILD_WRONG_VARIANTS).
    set(COURSE_NO_GPU_AT_CONFIGURE ON CACHE INTERNAL "configured where no GPU was visible")
    message(STATUS "course: no GPU visible, compile-checking CUDA_ARCH=${CMAKE_CUDA_ARCHITECTURES}")
  endif()
endif()

# nvcc is often installed but not on PATH (/usr/local/cuda/bin); look there before giving up.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(_course_nvcc nvcc HINTS /usr/local/cuda/bin /opt/cuda/bin)
  if(_course_nvcc)
    set(CMAKE_CUDA_COMPILER "${_course_nvcc}" CACHE FILEPATH "CUDA compiler")
  endif()
endif()
