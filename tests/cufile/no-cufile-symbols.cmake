# ctest script: compiles inline_helpers.c, which calls every inline helper of cufile.h, against the
# header laid out as installed (<prefix>/include/sluice/cufile.h), as C and as C++, at -O0 (the
# helpers are not folded away) and -O2, and fails if nm -u of an object lists a cuFile* or
# cufileop_* symbol: a program built against this header must need nothing from a cuFile library
# it does not link (KvikIO, DALI and cuda-python dlopen it). Then links and runs the C program
# with no cuFile library. A control object that calls cuFileDriverOpen must show it in nm -u.
# Arguments: -DCC= -DCXX= -DNM= -DHEADER= -DSOURCE= -DWORK=
foreach(var CC CXX NM HEADER SOURCE WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "no-cufile-symbols.cmake: -D${var}= is missing")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/include/sluice)
file(COPY ${HEADER} DESTINATION ${WORK}/include/sluice)
set(include -I${WORK}/include/sluice)

# Compiles SOURCE into OBJ with COMPILER and FLAGS; returns nm -u's output in OUT_VAR.
function(undefined_symbols out_var obj compiler)
  execute_process(COMMAND ${compiler} ${ARGN} ${include} -c ${SOURCE} -o ${obj}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "compiling ${SOURCE} (${ARGN}) failed: ${err}")
  endif()
  execute_process(COMMAND ${NM} -u ${obj} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -u ${obj} failed: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

set(cufile_symbol "[ \t](cuFile[A-Za-z0-9_]*|cufileop_[A-Za-z0-9_]*)")
set(i 0)
foreach(lang c c++)
  set(compiler ${CC})
  set(std -std=c11)
  if(lang STREQUAL "c++")
    set(compiler ${CXX})
    set(std -std=c++20)
  endif()
  foreach(opt -O0 -O2)
    math(EXPR i "${i} + 1")
    undefined_symbols(out ${WORK}/helpers${i}.o ${compiler} -x ${lang} ${std} ${opt} -Wall -Wextra)
    if(out MATCHES "${cufile_symbol}")
      message(FATAL_ERROR "${lang} ${opt}: the program needs ${CMAKE_MATCH_1} from a cuFile library:\n${out}")
    endif()
    message(STATUS "${lang} ${opt}: no cuFile symbol undefined")
  endforeach()
endforeach()

# The control: a real call does show up, so the check above can fail.
undefined_symbols(out ${WORK}/control.o ${CC} -x c -std=c11 -O0 -DCALL_THE_LIBRARY)
if(NOT out MATCHES "${cufile_symbol}")
  message(FATAL_ERROR "control: nm -u does not list cuFileDriverOpen; the check sees nothing:\n${out}")
endif()
message(STATUS "control: nm -u lists ${CMAKE_MATCH_1}")

# Linked with no cuFile library and run.
execute_process(COMMAND ${CC} -std=c11 -O0 ${include} ${SOURCE} -Wl,--no-undefined -o ${WORK}/helpers
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "linking without a cuFile library failed: ${err}")
endif()
# One argument: argc 2, so code 5002 (CU_FILE_DRIVER_INVALID_PROPS) and cu_err 2.
execute_process(COMMAND ${WORK}/helpers one RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^invalid property \\| invalid property \\| 1 0 2")
  message(FATAL_ERROR "the helpers gave '${out}' (exit ${rc}), not CU_FILE_DRIVER_INVALID_PROPS's text")
endif()
message(STATUS "linked without a cuFile library and ran: ${out}")
