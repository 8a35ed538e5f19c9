# Finds Catch2 v3 or v2 and defines:
#   course_catch2      INTERFACE target carrying the headers/library and COURSE_CATCH2_V3=0/1
# Catch2 v3 is what Ubuntu 24.04 ships; Debian 12 and Ubuntu 22.04 ship v2.13 (header only).
# Neither installed: fetch v3 when online, otherwise stop with the package to install.
option(COURSE_FETCH_CATCH2 "Download Catch2 v3 when no installed Catch2 is found" ON)
set(COURSE_CATCH2_FETCH_URL
    "https://github.com/catchorg/Catch2/archive/refs/tags/v3.4.0.tar.gz" CACHE STRING
    "Where to download Catch2 from when it is not installed")

add_library(course_catch2 INTERFACE)

find_package(Catch2 3 QUIET CONFIG)
if(Catch2_FOUND)
  message(STATUS "course: Catch2 ${Catch2_VERSION} (v3) found")
  target_link_libraries(course_catch2 INTERFACE Catch2::Catch2)
  target_compile_definitions(course_catch2 INTERFACE COURSE_CATCH2_V3=1)
  return()
endif()

find_package(Catch2 2 QUIET CONFIG)
if(Catch2_FOUND)
  message(STATUS "course: Catch2 ${Catch2_VERSION} (v2, header only) found")
  target_link_libraries(course_catch2 INTERFACE Catch2::Catch2)
  target_compile_definitions(course_catch2 INTERFACE COURSE_CATCH2_V3=0)
  return()
endif()

set(_catch_help "Install it with: sudo apt install catch2   (Debian 12 / Ubuntu 22.04 / 24.04)")
if(NOT COURSE_FETCH_CATCH2)
  message(FATAL_ERROR "course: Catch2 not found and COURSE_FETCH_CATCH2=OFF. ${_catch_help}")
endif()

# Probe the download ourselves first: FetchContent's own failure message on an offline machine
# does not tell a learner what to install.
set(_catch_tgz "${CMAKE_BINARY_DIR}/_deps/catch2-v3.tar.gz")
if(NOT EXISTS "${_catch_tgz}")
  message(STATUS "course: Catch2 not installed, downloading v3.4.0")
  file(DOWNLOAD "${COURSE_CATCH2_FETCH_URL}" "${_catch_tgz}" TIMEOUT 60 STATUS _dl_status)
  list(GET _dl_status 0 _dl_code)
  if(NOT _dl_code EQUAL 0)
    file(REMOVE "${_catch_tgz}")
    list(GET _dl_status 1 _dl_msg)
    message(FATAL_ERROR "course: Catch2 is not installed and could not be downloaded "
                        "(${_dl_msg}). ${_catch_help}")
  endif()
endif()
include(FetchContent)
FetchContent_Declare(Catch2 URL "${_catch_tgz}")
FetchContent_MakeAvailable(Catch2)
target_link_libraries(course_catch2 INTERFACE Catch2::Catch2)
target_compile_definitions(course_catch2 INTERFACE COURSE_CATCH2_V3=1)
