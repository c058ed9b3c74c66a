# Install rules and Debian packages.
#
#   cmake --install BUILD --prefix PREFIX [--component dev|demo]
#   (cd BUILD && cpack -G DEB)      → libkagi-dev_<v>_<arch>.deb, kagi-demo_<v>_<arch>.deb
#
# Component `dev` (package libkagi-dev): headers under include/kagi/<module>/, the static
# libraries, the CMake package (find_package(kagi CONFIG) → kagi::kagi), kagi.pc for
# pkg-config, and kagi's templates (error pages, static assets) under share/kagi/templates.
# Component `demo` (package kagi-demo): kagi-demo, kagi-locks, kagi-fsck, kagi-lockd (the lock
# server, docs/LOCKD.md), its PHP client under share/kagi/clients/php, the conf examples under
# share/kagi/conf and the systemd units.
#
# Build packages from a RelWithDebInfo (or Debug) tree: Release objects are LTO-only, which
# another compiler version cannot link.
include(CMakePackageConfigHelpers)

set(KAGI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kagi)
set(KAGI_DATA_DIR ${CMAKE_INSTALL_DATADIR}/kagi)

get_property(kagi_module_targets GLOBAL PROPERTY KAGI_MODULE_TARGETS)
install(TARGETS ${kagi_module_targets} kagi
        EXPORT kagiTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${KAGI_SOURCE_ROOT} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.hpp")
install(EXPORT kagiTargets NAMESPACE kagi:: DESTINATION ${KAGI_CMAKE_DIR} COMPONENT dev)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kagiConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kagiConfig.cmake
                              INSTALL_DESTINATION ${KAGI_CMAKE_DIR}
                              PATH_VARS KAGI_DATA_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kagiConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kagiConfig.cmake ${PROJECT_BINARY_DIR}/kagiConfigVersion.cmake
        DESTINATION ${KAGI_CMAKE_DIR} COMPONENT dev)

# pkg-config: static libraries, so every module and system library is in Libs, in link order.
set(KAGI_PC_LIBS "")
foreach(module IN ITEMS serve server fcgi stats app view offline sqlite store lock lockd pg http config util)
  if(TARGET kagi_${module})
    string(APPEND KAGI_PC_LIBS " -lkagi_${module}")
  endif()
endforeach()
file(RELATIVE_PATH KAGI_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" KAGI_PC_TO_PREFIX "${KAGI_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kagi.pc.in ${PROJECT_BINARY_DIR}/kagi.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kagi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# kagi's own templates: the error pages and static assets a site falls back on, and the
# sample apps' pages kagi-demo renders.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${KAGI_DATA_DIR}/templates
        COMPONENT dev)

if(KAGI_APPS)
  install(TARGETS kagi-demo kagi-locks kagi-fsck kagi-lockd RUNTIME
          DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT demo)
  install(FILES ${PROJECT_SOURCE_DIR}/clients/php/KagiLock.php
          DESTINATION ${KAGI_DATA_DIR}/clients/php COMPONENT demo)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/conf/ DESTINATION ${KAGI_DATA_DIR}/conf
          COMPONENT demo)
  # The systemd units name the installed binary.
  foreach(unit IN ITEMS kagi.service kagi.socket kagi-lockd.service)
    file(READ ${PROJECT_SOURCE_DIR}/conf/systemd/${unit} text)
    string(REPLACE "/usr/local/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" text "${text}")
    file(WRITE ${PROJECT_BINARY_DIR}/systemd/${unit} "${text}")
    install(FILES ${PROJECT_BINARY_DIR}/systemd/${unit} DESTINATION lib/systemd/system
            COMPONENT demo)
  endforeach()
endif()

# Debian packages (cpack -G DEB).
set(CPACK_PACKAGE_NAME kagi)
set(CPACK_PACKAGE_VENDOR "kagi")
set(CPACK_PACKAGE_CONTACT "kagi developers <kagi@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 FastCGI web framework with request-scoped locking")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(KAGI_APPS)
  list(APPEND CPACK_COMPONENTS_ALL demo)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION web)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libkagi-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "kagi: headers, static libraries, CMake and pkg-config files\n"
    "Build your own FastCGI site on kagi: find_package(kagi CONFIG REQUIRED) and link\n"
    "kagi::kagi, or pkg-config --cflags --libs kagi.")
# What compiling and linking against the static libraries needs.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "g++ (>= 4:12), libboost-dev (>= 1.74), libctemplate-dev, libpq-dev, libsqlite3-dev, libcrypt-dev, pkg-config | pkgconf")
set(CPACK_DEBIAN_DEMO_PACKAGE_NAME kagi-demo)
set(CPACK_COMPONENT_DEMO_DESCRIPTION
    "kagi sample site (BBS, chat, lock admin) and tools\n"
    "kagi-demo serves the sample site over FastCGI or HTTP; kagi-locks shows who holds\n"
    "which lock; kagi-fsck checks and repairs data logs; kagi-lockd is a network lock\n"
    "server for kagi and PHP sites (LOCK key / ok / close to unlock).")
# Runtime libraries, from the binaries (dpkg-shlibdeps).
set(CPACK_DEBIAN_DEMO_PACKAGE_SHLIBDEPS ON)
# kagi-demo renders the templates libkagi-dev installs.
set(CPACK_DEBIAN_DEMO_PACKAGE_DEPENDS "libkagi-dev (= ${PROJECT_VERSION})")
include(CPack)
