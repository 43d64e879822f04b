# The charting library of `sluice report` (Vega, Vega-Lite, vega-embed from the npm registry,
# pinned by web/package-lock.json) goes into libsluice_tools, so a report is a self-contained
# page and the library needs nothing installed beside it. `npm ci` runs at build time into the
# build tree; when npm or the registry is missing the build still succeeds and reports are
# tables only (the page says why). -DSLUICE_REPORT_CHARTS=OFF skips the fetch.
option(SLUICE_REPORT_CHARTS "sluice report: fetch the charting library with npm" ON)
find_program(SLUICE_NPM npm)
set(_report_web ${CMAKE_CURRENT_SOURCE_DIR}/report/web)
set(_report_assets ${PROJECT_BINARY_DIR}/generated/report_assets.cpp)
add_custom_command(
  OUTPUT ${_report_assets}
  COMMAND ${CMAKE_COMMAND} -DNPM=${SLUICE_NPM} -DENABLED=${SLUICE_REPORT_CHARTS}
          -DWEB=${_report_web} -DWORK=${PROJECT_BINARY_DIR}/report-web -DOUT=${_report_assets}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/report/fetch_assets.cmake
  DEPENDS ${_report_web}/package.json ${_report_web}/package-lock.json
          ${CMAKE_CURRENT_SOURCE_DIR}/report/fetch_assets.cmake
  COMMENT "sluice report: fetching the charting library (npm ci)"
  VERBATIM)
target_sources(sluice_tools_objects PRIVATE ${_report_assets})
