# Dependencies: all from Debian 12 packages (KAGI_BUILD_PACKAGES in scripts/lib/common.sh).
# The library's own (Threads, ctemplate, libpq, sqlite3, Boost headers) are found again by kagiConfig.cmake
# for a project that uses the installed package.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(CTEMPLATE REQUIRED IMPORTED_TARGET libctemplate)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
find_package(Boost 1.74 REQUIRED)
if(KAGI_TESTS)
  find_package(GTest REQUIRED)
endif()
if(KAGI_BENCH)
  find_package(benchmark REQUIRED)
endif()
